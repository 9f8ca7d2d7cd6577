// The HTTP server behind `preface serve`: OpenAI- and Anthropic-compatible endpoints over one engine.
//
//   POST /v1/completions, /v1/chat/completions   OpenAI (server/openai_api.h)
//   POST /v1/messages, /v1/messages/count_tokens Anthropic (server/anthropic_api.h)
//   GET  /v1/models                               the served model
//   GET  /health                                  readiness: 503 until the model is attached, while draining and
//                                                 while the engine is stalled (see liveness_timeout_s), else 200
//   GET  /livez                                   liveness: 503 only while the engine is stalled
//   GET  /metrics                                 Prometheus text (server/metrics.h)
//   POST /tokenize, /detokenize                   llama.cpp server shapes
//   DELETE /v1/cache                              admin: purge a tenant's cached blocks (server/auth.h)
//   GET  /v1/cache/stats, /dashboard              the cache's history and prefixes, and a page that charts them
//                                                 (server/http/http_dashboard.cpp)
//
// Auth: with api_keys configured every route except GET /health, /v1/health, /livez and /metrics needs a key (401
// otherwise); the cache namespace is derived from the key's tenant (server/auth.h).
//
// Errors come in each API's own shape (server/api_error.h): invalid JSON, wrong types, bad values, unknown model,
// a prompt that does not fit: 400; unknown route: 404; wrong method: 405 (with Allow); body over
// limits.max_body_bytes: 413; more than limits.max_in_flight generations admitted at once (running or queued in
// the engine; --max-queued-requests), or the model still loading: 503 with Retry-After. More messages, prompt
// tokens or max_tokens than the limits allow: 400. A header line over kMaxHeaderLineBytes (8 KiB, compiled into
// Debian's libcpp-httplib, so not configurable here): 400. More than max_connections connections at once (served
// or waiting for an HTTP thread): each request on an extra connection gets 503 + Retry-After + Connection: close
// from a small refuser pool, without reading its body (server/connection_gate.h).
//
// Slow clients (server/http/http_listener.h): each request must arrive whole within header_timeout_s of its first
// byte (else 408); at most max_connections_per_client connections of one address are processed at once (more
// get 429 before their request is read; behind a trusted proxy, per request of the forwarded client).
// GET /health, /v1/health, /livez and /metrics are reserved: they answer even on a connection over max_connections.
//
// Lifecycle: bind() -> start() (serves /health 503) -> attach(engine, ...) -> ... -> drain() / stop(). A client
// that disconnects has its request cancelled (its KV blocks are freed at the engine's next step); one that only
// shut down its sending side still gets its answer. drain(grace) closes the listening socket (new connections
// are refused, so a proxy sends them to another replica), answers /health 503, and for up to `grace` goes on
// serving what arrives on connections already open (each closes after its answer: a request a proxy sent on a
// kept-alive connection before it noticed is served, not refused); then it cancels what is left (streams end
// with an error event) and waits for the handlers. stop() is drain(0). The engine must keep running until they
// return.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>

#include "engine/engine.h"
#include "server/http/trusted_proxy.h"
#include "chat/chat_template.h"
#include "server/api/context.h"
#include "tokenizer/tokenizer.h"

