// Route handlers: operations (/health, /metrics, /v1/models, /tokenize, /detokenize) and the API endpoints,
// which parse JSON into a GenerationRequest and hand it to serve_generation().
#include <algorithm>
#include <string_view>

#include "server/api/anthropic_api.h"
#include "server/api/ollama_api.h"
#include "server/api/openai_api.h"
#include "server/http/auth.h"
#include "server/http/http_internal.h"
#include "server/observability/metrics_gateway.h"

namespace preface::server {
namespace {

using nlohmann::json;

// Written as text, not as a DOM: a token costs its id and piece on the wire (a few bytes, ~20 with pieces), where
// a DOM of {"id", "piece"} objects cost ~1 KiB per token (a 3 MB body once took 1.36 GB).
void tokenize(HttpState& state, ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  const auto slot = acquire_slot(state, ctx);
  std::string content;
  bool add_special = false, parse_special = true, with_pieces = false;
  {
    const json body = parse_json_object(req.body);
    const JsonFields f(body);
    auto c = f.string("content");
    if (!c) f.fail("content", "is required");
    content = std::move(*c);
    add_special = f.boolean("add_special").value_or(false);
    parse_special = f.boolean("parse_special").value_or(true);
    with_pieces = f.boolean("with_pieces").value_or(false);
  }  // the DOM is gone before tokenizing
  const Tokenizer& tok = ctx.tokenizer;
  const std::vector<int32_t> ids = tok.encode(content, add_special && tok.add_bos_default(), parse_special);
  content = std::string();
  std::string out = "{\"tokens\":[";
  out.reserve(out.size() + ids.size() * (with_pieces ? 24 : 7));
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i > 0) out += ',';
    if (!with_pieces) {
      out += std::to_string(ids[i]);
      continue;
    }
    const std::string piece = tok.token_to_bytes(ids[i]);
    out += "{\"id\":" + std::to_string(ids[i]) + ",\"piece\":";
    out += dump_json(is_valid_utf8(piece) ? json(piece) : byte_array(piece));
    out += '}';
  }
  out += "]}";
  res.status = 200;
  res.body = std::move(out);
  res.set_header("Content-Type", "application/json");
}

void detokenize(HttpState& state, ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  const auto slot = acquire_slot(state, ctx);
  const json body = parse_json_object(req.body);
  const JsonFields f(body);
  const json* arr = f.array("tokens");
  if (arr == nullptr) f.fail("tokens", "is required");
  std::vector<int32_t> ids;
  for (const json& v : *arr) {
    if (!v.is_number_integer()) f.fail("tokens", "must be an array of token ids");
    const auto id = v.get<int64_t>();
    if (id < 0 || id >= ctx.tokenizer.n_vocab()) {
      f.fail("tokens", "holds token id " + std::to_string(id) + ", outside [0, " +
                           std::to_string(ctx.tokenizer.n_vocab()) + ")");
    }
    ids.push_back(static_cast<int32_t>(id));
  }
  send_json(res, {{"content", ctx.tokenizer.decode(ids)}});
}

// DELETE /v1/cache {"tenant": T, "cache_salt"?: S}: the admin purges T's cached blocks (all of T's namespaces, or
// only S). Answers {"tenant", "purged_blocks"}.
void purge_cache(HttpState& state, ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  if (!is_admin(state.options, presented_key(req))) {
    throw ApiError(state.options.admin_key.empty() ? 403 : 401,
                   state.options.admin_key.empty() ? "cache purging is disabled (the server has no --admin-key)"
                                                   : "purging the cache needs the admin key",
                   "", "invalid_api_key");
  }
  const json body = parse_json_object(req.body);
  const JsonFields f(body);
  const auto tenant = f.string("tenant");
  if (!tenant) f.fail("tenant", "is required");
  const auto salt = f.string("cache_salt");
  const int32_t n = salt ? ctx.engine.purge_namespace(tenant_cache_salt(*tenant, *salt))
                         : ctx.tenants.purge_tenant(ctx.engine, *tenant);
  send_json(res, {{"tenant", *tenant}, {"purged_blocks", n}});
}

