#include "server/api/openai_api.h"

#include <limits>

#include "server/api/api_error.h"
#include "server/api/openai_cache.h"
#include "server/api/structured_output.h"

namespace preface::server {
namespace {

using nlohmann::json;

constexpr int64_t kMaxTokensLimit = 1 << 30;

// Fields of llama.cpp's, vLLM's and OpenAI's APIs that change the output and that preface does not implement: a
// 400 naming the field unless the value is the neutral one (what a client sends when it means "off").
struct UnsupportedField {
  const char* name;
  json neutral;  // null: any value but null, false, 0, "" and empty containers is refused
};
const std::vector<UnsupportedField>& unsupported_fields() {
  static const std::vector<UnsupportedField> k = {
      {"mirostat", 0},          {"typical_p", 1.0},       {"tfs_z", 1.0},           {"dynatemp_range", 0.0},
      {"dry_multiplier", 0.0},  {"xtc_probability", 0.0}, {"top_n_sigma", -1.0},   {"n_probs", 0},
      {"min_tokens", 0},        {"use_beam_search", false}, {"length_penalty", 1.0}, {"prompt_logprobs", nullptr},
      {"bad_words", nullptr},   {"allowed_token_ids", nullptr}, {"logits_processors", nullptr},
      {"include_stop_str_in_output", false}, {"skip_special_tokens", true}, {"truncate_prompt_tokens", nullptr},
      {"audio", nullptr},       {"prediction", nullptr},  {"web_search_options", nullptr},
  };
  return k;
}

bool neutral(const json& v, const json& want) {
  if (v.is_null()) return true;
  if (!want.is_null()) return v.is_number() && want.is_number() ? v.get<double>() == want.get<double>() : v == want;
  if (v.is_boolean()) return !v.get<bool>();
  if (v.is_number()) return v.get<double>() == 0;
  if (v.is_string() || v.is_array() || v.is_object()) return v.empty();
  return false;
}

void reject_unsupported(const JsonFields& f, const json& body, bool chat) {
  for (const UnsupportedField& u : unsupported_fields()) {
    const auto it = body.find(u.name);
    if (it != body.end() && !neutral(*it, u.neutral)) {
      f.fail(u.name, "is not supported (send it unset, or " + (u.neutral.is_null() ? std::string("null") : u.neutral.dump()) + ")");
    }
  }
  if (auto n = f.integer("n", 1, 1024); n && *n != 1) f.fail("n", "must be 1 (one choice per request)");
  if (auto n = f.integer("best_of", 1, 1024); n && *n != 1) f.fail("best_of", "must be 1");
  if (f.boolean("echo").value_or(false)) f.fail("echo", "is not supported");
  if (auto s = f.string("suffix"); s && !s->empty()) f.fail("suffix", "is not supported");
  for (const char* name : {"logit_bias", "functions", "tools", "tool_choice"}) {
    const auto it = body.find(name);
    const bool tool_field = std::string_view(name) == "tools" || std::string_view(name) == "tool_choice";
    if (it != body.end() && !it->is_null() && !(chat && tool_field) && !it->empty()) {
      f.fail(name, tool_field ? "is supported on /v1/chat/completions only" : "is not supported");
    }
  }
}

// The fields common to both endpoints.
OpenAIRequest parse_common(const JsonFields& f, const json& body, ServerContext& ctx, bool chat) {
  ctx.check_model(f.string("model"));
  reject_unsupported(f, body, chat);
  OpenAIRequest r;
  engine::RequestParams& g = r.generation.params;
  const int64_t max_output = ctx.limits.max_output_tokens;
  g.max_new_tokens = static_cast<int32_t>(std::min<int64_t>(ctx.ctx_len(), max_output));
  if (auto n = f.integer("max_tokens", 0, max_output)) g.max_new_tokens = static_cast<int32_t>(*n);
  if (auto n = f.integer("max_completion_tokens", 0, max_output)) g.max_new_tokens = static_cast<int32_t>(*n);
  // llama.cpp's name; -1 (its "until the end") leaves the default.
  if (auto n = f.integer("n_predict", -1, max_output); n && *n >= 0) g.max_new_tokens = static_cast<int32_t>(*n);
  engine::SamplingParams& s = g.sampling;
  s.temperature = static_cast<float>(f.number("temperature", 0, 2).value_or(1.0));
  s.top_p = static_cast<float>(f.number("top_p", 0, 1).value_or(1.0));
  if (s.top_p <= 0) f.fail("top_p", "must be greater than 0");
  s.top_k = static_cast<int32_t>(std::max<int64_t>(0, f.integer("top_k", -1, kMaxTokensLimit).value_or(0)));
  s.min_p = static_cast<float>(f.number("min_p", 0, 1).value_or(0.0));
  s.presence_penalty = static_cast<float>(f.number("presence_penalty", -2, 2).value_or(0.0));
  s.frequency_penalty = static_cast<float>(f.number("frequency_penalty", -2, 2).value_or(0.0));
  s.repeat_penalty = static_cast<float>(f.number("repetition_penalty", 0, 10).value_or(1.0));
  if (s.repeat_penalty <= 0) f.fail("repetition_penalty", "must be greater than 0");
  if (auto rp = f.number("repeat_penalty", 0, 10)) {  // llama.cpp's name
    if (*rp <= 0) f.fail("repeat_penalty", "must be greater than 0");
    s.repeat_penalty = static_cast<float>(*rp);
  }
  const auto seed = f.integer("seed", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max());
  s.seed = seed ? static_cast<uint64_t>(*seed) : ctx.random_seed();
  r.generation.stop = f.strings("stop", static_cast<size_t>(ctx.limits.max_stop_strings));
  g.ignore_eos = f.boolean("ignore_eos").value_or(false);
  g.cache_salt = f.string("cache_salt").value_or("");
  r.generation.cache_explain = f.boolean("cache_explain").value_or(false);
  // "cache": false (preface) or "cache_prompt": false (llama.cpp's name): compute the prompt cold, no lookup.
  g.cache_bypass = !f.boolean("cache").value_or(true) || !f.boolean("cache_prompt").value_or(true);
  (void)f.string("prompt_cache_key");  // type-checked; routing hint only (see the header)
  (void)f.string("user");
  r.stream = f.boolean("stream").value_or(false);
  if (const json* so = f.object("stream_options")) {
    r.include_usage = JsonFields(*so, "stream_options.").boolean("include_usage").value_or(false);
  }
  return r;
}

std::vector<int32_t> token_ids(const json& arr, const JsonFields& f, const Tokenizer& tok) {
  std::vector<int32_t> ids;
  for (const json& v : arr) {
    if (!v.is_number_integer()) f.fail("prompt", "must be a string or an array of token ids");
    const auto id = v.get<int64_t>();
    if (id < 0 || id >= tok.n_vocab()) {
      f.fail("prompt", "holds token id " + std::to_string(id) + ", outside [0, " + std::to_string(tok.n_vocab()) + ")");
    }
    ids.push_back(static_cast<int32_t>(id));
  }
  return ids;
}

std::vector<int32_t> completion_prompt(const JsonFields& f, const json& body, const Tokenizer& tok) {
  const auto it = body.find("prompt");
  if (it == body.end() || it->is_null()) f.fail("prompt", "is required");
  const json* p = &*it;
  if (p->is_array() && p->size() == 1 && ((*p)[0].is_string() || (*p)[0].is_array())) p = &(*p)[0];
  if (p->is_string()) return tok.encode(p->get<std::string>(), tok.add_bos_default(), true);
  if (p->is_array() && !p->empty() && (*p)[0].is_number_integer()) return token_ids(*p, f, tok);
  if (p->is_array() && p->size() > 1) f.fail("prompt", "must be a single prompt (one choice per request)");
  f.fail("prompt", "must be a non-empty string or an array of token ids");
}

std::string content_text(const json& content, const JsonFields& m, const std::string& field) {
  if (content.is_null()) return {};
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) m.fail(field, "must be a string or an array of content parts");
  std::string text;
  for (const json& part : content) {
    if (!part.is_object()) m.fail(field, "parts must be objects");
    const JsonFields pf(part, m.path(field) + "[].");
    const std::string type = pf.string("type").value_or("");
    if (type != "text") pf.fail("type", "must be 'text' (only text content is supported), got '" + type + "'");
    const auto t = pf.string("text");
    if (!t) pf.fail("text", "is required");
    text += *t;
  }
  return text;
}

std::vector<ChatMessage> chat_messages(const JsonFields& f, int32_t max_messages) {
  const json* arr = f.array("messages");
  if (arr == nullptr || arr->empty()) f.fail("messages", "must be a non-empty array");
  if (arr->size() > static_cast<size_t>(max_messages)) {
    f.fail("messages", "holds " + std::to_string(arr->size()) + " messages; at most " +
                           std::to_string(max_messages) + " are accepted");
  }
  std::vector<ChatMessage> out;
  for (size_t i = 0; i < arr->size(); ++i) {
    const json& m = (*arr)[i];
    const std::string prefix = "messages[" + std::to_string(i) + "].";
    if (!m.is_object()) f.fail("messages", "entries must be objects");
    const JsonFields mf(m, prefix);
    std::string role = mf.string("role").value_or("");
    if (role == "developer") role = "system";
    if (role != "system" && role != "user" && role != "assistant") {
      mf.fail("role", "must be system, developer, user or assistant, got '" + role + "'");
    }
    static const json kNoContent;  // null; a reference either way, never a copy of client JSON
    const auto it = m.find("content");
    out.push_back({role, content_text(it == m.end() ? kNoContent : *it, mf, "content")});
  }
  return out;
}

}  // namespace

