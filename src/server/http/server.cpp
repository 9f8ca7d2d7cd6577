// Server lifecycle (bind, serve, attach, stop), limits, and the error paths httplib takes before or after a
// handler: unknown routes (404), wrong methods (405), bodies over the limit (413), handler exceptions (500).
#include "server/http/server.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <thread>

#include <sys/socket.h>

#include "server/http/connection_gate.h"
#include "server/http/http_internal.h"
#include "server/http/http_listener.h"
#include "util/utc_time.h"

namespace preface::server {

namespace {

constexpr int kListenBacklog = 1024;  // pending connections (the kernel caps it at net.core.somaxconn)

// GET routes that answer on every connection, over --max-connections too: health checks and scrapes must see a
// server that is busy refusing connections.
bool is_reserved(const httplib::Request& req) {
  return req.method == "GET" &&
         (req.path == "/health" || req.path == "/v1/health" || req.path == "/livez" || req.path == "/metrics");
}

size_t http_threads(const ServerOptions& o) {
  return static_cast<size_t>(o.n_http_threads > 0 ? o.n_http_threads : o.limits.max_in_flight + 8);
}

ListenerConfig listener_config(const ServerOptions& o) {
  ListenerConfig c;
  c.header_timeout_s = o.header_timeout_s;
  c.read_timeout_s = o.read_timeout_s;
  c.write_timeout_s = o.write_timeout_s;
  c.keep_alive_timeout_s = o.keep_alive_timeout_s;
  c.max_per_client = o.max_connections_per_client > 0 ? o.max_connections_per_client
                                                       : std::max<int32_t>(static_cast<int32_t>(http_threads(o) / 2), 1);
  c.retry_after_s = o.limits.retry_after_s;
  c.trusted_proxies = o.trusted_proxies;
  return c;
}

}  // namespace

namespace {

// CORS: sets Access-Control-Allow-Origin (and what a page may read) when the request's Origin is allowed;
// false when it carries an Origin that is not.
bool add_cors_headers(const ServerOptions& options, const httplib::Request& req, httplib::Response& res) {
  const std::string origin = req.get_header_value("Origin");
  if (origin.empty()) return true;
  const auto& allowed = options.cors_origins;
  const bool any = std::find(allowed.begin(), allowed.end(), "*") != allowed.end();
  if (!any && std::find(allowed.begin(), allowed.end(), origin) == allowed.end()) return false;
  res.set_header("Access-Control-Allow-Origin", any ? "*" : origin);
  if (!any) res.set_header("Vary", "Origin");
  res.set_header("Access-Control-Expose-Headers", "X-Request-Id, X-Preface-Warnings, X-Preface-Cache-Explain");
  return true;
}

}  // namespace

void HttpState::log(const std::string& line) const {
  if (!options.log_requests) return;
  if (options.log_sink) {
    options.log_sink(line);
    return;
  }
  // On stderr each line starts with its UTC time, to the millisecond.
  std::fprintf(stderr, "%s %s\n", utc_time(std::chrono::system_clock::now(), 3).c_str(), line.c_str());
}

static_assert(kMaxHeaderLineBytes == CPPHTTPLIB_HEADER_MAX_LENGTH, "the header limit stated in server.h is httplib's");

struct Server::Impl {
  explicit Impl(ServerOptions o) : http(listener_config(o)) { state.options = std::move(o); }
  HttpState state;
  HttpListener http;
  // The task queue of the running listen loop (owned by httplib, alive while its threads run); only dereferenced
  // on those threads.
  std::atomic<ConnectionGate*> gate{nullptr};
  std::unique_ptr<ServerContext> ctx;  // published through state.ctx
  std::thread thread;
  int port = -1;
  bool stopped = false;
};

namespace {

void install_error_paths(HttpListener& http, HttpState& state, std::atomic<ConnectionGate*>& gate) {
  using HR = httplib::Server::HandlerResponse;
  // Connections over --max-connections are processed on the gate's refuser threads: refuse their requests before
  // any route runs (and before a body is read).
  http.set_pre_routing_handler([&state, &gate, &http](const httplib::Request& req, httplib::Response& res) {
    // Bodies are JSON whatever their Content-Type. `curl -d` sends application/x-www-form-urlencoded, which
    // httplib (a compiled library: its 8 KiB form limit cannot be raised) would parse as a form and refuse above
    // 8 KiB with a 413; the body is read after this handler, so the type is set to what the body is. The
    // request object is httplib's own non-const one, handed here as const.
    if (req.get_header_value("Content-Type").rfind("application/x-www-form-urlencoded", 0) == 0) {
      auto& headers = const_cast<httplib::Headers&>(req.headers);
      headers.erase("Content-Type");
      headers.emplace("Content-Type", "application/json");
    }
    adopt_request_id(req.get_header_value("X-Request-Id"));
    res.set_header("X-Request-Id", current_request().id);
    if (state.draining.load()) res.set_header("Connection", "close");  // the connection closes after this answer
    if (!is_reserved(req) && !http.admit_forwarded(req)) {  // a client behind a trusted proxy, over its limit
      res.set_header("Retry-After", std::to_string(state.options.limits.retry_after_s));
      send_error(state, req, res,
                 ApiError(429, "too many requests from " + http.client_of(req) + " at once (limit " +
                                   std::to_string(http.max_per_client()) + "); retry later"));
      return HR::Handled;
    }
    const ConnectionGate* g = gate.load(std::memory_order_acquire);
    if (g == nullptr || !g->is_refuser_thread()) return HR::Unhandled;
    res.set_header("Connection", "close");
    if (is_reserved(req)) return HR::Unhandled;
    res.set_header("Connection", "close");
    send_error(state, req, res,
               ApiError(503, "the server has too many open connections (limit " +
                                 std::to_string(state.options.max_connections) + "); retry later"));
    return HR::Handled;
  });
  if (!state.options.cors_origins.empty()) {
    http.Options(".*", [&state](const httplib::Request& req, httplib::Response& res) {
      if (!add_cors_headers(state.options, req, res)) {
        send_error(state, req, res, ApiError(403, "the origin '" + req.get_header_value("Origin") +
                                                      "' is not allowed (--cors-origin)"));
        return;
      }
      res.set_header("Access-Control-Allow-Methods", "GET, POST, DELETE, OPTIONS");
      const std::string asked = req.get_header_value("Access-Control-Request-Headers");
      res.set_header("Access-Control-Allow-Headers",
                     asked.empty() ? "Authorization, Content-Type, X-Api-Key, Anthropic-Version" : asked);
      res.set_header("Access-Control-Max-Age", "600");
      res.status = 204;
    });
    http.set_post_routing_handler([&state](const httplib::Request& req, httplib::Response& res) {
      if (req.method != "OPTIONS") add_cors_headers(state.options, req, res);
    });
  }
  // Called for every response with status >= 400; handlers that already wrote an error body are left alone.
  http.set_error_handler(httplib::Server::HandlerWithResponse([&state](const httplib::Request& req,
                                                                      httplib::Response& res) {
    if (!res.body.empty()) return HR::Unhandled;
    if (res.status == 404) {
      if (const Route* route = find_route(req.path)) {
        const char* method = route->method;
        res.set_header("Allow", method);
        send_error(state, req, res,
                   ApiError(405, "method " + req.method + " is not allowed on " + req.path + " (use " + method + ")"));
        return HR::Handled;
      }
      send_error(state, req, res, ApiError(404, "no route for " + req.method + " " + req.path));
      return HR::Handled;
    }
    if (res.status == 413) {
      send_error(state, req, res,
                 ApiError(413, "the request body is larger than the limit of " +
                                   std::to_string(state.options.limits.max_body_bytes) + " bytes"));
      return HR::Handled;
    }
    send_error(state, req, res, ApiError(res.status, "the request could not be processed (HTTP " +
                                                         std::to_string(res.status) + ")"));
    return HR::Handled;
  }));
  http.set_exception_handler([&state](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
    try {
      std::rethrow_exception(ep);
    } catch (const ApiError& e) {
      send_error(state, req, res, e);
    } catch (const std::exception& e) {
      send_error(state, req, res, ApiError(500, std::string("internal error: ") + e.what()));
    } catch (...) {
      send_error(state, req, res, ApiError(500, "internal error"));
    }
  });
  http.set_logger([&state, &http](const httplib::Request& req, const httplib::Response& res) {
    state.metrics.on_response(find_route(req.path) != nullptr ? req.path : "other", res.status);
    const RequestRecord& r = current_request();
    if (!r.deferred) state.log(request_log_line(r, req.method, req.path, res.status, http.client_of(req), ""));
  });
}

}  // namespace

Server::Server(ServerOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {
  const ServerOptions& o = impl_->state.options;
  const size_t n_threads = http_threads(o);
  const int32_t max_connections = std::max<int32_t>(o.max_connections, 1);
  impl_->http.new_task_queue = [impl = impl_.get(), n_threads, max_connections] {
    auto* gate = new ConnectionGate(static_cast<int32_t>(n_threads), max_connections);
    impl->gate.store(gate, std::memory_order_release);
    return gate;
  };
  impl_->http.set_payload_max_length(o.limits.max_body_bytes);
  impl_->http.set_tcp_nodelay(true);
  impl_->http.on_overflow_thread = [impl = impl_.get()] {
    const ConnectionGate* g = impl->gate.load(std::memory_order_acquire);
    return g != nullptr && g->is_refuser_thread();
  };
  impl_->http.on_request_start = [](std::chrono::steady_clock::time_point t) { begin_request(t); };
  impl_->http.on_refused = [state = &impl_->state](const RefusedConnection& r) {
    state->metrics.on_response("other", r.status);
    RequestRecord rec;
    rec.reason = r.reason;
    rec.start = std::chrono::steady_clock::now() -
                std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                    std::chrono::duration<double, std::milli>(r.latency_ms));
    state->log(request_log_line(rec, "", "", r.status, r.client, ""));
  };
  // SO_REUSEADDR only: httplib's default adds SO_REUSEPORT, with which a second server on the same port starts
  // without error and the kernel splits the connections between the two processes.
  impl_->http.set_socket_options([](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  install_error_paths(impl_->http, impl_->state, impl_->gate);
  register_routes(impl_->http, impl_->state);
}

Server::~Server() { stop(); }

int Server::bind() {
  const ServerOptions& o = impl_->state.options;
  if (o.port == 0) {
    impl_->port = impl_->http.bind_to_any_port(o.host);
  } else if (impl_->http.bind_to_port(o.host, o.port)) {
    impl_->port = o.port;
  }
  if (impl_->port <= 0) {
    const int err = errno;
    throw Error("cannot listen on " + o.host + ":" + std::to_string(o.port) + " (" + std::strerror(err) + ")" +
                (err == EADDRINUSE ? ": another process is listening there" : ""));
  }
  if (!impl_->http.widen_backlog(kListenBacklog)) throw Error(std::string("listen() failed: ") + std::strerror(errno));
  return impl_->port;
}

void Server::start() {
  if (impl_->port <= 0) bind();
  impl_->thread = std::thread([this] { impl_->http.listen_after_bind(); });
  // stop() is a no-op on a server not yet running, so wait until it runs.
  for (int i = 0; i < 5000 && !impl_->http.is_running(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  if (!impl_->http.is_running()) throw Error("the HTTP server did not start on port " + std::to_string(impl_->port));
}

void Server::attach(engine::Engine& engine, const Tokenizer& tokenizer, const ModelIdentity& identity) {
  if (impl_->ctx) throw Error("the server already serves a model");
  const std::string file_name = std::filesystem::path(identity.path).filename().string();
  const std::string stem = std::filesystem::path(identity.path).stem().string();
  const std::string model_id = identity.aliases.empty() ? file_name : identity.aliases.front();
  const ChatTemplate tmpl = identity.chat_template.value_or(detect_chat_template(identity.chat_template_source));
  std::vector<std::string> names{file_name, stem, identity.path};
  names.insert(names.end(), identity.aliases.begin(), identity.aliases.end());
  impl_->ctx = std::make_unique<ServerContext>(engine, tokenizer, tmpl, model_id, std::move(names),
                                               impl_->state.options.strict_model_names, impl_->state.options.limits,
                                               impl_->state.metrics);
  // The model's Jinja template (or the family asked for); a template that does not parse or raises on a single
  // user message throws here, before the server answers anything.
  impl_->ctx->chat_renderer = chat::ChatRenderer::for_model(tokenizer, identity.chat_template_source,
                                                            identity.chat_template, identity.chat_template_jinja,
                                                            identity.chat_template_tool_use);
  impl_->state.ctx.store(impl_->ctx.get());
}

void Server::stop() { (void)drain(std::chrono::milliseconds(0)); }

int32_t Server::drain(std::chrono::milliseconds grace) {
  if (impl_->stopped) return 0;
  impl_->stopped = true;
  InFlight& in_flight = impl_->state.in_flight;
  impl_->state.draining.store(true);
  impl_->http.begin_drain();     // every open connection closes after the request it serves; idle ones now
  impl_->http.stop_accepting();  // the listen thread ends its accept loop, then waits for the connections
  const auto deadline = std::chrono::steady_clock::now() + grace;
  while ((in_flight.size() > 0 || impl_->http.n_connections() > 0) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  in_flight.refuse_new();
  const int32_t n_cancelled = in_flight.size();
  in_flight.close();  // streams end with their final (error) event
  if (impl_->thread.joinable()) impl_->thread.join();
  return n_cancelled;
}

int Server::port() const { return impl_->port; }

int32_t Server::n_in_flight() const { return impl_->state.in_flight.size(); }

const ServerContext* Server::context() const { return impl_->state.ctx.load(); }

}  // namespace preface::server
