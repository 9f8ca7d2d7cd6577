// Running one generation over HTTP: in-flight accounting, the JSON or SSE response, disconnect handling and the
// per-request log line.
#include <chrono>
#include <cstdio>

#include "server/http/auth.h"
#include "server/http/client_socket.h"
#include "server/http/http_internal.h"

namespace preface::server {

InFlight::Slot::~Slot() {
  std::lock_guard lock(owner_->mu_);
  owner_->streams_.erase(id_);
}

void InFlight::Slot::attach(const std::shared_ptr<engine::RequestStream>& stream) {
  std::lock_guard lock(owner_->mu_);
  owner_->streams_[id_] = stream;
  if (owner_->closing_) stream->cancel();
}

std::unique_ptr<InFlight::Slot> InFlight::acquire(int32_t limit) {
  std::lock_guard lock(mu_);
  if (closing_ || static_cast<int32_t>(streams_.size()) >= limit) return nullptr;
  const uint64_t id = next_id_++;
  streams_.emplace(id, nullptr);
  return std::make_unique<Slot>(*this, id);
}

void InFlight::close() {
  std::lock_guard lock(mu_);
  closing_ = true;
  for (auto& [id, stream] : streams_) {
    if (stream) stream->cancel();
  }
}

void InFlight::refuse_new() {
  std::lock_guard lock(mu_);
  closing_ = true;
}

bool InFlight::closing() const {
  std::lock_guard lock(mu_);
  return closing_;
}

int32_t InFlight::size() const {
  std::lock_guard lock(mu_);
  return static_cast<int32_t>(streams_.size());
}

void send_json(httplib::Response& res, const nlohmann::json& body, int status) {
  res.status = status;
  res.set_content(dump_json(body), "application/json");
}

void send_error(HttpState& state, const httplib::Request& req, httplib::Response& res, const ApiError& e) {
  current_request().reason = e.what();
  if (e.status == 503) res.set_header("Retry-After", std::to_string(state.options.limits.retry_after_s));
  const Route* route = find_route(req.path);  // an unknown path: the API its prefix names
  send_json(res, error_body(route != nullptr ? route->flavor : flavor_for_path(req.path), e), e.status);
}

namespace {

// " pins=12@300s,40@300s" for the request's cache_control breakpoints ("" when none).
std::string pins_text(const std::vector<engine::CachePin>& pins) {
  std::string out;
  for (const engine::CachePin& p : pins) {
    out += out.empty() ? " pins=" : ",";
    out += std::to_string(p.n_tokens) + "@" + std::to_string(p.ttl.count()) + "s";
  }
  return out;
}

// The request's log line, with the generation's counts (server/http/request_log.h).
void log_generation(const HttpState& state, const RequestRecord& record, const std::string& method,
                    const std::string& path, const std::string& client, int status, const Generation& gen,
                    const std::string& note) {
  if (!state.options.log_requests) return;
  const GenerationSummary& s = gen.summary();
  char fields[256];
  std::snprintf(fields, sizeof fields, " prompt=%d cached=%d written=%d generated=%d ttft=%.1fms finish=%s",
                s.stats.n_prompt_tokens, s.stats.n_cached_tokens, s.stats.n_written_tokens, s.n_completion_tokens,
                s.stats.first_token_ms, stop_kind_names(s.kind).label);
  state.log(request_log_line(record, method, path, status, client, fields + note));
}

// State of one streaming response, shared by the content provider and its releaser (same worker thread).
struct StreamJob {
  HttpState* state;
  ServerContext* ctx;
  std::string tenant;
  kv::Digest ns;     // the request's cache namespace
  std::unique_ptr<InFlight::Slot> slot;
  std::unique_ptr<Generation> gen;
  std::unique_ptr<ResponseFormat> format;
  std::string method, path, client;
  RequestRecord record;  // the request's log record (the stream's thread-local one may be reset by then)
  std::string pins;  // log text of the request's pins
  bool started = false;
  bool ended = false;

