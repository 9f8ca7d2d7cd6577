// Internals of the HTTP layer shared by server.cpp (lifecycle, errors), http_routes.cpp (handlers) and
// http_generate.cpp (running a generation over HTTP). Not part of the server module's interface.
#pragma once
#include <httplib.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>

#include "server/api/api_error.h"
#include "server/api/cache_explain.h"
#include "server/api/context.h"
#include "server/api/generation.h"
#include "server/http/request_log.h"
#include "server/http/server.h"
#include "server/observability/cache_stats.h"

namespace preface::server {

// The generations being served, so that shutdown can cancel them and overload can be refused.
class InFlight {
 public:
  class Slot {
   public:
    Slot(InFlight& owner, uint64_t id) : owner_(&owner), id_(id) {}
    ~Slot();
    Slot(const Slot&) = delete;
    Slot& operator=(const Slot&) = delete;
    // Registers the generation's stream; cancels it at once when shutdown already began.
    void attach(const std::shared_ptr<engine::RequestStream>& stream);
    uint64_t id() const { return id_; }

   private:
    InFlight* owner_;
    uint64_t id_;
  };

  // A slot, or nullptr when `limit` generations are in flight or shutdown began.
  std::unique_ptr<Slot> acquire(int32_t limit);
  // Refuses new slots and cancels every registered stream.
  void close();
  // Refuses new slots; the registered streams go on (a drain).
  void refuse_new();
  bool closing() const;
  int32_t size() const;

 private:
  mutable std::mutex mu_;
  std::unordered_map<uint64_t, std::shared_ptr<engine::RequestStream>> streams_;  // slot id -> stream (or null)
  uint64_t next_id_ = 1;
  bool closing_ = false;
};

struct HttpState {
  ServerOptions options;
  Metrics metrics;
  CacheStats cache_stats;  // per-tenant cache metrics and the dashboard's history
  InFlight in_flight;
  std::atomic<bool> draining{false};  // drain() began: /health answers 503
  std::atomic<ServerContext*> ctx{nullptr};  // set once by attach(); owned by Server::Impl

  // Writes one request-log line (server/http/request_log.h) to options.log_sink, else stderr, when
  // options.log_requests.
  void log(const std::string& line) const;
};

// Who sent `req`: the client X-Forwarded-For names when the peer is a trusted proxy, else the peer.
inline std::string request_client(const HttpState& state, const httplib::Request& req) {
  return state.options.trusted_proxies.client(req.remote_addr, req.get_header_value("X-Forwarded-For"));
}

// Writes an error in the path's API shape. 503s get Retry-After.
void send_error(HttpState& state, const httplib::Request& req, httplib::Response& res, const ApiError& e);
void send_json(httplib::Response& res, const nlohmann::json& body, int status = 200);

// An in-flight slot for a request about to parse its body (ApiError 503 when max_in_flight are taken or shutdown
// began). Taken before the JSON is parsed, so that at most max_in_flight bodies are ever held as a DOM.
std::unique_ptr<InFlight::Slot> acquire_slot(HttpState& state, const ServerContext& ctx);

// The cache explainer for a tenant's prompt (`salt`: the engine's, tenant_cache_salt applied), with the tenant's
// other namespaces (at most kMaxExplainSiblings) as siblings.
inline constexpr size_t kMaxExplainSiblings = 64;
engine::CacheExplanation explain_for_tenant(ServerContext& ctx, const std::string& tenant,
                                            std::span<const int32_t> prompt, const std::string& salt);

// The hosted APIs' cache diagnostics (server/api/request_fingerprint.h): when `body` opts in (Anthropic's
// "diagnostics", OpenAI's "prompt_cache_options"), stores this request's fingerprint under format.id() and adds
// the comparison with the named earlier response to the response ("diagnostics" / "prompt_cache_diagnostics").
void add_anthropic_diagnostics(HttpState& state, ServerContext& ctx, const httplib::Request& req,
                               const nlohmann::json& body, int32_t n_prompt, ResponseFormat& format);
void add_openai_diagnostics(HttpState& state, ServerContext& ctx, const httplib::Request& req,
                            const nlohmann::json& body, int32_t n_prompt, ResponseFormat& format);

// Runs a parsed generation request in `slot`: submits (400 when the engine rejects the prompt), then answers with
// one JSON body or, when `stream`, Server-Sent Events.
void serve_generation(HttpState& state, ServerContext& ctx, const httplib::Request& req, httplib::Response& res,
                      std::unique_ptr<InFlight::Slot> slot, GenerationRequest request,
                      std::unique_ptr<ResponseFormat> format, bool stream);

// One served route (the table is in http_routes.cpp).
struct Route {
  std::string_view path;
  const char* method;            // "GET" | "POST" | "DELETE"
  ApiFlavor flavor;              // the shape of its error bodies
  const char* prompt_field;      // the request field a prompt-length error names ("" when none)
  // Exactly one is set: an open handler (no key, answers while the model loads), or one that needs the model.
  void (*open)(HttpState&, const httplib::Request&, httplib::Response&);
  void (*handler)(HttpState&, ServerContext&, const httplib::Request&, httplib::Response&);
};

// The dashboard (http_dashboard.cpp): GET /dashboard (the page; open, it holds no data), GET /dashboard/chart.js
// (Debian's Chart.js from /usr/share/javascript; open) and GET /v1/cache/stats (its data: the admin key sees every
// tenant, a tenant key its own; authenticates itself, as DELETE /v1/cache does).
void dashboard_page(HttpState& state, const httplib::Request& req, httplib::Response& res);
void dashboard_chartjs(HttpState& state, const httplib::Request& req, httplib::Response& res);
void chat_page(HttpState& state, const httplib::Request& req, httplib::Response& res);
void cache_stats(HttpState& state, ServerContext& ctx, const httplib::Request& req, httplib::Response& res);

// The Responses API (http_responses.cpp): POST /v1/responses, GET/DELETE /v1/responses/{id} and GET
// /v1/responses/{id}/input_items (the id is the route pattern's first group).
void responses_create(HttpState& state, ServerContext& ctx, const httplib::Request& req, httplib::Response& res);
void responses_get(HttpState& state, ServerContext& ctx, const httplib::Request& req, httplib::Response& res);
void responses_delete(HttpState& state, ServerContext& ctx, const httplib::Request& req, httplib::Response& res);
void responses_input_items(HttpState& state, ServerContext& ctx, const httplib::Request& req,
                           httplib::Response& res);

// llama.cpp's routes (http_llama.cpp).
void llama_completion(HttpState& state, ServerContext& ctx, const httplib::Request& req, httplib::Response& res);
void llama_infill(HttpState& state, ServerContext& ctx, const httplib::Request& req, httplib::Response& res);
void llama_props_route(HttpState& state, ServerContext& ctx, const httplib::Request& req, httplib::Response& res);
void llama_slots_route(HttpState& state, ServerContext& ctx, const httplib::Request& req, httplib::Response& res);

// Registers every route on `http`.
void register_routes(httplib::Server& http, HttpState& state);

// The route of a path, or nullptr (for 404 vs 405, metrics labels, error shapes).
const Route* find_route(std::string_view path);

}  // namespace preface::server