// chat_template_kwargs (llama.cpp's and vLLM's field): extra template variables, an object or absent.
nlohmann::ordered_json chat_template_kwargs(const JsonFields& f, const json& /*body*/) {
  const json* kwargs = f.object("chat_template_kwargs");
  nlohmann::ordered_json out = kwargs != nullptr ? nlohmann::ordered_json::parse(kwargs->dump()) : nullptr;
  add_reasoning_effort(f, out);
  return out;
}


OpenAIRequest parse_completion_request(const json& body, ServerContext& ctx) {
  const JsonFields f(body);
  OpenAIRequest r = parse_common(f, body, ctx, false);
  if (auto n = f.integer("logprobs", 0, ctx.limits.max_top_logprobs)) {
    r.logprobs = true;
    r.generation.params.n_logprobs = static_cast<int32_t>(*n);
  }
  r.generation.params.prompt = completion_prompt(f, body, ctx.tokenizer);
  r.generation.params.cache_pins = openai_prompt_pins(parse_openai_cache_policy(f), r.generation.params.prompt);
  r.generation.text_start = false;
  apply_openai_structured_output(f, body, ctx, r.generation);
  return r;
}

OpenAIRequest parse_chat_request(const json& body, ServerContext& ctx) {
  const JsonFields f(body);
  OpenAIRequest r = parse_common(f, body, ctx, true);
  r.logprobs = f.boolean("logprobs").value_or(false);
  const auto top = f.integer("top_logprobs", 0, ctx.limits.max_top_logprobs);
  if (top && !r.logprobs) f.fail("top_logprobs", "requires logprobs to be true");
  if (r.logprobs) r.generation.params.n_logprobs = static_cast<int32_t>(top.value_or(0));
  const ToolsRequest tools = parse_openai_tools(f, body);
  const nlohmann::ordered_json kwargs = chat_template_kwargs(f, body);
  const OpenAICachePolicy cache_policy = parse_openai_cache_policy(f);
  if (openai_uses_tools(body)) {  // the template's JSON path: tools, tool calls, tool messages
    r.generation.params.prompt = ctx.chat_prompt_json(openai_template_messages(f, ctx.limits.max_messages),
                                                      tools.tools, true, kwargs);
    // Content parts' breakpoints are checked but pin nothing here (they resolve over plain-text renders); the
    // implicit whole-prompt pin applies.
    r.generation.params.cache_pins = openai_chat_pins(ctx, body, {}, r.generation.params.prompt, cache_policy, kwargs);
  } else {
    const std::vector<ChatMessage> messages = chat_messages(f, ctx.limits.max_messages);
    r.generation.params.prompt = ctx.chat_prompt(messages, true, kwargs);
    r.generation.params.cache_pins =
        openai_chat_pins(ctx, body, messages, r.generation.params.prompt, cache_policy, kwargs);
  }
  r.generation.text_start = true;
  r.generation.harmony = template_is_harmony(ctx.chat_renderer->source());
  r.generation.think_tags = template_thinks(ctx.chat_renderer->source());
  apply_openai_structured_output(f, body, ctx, r.generation);
  r.tool_output = apply_tools(tools, ctx, r.generation, "function.parameters");
  return r;
}

