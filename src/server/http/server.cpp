// Server lifecycle (bind, serve, attach, stop), limits, and the error paths httplib takes before or after a
// handler: unknown routes (404), wrong methods (405), bodies over the limit (413), handler exceptions (500).
#include "server/http/server.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <thread>

#include <sys/socket.h>

#include "server/http/connection_gate.h"
#include "server/http/http_internal.h"

namespace preface::server {

namespace {

constexpr int kListenBacklog = 1024;  // pending connections (the kernel caps it at net.core.somaxconn)

// httplib 0.11 listens with a backlog of 5, so a burst of connections (16 clients at once) overflows the accept
// queue and the kernel resets some of them. Linux lets listen() be called again to enlarge the backlog.
class HttpListener : public httplib::Server {
 public:
  bool widen_backlog(int n_backlog) { return ::listen(svr_sock_, n_backlog) == 0; }
};

}  // namespace

static_assert(kMaxHeaderLineBytes == CPPHTTPLIB_HEADER_MAX_LENGTH, "the header limit stated in server.h is httplib's");

struct Server::Impl {
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

void install_error_paths(httplib::Server& http, HttpState& state, std::atomic<ConnectionGate*>& gate) {
  using HR = httplib::Server::HandlerResponse;
  // Connections over --max-connections are processed on the gate's refuser threads: refuse their requests before
  // any route runs (and before a body is read).
  http.set_pre_routing_handler([&state, &gate](const httplib::Request& req, httplib::Response& res) {
    const ConnectionGate* g = gate.load(std::memory_order_acquire);
    if (g == nullptr || !g->is_refuser_thread()) return HR::Unhandled;
    res.set_header("Connection", "close");
    send_error(state, req, res,
               ApiError(503, "the server has too many open connections (limit " +
                                 std::to_string(state.options.max_connections) + "); retry later"));
    return HR::Handled;
  });
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
  http.set_logger([&state](const httplib::Request& req, const httplib::Response& res) {
    state.metrics.on_response(find_route(req.path) != nullptr ? req.path : "other", res.status);
  });
}

}  // namespace

Server::Server(ServerOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->state.options = std::move(options);
  const ServerOptions& o = impl_->state.options;
  const auto n_threads = static_cast<size_t>(o.n_http_threads > 0 ? o.n_http_threads : o.limits.max_in_flight + 8);
  const int32_t max_connections = std::max<int32_t>(o.max_connections, 1);
  impl_->http.new_task_queue = [impl = impl_.get(), n_threads, max_connections] {
    auto* gate = new ConnectionGate(static_cast<int32_t>(n_threads), max_connections);
    impl->gate.store(gate, std::memory_order_release);
    return gate;
  };
  impl_->http.set_payload_max_length(o.limits.max_body_bytes);
  impl_->http.set_read_timeout(o.read_timeout_s, 0);
  impl_->http.set_write_timeout(o.write_timeout_s, 0);
  impl_->http.set_keep_alive_timeout(o.keep_alive_timeout_s);
  impl_->http.set_tcp_nodelay(true);
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
                                                            identity.chat_template, identity.chat_template_jinja);
  impl_->state.ctx.store(impl_->ctx.get());
}

void Server::stop() {
  if (impl_->stopped) return;
  impl_->stopped = true;
  impl_->state.in_flight.close();
  impl_->http.stop();
  if (impl_->thread.joinable()) impl_->thread.join();
}

int Server::port() const { return impl_->port; }

int32_t Server::n_in_flight() const { return impl_->state.in_flight.size(); }

const ServerContext* Server::context() const { return impl_->state.ctx.load(); }

}  // namespace preface::server