namespace preface::server {

// httplib's limit on one request or header line (CPPHTTPLIB_HEADER_MAX_LENGTH). Debian ships httplib as a compiled
// library (libcpp-httplib.so), where the request parser lives, so redefining the macro here would change nothing
// but the declarations our translation units see (an ODR hazard): the value is stated, not set.
constexpr size_t kMaxHeaderLineBytes = 8192;

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                   // 0: any free port (see Server::port())
  int32_t n_http_threads = 0;        // 0: limits.max_in_flight + 8 (a streaming request holds a thread)
  int32_t max_connections = 128;     // connections admitted at once (>= 1); more get 503 (see above)
  ServerLimits limits;
  int32_t read_timeout_s = 30;       // one read of a request (the whole request: header_timeout_s)
  int32_t write_timeout_s = 30;      // one write to a client that does not read
  int32_t keep_alive_timeout_s = 5;  // an idle keep-alive connection
  int32_t header_timeout_s = 20;     // a whole request (line, headers, body) from its first byte; more: 408
  // Connections of one client address processed at once; more get 429 (0: half the HTTP threads, at least 1).
  int32_t max_connections_per_client = 0;
  // Peers taken for proxies (--trusted-proxy): their requests' client is the one X-Forwarded-For names, for the
  // per-client limit and the request log (server/http/trusted_proxy.h). Empty: the peer is the client.
  TrustedProxies trusted_proxies;
  // /health and /livez answer 503 while the engine has been inside one step longer than this (--liveness-timeout).
  double liveness_timeout_s = 300;
  bool log_requests = true;          // one line per HTTP request (server/http/request_log.h)
  std::function<void(const std::string&)> log_sink;  // where those lines go (empty: stderr)
  // --debug-invariants: each /metrics scrape also walks the KV pool's and scheduler's invariants under the
  // engine's step lock (the preface_kv_invariants_ok gauge). Off: /metrics reads counters only.
  bool debug_invariants = false;
  // Tenancy (server/auth.h): API key -> tenant name. Empty: no authentication, one shared tenant.
  std::unordered_map<std::string, std::string> api_keys;
  std::string admin_key;             // may call DELETE /v1/cache ("" = nobody)
  // /metrics shows per-tenant series only to a scrape presenting this key (or the admin key); aggregate series
  // are open. "" = per-tenant series only with the admin key.
  std::string metrics_key;
  // --strict-model-names: a `model` that is not one of the model's names gets 404 model_not_found. Off (the
  // default, as llama.cpp's server): a single-model server answers any `model` with its one model and reports
  // the served name.
  bool strict_model_names = false;
  // Origins whose pages may call the API from a browser (--cors-origin; "*": any). Empty: no CORS headers, and
  // OPTIONS is 405. A request from an allowed Origin gets Access-Control-Allow-Origin; a preflight (OPTIONS) is
  // answered 204 with the methods and the headers it asked for, without a key.
  std::vector<std::string> cors_origins;
};

// What attach() needs to know about the model beyond the engine.
struct ModelIdentity {
  std::string path;                               // the GGUF path (its file name is an accepted model name)
  // --alias (repeatable): the first is the reported model id (none: the file name); all are accepted names.
  std::vector<std::string> aliases;
  std::optional<ChatTemplate> chat_template;      // --chat-template ("" = detect from chat_template_source)
  std::string chat_template_source;               // the GGUF's tokenizer.chat_template ("" when it has none)
  std::optional<std::string> chat_template_jinja; // --chat-template FILE / --chat-template-file: its Jinja text
  std::string chat_template_tool_use;             // the GGUF's tokenizer.chat_template.tool_use ("" when none)
};

class Server {
 public:
  explicit Server(ServerOptions options);
  ~Server();  // stop()
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds the listening socket; returns the port. Throws preface::Error when the address cannot be used.
  int bind();
  // Serves on a background thread (bind() first).
  void start();
  // Serves the APIs with this engine from now on (once). The engine must be started and outlive stop().
  void attach(engine::Engine& engine, const Tokenizer& tokenizer, const ModelIdentity& identity);
  // Stops accepting, cancels in-flight generations, waits for handlers. Idempotent.
  void stop();
  // Stops accepting new connections and answers /health 503; serves what arrives on open connections (each then
  // closes) until they are all closed and no generation is in flight, for at most `grace`; then refuses new
  // requests (503), cancels the generations left and waits for handlers. Returns the number cancelled.
  // Idempotent (later calls: 0).
  int32_t drain(std::chrono::milliseconds grace);

  int port() const;
  int32_t n_in_flight() const;
  // Valid after attach(): the chat template in use and the reported model id.
  const ServerContext* context() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace preface::server