// Readiness: 503 while the model loads, while draining (SIGTERM: a proxy or Kubernetes stops sending new work
// here) and while the engine is stuck in one step longer than --liveness-timeout; else 200.
void health(HttpState& state, const httplib::Request&, httplib::Response& res) {
  const ServerContext* ctx = state.ctx.load();
  if (ctx == nullptr) {
    res.set_header("Retry-After", std::to_string(state.options.limits.retry_after_s));
    send_json(res, {{"status", "loading"}}, 503);
  } else if (state.draining.load()) {
    send_json(res, {{"status", "draining"}}, 503);
  } else if (const double s = ctx->engine.step_running_seconds(); s > state.options.liveness_timeout_s) {
    send_json(res, {{"status", "stalled"}, {"step_seconds", s}}, 503);
  } else {
    send_json(res, {{"status", "ok"}});
  }
}

// Liveness (/livez): 200 while the process can make progress: loading, serving or draining; 503 only when the
// engine has been inside one step for longer than --liveness-timeout (a wedged engine thread, which a restart
// cures). A long step is not a wedge: set the timeout above the longest step the model takes (a full
// --max-batch-tokens prefill).
void livez(HttpState& state, const httplib::Request&, httplib::Response& res) {
  const ServerContext* ctx = state.ctx.load();
  const double s = ctx != nullptr ? ctx->engine.step_running_seconds() : 0.0;
  if (s > state.options.liveness_timeout_s) {
    send_json(res, {{"status", "stalled"}, {"step_seconds", s}}, 503);
  } else {
    send_json(res, {{"status", ctx == nullptr ? "loading" : "alive"}, {"step_seconds", s}});
  }
}

// Aggregate series for anyone; per-tenant series only for the metrics or admin key. Reads the counters the engine
// publishes after each step (never its pool or its step lock, unless --debug-invariants).
void metrics(HttpState& state, const httplib::Request& req, httplib::Response& res) {
  const ServerContext* ctx = state.ctx.load();
  engine::EngineCounters counters;
  std::optional<bool> invariants_ok;
  if (ctx != nullptr) {
    if (state.options.debug_invariants) invariants_ok = Metrics::check_kv_invariants(ctx->engine);
    counters = ctx->engine.counters();
  }
  std::string out = state.metrics.render(ctx != nullptr ? &counters : nullptr, state.in_flight.size(), invariants_ok);
  if (ctx != nullptr) state.metrics.render_vllm(out, counters, ctx->model_id);
  if (ctx != nullptr) {
    render_gateway_gauges(out, counters, ctx->model, ctx->engine.config().prefix_cache, ctx->model_id,
                          static_cast<double>(ServerContext::unix_now()));
  }
  const bool with_tenants = may_read_tenant_metrics(state.options, presented_key(req));
  state.cache_stats.render_prometheus(ctx != nullptr ? &counters : nullptr, out, with_tenants,
                                     ctx != nullptr ? ctx->model_id : std::string());
  res.set_content(out, "text/plain; version=0.0.4; charset=utf-8");
}

void models(HttpState&, ServerContext& ctx, const httplib::Request&, httplib::Response& res) {
  send_json(res, models_response(ctx));
}

// GET /v1/models/{id}: the served model under its id or one of its accepted names, else 404.
void model_by_id(HttpState&, ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  const std::string id = req.matches.size() > 1 ? req.matches[1].str() : "";
  const bool known = id == ctx.model_id ||
                     std::find(ctx.accepted_names.begin(), ctx.accepted_names.end(), id) != ctx.accepted_names.end();
  if (!known) throw ApiError(404, "the model '" + id + "' does not exist (this server serves '" + ctx.model_id + "')",
                             "model", "model_not_found");
  send_json(res, models_response(ctx)["data"][0]);
}