  // Records the end of the generation once (metrics and log line).
  void end(const char* note) {
    if (ended) return;
    ended = true;
    ctx->tenants.note(ctx->engine, tenant, ns);  // again: a prune while it ran may have dropped it
    state->metrics.on_generation(gen->summary());
    log_generation(*state, record, method, path, client, 200, *gen, pins + note);
    state->cache_stats.on_generation(tenant, gen->summary(), ctx->engine.counters());
  }
};

// The warnings as one header value: "; "-joined, printable ASCII only, at most 2000 bytes.
std::string warnings_header(const std::vector<std::string>& warnings) {
  std::string out;
  for (const std::string& w : warnings) {
    if (!out.empty()) out += "; ";
    for (const char c : w) out += c >= 0x20 && c < 0x7F ? c : '?';
  }
  if (out.size() > 2000) out = out.substr(0, 1997) + "...";
  return out;
}

bool write(httplib::DataSink& sink, const std::string& text) {
  return text.empty() || sink.write(text.data(), text.size());
}

}  // namespace

engine::CacheExplanation explain_for_tenant(ServerContext& ctx, const std::string& tenant,
                                            std::span<const int32_t> prompt, const std::string& salt) {
  const std::vector<kv::Digest> siblings = ctx.tenants.namespaces_of(tenant, kMaxExplainSiblings);
  return ctx.engine.explain_cache(prompt, salt, siblings);
}

std::unique_ptr<InFlight::Slot> acquire_slot(HttpState& state, const ServerContext& ctx) {
  std::unique_ptr<InFlight::Slot> slot = state.in_flight.acquire(ctx.limits.max_in_flight);
  if (!slot) {
    throw ApiError(503, state.in_flight.closing() ? "the server is shutting down"
                                                   : "the server is overloaded: too many requests in flight");
  }
  return slot;
}

void serve_generation(HttpState& state, ServerContext& ctx, const httplib::Request& req, httplib::Response& res,
                      std::unique_ptr<InFlight::Slot> slot, GenerationRequest request,
                      std::unique_ptr<ResponseFormat> format, bool stream) {
  engine::RequestParams& params = request.params;
  const std::string tenant = authenticate(state.options, req);
  params.cache_salt = tenant_cache_salt(tenant, params.cache_salt);
  params.pin_group = tenant;
  const kv::Digest ns = ctx.engine.cache_namespace(params.cache_salt);
  ctx.tenants.note(ctx.engine, tenant, ns);
  if (request.cache_explain || req.get_header_value("X-Preface-Cache-Explain") == "1") {
    const engine::CacheExplanation e = explain_for_tenant(ctx, tenant, params.prompt, params.cache_salt);
    res.set_header("X-Preface-Cache-Explain", cache_explain_header(e));
    format->add_field("cache_explain", cache_explain_json(e, ctx.tokenizer));
  }
  if (!request.warnings.empty()) {
    format->add_field("warnings", request.warnings);
    res.set_header("X-Preface-Warnings", warnings_header(request.warnings));
  }
  const std::string pins = pins_text(params.cache_pins);
  const auto n_prompt = static_cast<int64_t>(params.prompt.size());
  const Route* route = find_route(req.path);
  const char* prompt_field = route != nullptr ? route->prompt_field : "";
  if (ctx.limits.max_prompt_tokens > 0 && n_prompt > ctx.limits.max_prompt_tokens) {  // a server policy
    throw ApiError(400,
                   "the prompt is " + std::to_string(n_prompt) + " tokens; this server accepts at most " +
                       std::to_string(ctx.limits.max_prompt_tokens),
                   prompt_field, "context_length_exceeded");
  }
  std::unique_ptr<Generation> gen;
  try {
    gen = std::make_unique<Generation>(ctx.engine, ctx.tokenizer, std::move(request));
  } catch (const engine::PromptTooLong& e) {  // the model's context or the whole KV cache
    throw ApiError(400, e.what(), prompt_field, "context_length_exceeded");
  } catch (const Error& e) {
    throw ApiError(400, e.what());
  }
  slot->attach(gen->stream());

  if (!stream) {
    // Nobody would read the answer of a client that left: look for it between tokens and cancel.
    ClientSocket client = ClientSocket::of(req);
    auto last_check = std::chrono::steady_clock::now();
    bool client_gone = false;
    std::string text, reasoning;
    std::vector<ChannelCall> calls;
    std::vector<TokenLogprob> logprobs;
    while (auto d = gen->next()) {
      text += d->text;
      reasoning += d->reasoning;
      for (grammar::ToolCallEvent& e : d->calls) {
        if (e.kind == grammar::ToolCallEvent::Kind::CallStart) {
          calls.push_back({std::move(e.text), {}});
        } else if (!calls.empty()) {
          calls.back().arguments += e.text;
        }
      }
      logprobs.insert(logprobs.end(), d->logprobs.begin(), d->logprobs.end());
      const auto now = std::chrono::steady_clock::now();
      if (now - last_check >= std::chrono::milliseconds(20)) {
        last_check = now;
        if (!client_gone && client.gone()) {
          client_gone = true;
          gen->cancel();
        }
      }
    }
    const GenerationSummary& s = gen->summary();
    ctx.tenants.note(ctx.engine, tenant, ns);
    state.metrics.on_generation(s);
    const int status = client_gone ? 499 : s.kind == StopKind::Error ? 500 : s.kind == StopKind::Cancelled ? 503 : 200;
    log_generation(state, current_request(), req.method, req.path, request_client(state, req), status, *gen,
                   pins + (client_gone ? " (client gone)" : ""));
    current_request().deferred = true;  // this was the request's line
    state.cache_stats.on_generation(tenant, s, ctx.engine.counters());
    if (client_gone) {
      res.status = 499;  // nginx's "client closed request": nobody reads it
      return;
    }
    if (s.kind == StopKind::Error) throw ApiError(500, "generation failed: " + s.error);
    if (s.kind == StopKind::Cancelled) throw ApiError(503, "the request was cancelled: the server is shutting down");
    send_json(res, format->full_response(text, reasoning, calls, logprobs, s));
    return;
  }

  auto job = std::make_shared<StreamJob>();
  job->state = &state;
  job->ctx = &ctx;
  job->tenant = tenant;
  job->ns = ns;
  job->slot = std::move(slot);
  job->gen = std::move(gen);
  job->format = std::move(format);
  job->method = req.method;
  job->path = req.path;
  job->client = request_client(state, req);
  job->record = current_request();
  current_request().deferred = true;  // the stream writes the request's line when it ends
  job->pins = pins;
  res.status = 200;
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  const std::string content_type = job->format->stream_content_type();
  res.set_chunked_content_provider(
      content_type,
      [job](size_t, httplib::DataSink& sink) {
        Generation& g = *job->gen;
        if (!job->started) {
          job->started = true;
          std::string out;
          if (job->format->start_after_first_token()) {
            const std::optional<GenerationDelta> first = g.next();
            job->format->set_prompt_cache(g.prompt_cached_tokens(), g.prompt_written_tokens());
            out = job->format->stream_start(g.n_prompt_tokens());
            if (first) out += job->format->stream_delta(*first);
          } else {
            out = job->format->stream_start(g.n_prompt_tokens());
          }
          if (!write(sink, out)) {
            g.cancel();
            return false;
          }
          return true;
        }
        if (!g.done()) {
          if (auto d = g.next(); d && !write(sink, job->format->stream_delta(*d))) {
            g.cancel();
            return false;
          }
          if (!g.done()) return true;
        }
        const bool ok = write(sink, job->format->stream_end(g.summary()));
        job->end("");
        if (!ok) return false;
        sink.done();
        return true;
      },
      [job](bool success) {
        if (job->ended) return;
        // The client went away (or the server is stopping): cancel and wait for the engine to let go.
        job->gen->cancel();
        while (job->gen->next()) {
        }
        job->end(success ? "" : " (stream aborted: client gone or server stopping)");
      });
}

}  // namespace preface::server