json openai_usage(const GenerationSummary& s, std::span<const engine::CachePin> pins, int32_t block_size) {
  const int32_t n_prompt = s.stats.n_prompt_tokens;
  json usage = {{"prompt_tokens", n_prompt},
                {"completion_tokens", s.n_completion_tokens},
                {"total_tokens", n_prompt + s.n_completion_tokens},
                {"prompt_tokens_details",
                 {{"cached_tokens", s.stats.n_cached_tokens}, {"cache_write_tokens", s.stats.n_written_tokens}}},
                {"cache_savings", cache_savings_json(s.stats)}};
  // Of cached_tokens, those loaded from a cache tier below RAM (--cache-dir, --cache-redis); absent when none.
  if (s.stats.n_tier_tokens > 0) usage["prompt_tokens_details"]["cache_tier_tokens"] = s.stats.n_tier_tokens;
  add_openai_pin_usage(usage, s.stats, pins, block_size);
  return usage;
}

json models_response(const ServerContext& ctx) {
  const engine::EngineDescription& cfg = ctx.model;
  json model = {{"id", ctx.model_id},
                {"object", "model"},
                {"created", ctx.created_unix},
                {"owned_by", "preface"},
                {"meta",
                 {{"n_ctx", cfg.ctx_len},
                  {"n_vocab", cfg.n_vocab},
                  {"chat_template", ctx.chat_renderer->name()},
                  {"kv_block_size", cfg.block_size},
                  {"kv_blocks", cfg.n_kv_blocks}}}};
  return {{"object", "list"}, {"data", json::array({model})}};
}

void add_reasoning_effort(const JsonFields& f, nlohmann::ordered_json& kwargs) {
  const auto effort = f.string("reasoning_effort");
  if (!effort) return;
  if (*effort != "none" && *effort != "minimal" && *effort != "low" && *effort != "medium" && *effort != "high") {
    f.fail("reasoning_effort", "must be one of none, minimal, low, medium, high");
  }
  if (kwargs.is_null()) kwargs = nlohmann::ordered_json::object();
  if (!kwargs.contains("reasoning_effort")) kwargs["reasoning_effort"] = *effort;
}

}  // namespace preface::server