void completions(HttpState& state, ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  auto slot = acquire_slot(state, ctx);
  OpenAIRequest r = parse_completion_request(parse_json_object(req.body), ctx);
  auto format = make_completion_format(ctx, r);
  serve_generation(state, ctx, req, res, std::move(slot), std::move(r.generation), std::move(format), r.stream);
}

void chat_completions(HttpState& state, ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  auto slot = acquire_slot(state, ctx);
  std::unique_ptr<ResponseFormat> format;
  OpenAIRequest r;
  {
    const json body = parse_json_object(req.body);
    r = parse_chat_request(body, ctx);
    format = make_chat_format(ctx, r);
    add_openai_diagnostics(state, ctx, req, body, static_cast<int32_t>(r.generation.params.prompt.size()), *format);
  }
  serve_generation(state, ctx, req, res, std::move(slot), std::move(r.generation), std::move(format), r.stream);
}

void messages(HttpState& state, ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  auto slot = acquire_slot(state, ctx);
  std::unique_ptr<ResponseFormat> format;
  AnthropicRequest r;
  {
    const json body = parse_json_object(req.body);
    r = parse_messages_request(body, ctx);
    format = make_messages_format(ctx, r);
    add_anthropic_diagnostics(state, ctx, req, body, static_cast<int32_t>(r.generation.params.prompt.size()),
                              *format);
  }
  serve_generation(state, ctx, req, res, std::move(slot), std::move(r.generation), std::move(format), r.stream);
}

// Ollama's API (server/api/ollama_api.h).
template <bool kChat>
void ollama_generate(HttpState& state, ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  auto slot = acquire_slot(state, ctx);
  OllamaRequest r;
  std::unique_ptr<ResponseFormat> format;
  {
    const json body = parse_json_object(req.body);
    r = kChat ? parse_ollama_chat(body, ctx) : parse_ollama_generate(body, ctx);
    format = make_ollama_format(ctx, r);
  }
  serve_generation(state, ctx, req, res, std::move(slot), std::move(r.openai.generation), std::move(format), r.stream);
}

void ollama_tags_route(HttpState&, ServerContext& ctx, const httplib::Request&, httplib::Response& res) {
  send_json(res, ollama_tags(ctx));
}
void ollama_ps_route(HttpState&, ServerContext& ctx, const httplib::Request&, httplib::Response& res) {
  send_json(res, ollama_ps(ctx));
}
void ollama_show_route(HttpState&, ServerContext& ctx, const httplib::Request&, httplib::Response& res) {
  send_json(res, ollama_show(ctx));
}
void ollama_version(HttpState&, const httplib::Request&, httplib::Response& res) {
  send_json(res, {{"version", "0.12.0"}});  // the Ollama API level served
}

// POST /v1/cache/explain: a dry run (no generation) of the cache lookup a request would make, in the caller's own
// namespace (server/api/cache_explain.h). The body is a request of any API: {"tokens": [ids]}, a completion
// ({"prompt"}), a chat completion ({"messages"}), or an Anthropic message ({"messages"} with a top-level "system",
// an anthropic-version header or "api": "anthropic"); "cache_salt" as in that API.
void explain_cache(HttpState& state, ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  const auto slot = acquire_slot(state, ctx);
  const std::string tenant = authenticate(state.options, req);
  GenerationRequest g;
  {
    const json body = parse_json_object(req.body);
    const JsonFields f(body);
    const bool anthropic = f.string("api").value_or("") == "anthropic" || req.has_header("anthropic-version") ||
                           body.contains("system");
    if (const json* ids = f.array("tokens")) {
      g.params.cache_salt = f.string("cache_salt").value_or("");
      for (const json& v : *ids) {
        if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= ctx.tokenizer.n_vocab()) {
          f.fail("tokens", "must be an array of token ids in [0, " + std::to_string(ctx.tokenizer.n_vocab()) + ")");
        }
        g.params.prompt.push_back(v.get<int32_t>());
      }
    } else if (body.contains("prompt")) {
      g = parse_completion_request(body, ctx).generation;
    } else if (anthropic) {
      g = parse_messages_request(body, ctx, true).generation;
    } else {
      g = parse_chat_request(body, ctx).generation;
    }
    if (g.params.prompt.empty()) f.fail("tokens", "must not be empty");
  }  // the DOM is gone before the lookup
  const std::string salt = tenant_cache_salt(tenant, g.params.cache_salt);
  const engine::CacheExplanation e = explain_for_tenant(ctx, tenant, g.params.prompt, salt);
  send_json(res, cache_explain_json(e, ctx.tokenizer));
}

// Parses (and renders) inside the in-flight limit, as generation does: a body that is costly to parse holds a slot.
void count_tokens(HttpState& state, ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  const auto slot = acquire_slot(state, ctx);
  const AnthropicRequest r = parse_messages_request(parse_json_object(req.body), ctx, true);
  send_json(res, {{"input_tokens", r.generation.params.prompt.size()}});
}

// llama.cpp's POST /apply-template: the prompt a chat renders to, without generating. messages (as
// /v1/chat/completions takes them, tool calls and tool messages included), tools, add_generation_prompt
// (default true), chat_template_kwargs, reasoning_effort -> {"prompt": "..."}, the text chat completions would
// render (arguments given as text parsed, tool schemas with sorted keys); a template error is 400 with its message.
void apply_template(HttpState& state, ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  const auto slot = acquire_slot(state, ctx);  // parsing and rendering count against the in-flight limit
  const json checked = parse_json_object(req.body);  // the limits and error shape of every other body
  const JsonFields f(checked);
  const nlohmann::ordered_json messages = openai_template_messages(f, ctx.limits.max_messages);
  const ToolsRequest tools = parse_openai_tools(f, checked);
  f.object("chat_template_kwargs");
  const bool add_generation_prompt = f.boolean("add_generation_prompt").value_or(true);
  const nlohmann::ordered_json kwargs = chat_template_kwargs(f, checked);
  try {
    const chat::RenderedChat r = ctx.chat_renderer->render_json(messages, tools.tools, add_generation_prompt,
                                                                template_kwargs_with_defaults(kwargs));
    send_json(res, {{"prompt", r.text}});
  } catch (const ApiError&) {
    throw;
  } catch (const Error& e) {
    throw ApiError(400, e.what(), "messages");
  }
}

using O = ApiFlavor;
// Every route, once: registration, 404 vs 405, the error shape and the prompt field an error names.
// Open routes (/health, /livez, /metrics) answer without a key and while the model loads; the others need a valid key
// (when keys are configured) and the model (503 while it loads). DELETE /v1/cache checks the admin key itself.
constexpr Route kRoutes[] = {
    {"/health", "GET", O::OpenAI, "", health, nullptr},
    {"/v1/health", "GET", O::OpenAI, "", health, nullptr},
    {"/livez", "GET", O::OpenAI, "", livez, nullptr},
    {"/metrics", "GET", O::OpenAI, "", metrics, nullptr},
    {"/v1/models", "GET", O::OpenAI, "", nullptr, models},
    {"/v1/models/(.+)", "GET", O::OpenAI, "", nullptr, model_by_id},  // a pattern, as the ones below
    {"/v1/completions", "POST", O::OpenAI, "prompt", nullptr, completions},
    {"/v1/chat/completions", "POST", O::OpenAI, "messages", nullptr, chat_completions},
    {"/v1/messages", "POST", O::Anthropic, "messages", nullptr, messages},
    {"/v1/responses", "POST", O::OpenAI, "input", nullptr, responses_create},
    {"/api/chat", "POST", O::Ollama, "messages", nullptr, ollama_generate<true>},
    {"/api/generate", "POST", O::Ollama, "prompt", nullptr, ollama_generate<false>},
    {"/api/tags", "GET", O::Ollama, "", nullptr, ollama_tags_route},
    {"/api/ps", "GET", O::Ollama, "", nullptr, ollama_ps_route},
    {"/api/show", "POST", O::Ollama, "", nullptr, ollama_show_route},
    {"/api/version", "GET", O::Ollama, "", ollama_version, nullptr},
    {"/completion", "POST", O::OpenAI, "prompt", nullptr, llama_completion},
    {"/completions", "POST", O::OpenAI, "prompt", nullptr, llama_completion},
    {"/infill", "POST", O::OpenAI, "prompt", nullptr, llama_infill},
    {"/props", "GET", O::OpenAI, "", nullptr, llama_props_route},
    {"/slots", "GET", O::OpenAI, "", nullptr, llama_slots_route},
    // Patterns (cpp-httplib matches paths as regular expressions): never equal to a request's path.
    {"/v1/responses/([A-Za-z0-9_-]+)", "GET", O::OpenAI, "", nullptr, responses_get},
    {"/v1/responses/([A-Za-z0-9_-]+)", "DELETE", O::OpenAI, "", nullptr, responses_delete},
    {"/v1/responses/([A-Za-z0-9_-]+)/input_items", "GET", O::OpenAI, "", nullptr, responses_input_items},
    {"/v1/messages/count_tokens", "POST", O::Anthropic, "messages", nullptr, count_tokens},
    {"/tokenize", "POST", O::OpenAI, "content", nullptr, tokenize},
    {"/detokenize", "POST", O::OpenAI, "tokens", nullptr, detokenize},
    {"/apply-template", "POST", O::OpenAI, "messages", nullptr, apply_template},
    {"/v1/cache", "DELETE", O::OpenAI, "", nullptr, purge_cache},
    {"/v1/cache/explain", "POST", O::OpenAI, "messages", nullptr, explain_cache},
    {"/v1/cache/stats", "GET", O::OpenAI, "", nullptr, cache_stats},
    {"/", "GET", O::OpenAI, "", chat_page, nullptr},
    {"/dashboard", "GET", O::OpenAI, "", dashboard_page, nullptr},
    {"/dashboard/chart.js", "GET", O::OpenAI, "", dashboard_chartjs, nullptr},
};

}  // namespace

const Route* find_route(std::string_view path) {
  for (const Route& r : kRoutes) {
    if (r.path == path) return &r;
  }
  return nullptr;
}

void register_routes(httplib::Server& http, HttpState& state) {
  for (const Route& route : kRoutes) {
    httplib::Server::Handler h;
    if (route.open != nullptr) {
      h = [&state, fn = route.open](const httplib::Request& req, httplib::Response& res) { fn(state, req, res); };
    } else {
      // The admin key, not (only) a tenant key: these handlers authenticate themselves.
      const bool admin = route.handler == purge_cache || route.handler == cache_stats;
      h = [&state, fn = route.handler, admin](const httplib::Request& req, httplib::Response& res) {
        try {
          if (!admin) current_request().tenant = authenticate(state.options, req);
          ServerContext* ctx = state.ctx.load();
          if (ctx == nullptr) throw ApiError(503, "the model is loading");
          fn(state, *ctx, req, res);
        } catch (const ApiError& e) {
          send_error(state, req, res, e);
        } catch (const Error& e) {
          send_error(state, req, res, ApiError(400, e.what()));
        }
      };
    }
    const std::string path(route.path);
    if (std::string_view(route.method) == "GET") {
      http.Get(path, h);
    } else if (std::string_view(route.method) == "POST") {
      http.Post(path, h);
    } else {
      http.Delete(path, h);
    }
  }
}

}  // namespace preface::server
