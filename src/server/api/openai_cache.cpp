#include "server/api/openai_cache.h"

#include <algorithm>

namespace preface::server {
namespace {

using nlohmann::json;
using std::chrono::hours;
using std::chrono::minutes;
using std::chrono::seconds;

// "30m" | "12h" (the TTLs OpenAI's breakpoints and prompt_cache_options accept).
seconds parse_ttl(const JsonFields& f, const std::string& value) {
  if (value == "30m") return minutes(30);
  if (value == "12h") return hours(12);
  f.fail("ttl", "must be '30m' or '12h', got '" + value + "'");
}

// One content part's breakpoint: nullopt when the part has none (absent or null).
std::optional<seconds> part_breakpoint(const json& part, const std::string& path, const OpenAICachePolicy& policy) {
  if (!part.is_object()) return std::nullopt;
  const auto it = part.find("prompt_cache_breakpoint");
  if (it == part.end() || it->is_null()) return std::nullopt;
  const std::string bpath = path + ".prompt_cache_breakpoint";
  if (!it->is_object()) throw ApiError(400, "'" + bpath + "' must be an object", bpath);
  const JsonFields bf(*it, bpath + ".");
  const std::string mode = bf.string("mode").value_or("explicit");
  if (mode != "explicit") bf.fail("mode", "must be 'explicit', got '" + mode + "'");
  const auto ttl = bf.string("ttl");
  return ttl ? parse_ttl(bf, *ttl) : policy.breakpoint_ttl;
}

// The text of content parts [0, n) of a message, joined as parse_chat_request joins them (no separator).
std::string parts_text(const json& content, size_t n) {
  std::string out;
  for (size_t k = 0; k < n; ++k) {
    const auto t = content[k].find("text");
    if (t != content[k].end() && t->is_string()) out += t->get<std::string>();
  }
  return out;
}

}  // namespace

OpenAICachePolicy parse_openai_cache_policy(const JsonFields& f) {
  OpenAICachePolicy policy;
  const auto retention = f.string("prompt_cache_retention");
  if (retention && *retention != "in_memory" && *retention != "in-memory" && *retention != "24h") {
    f.fail("prompt_cache_retention", "must be 'in_memory' or '24h', got '" + *retention + "'");
  }
  if (retention == "24h") {
    policy.breakpoint_ttl = hours(24);
    policy.implicit_ttl = hours(24);
  }
  const json* options = f.object("prompt_cache_options");
  if (options == nullptr) return policy;
  if (!options->is_object()) f.fail("prompt_cache_options", "must be an object");
  const JsonFields of(*options, f.path("prompt_cache_options."));
  const auto mode_field = of.string("mode");
  const std::string mode = mode_field.value_or("implicit");
  if (mode != "implicit" && mode != "explicit") of.fail("mode", "must be 'implicit' or 'explicit', got '" + mode + "'");
  const auto ttl = of.string("ttl");
  if (ttl && retention) of.fail("ttl", "cannot be set together with prompt_cache_retention (it supersedes it)");
  if (ttl) policy.breakpoint_ttl = parse_ttl(of, *ttl);
  if (mode == "explicit") {
    policy.implicit_ttl.reset();
  } else if (!policy.implicit_ttl && (mode_field || ttl)) {
    policy.implicit_ttl = policy.breakpoint_ttl;
  }
  return policy;
}

std::vector<engine::CachePin> openai_prompt_pins(const OpenAICachePolicy& policy, const std::vector<int32_t>& prompt) {
  if (!policy.implicit_ttl) return {};
  return {{static_cast<int32_t>(prompt.size()), *policy.implicit_ttl}};
}

std::vector<engine::CachePin> openai_chat_pins(const ServerContext& ctx, const json& body,
                                               const std::vector<ChatMessage>& messages,
                                               const std::vector<int32_t>& prompt, const OpenAICachePolicy& policy,
                                               const nlohmann::ordered_json& kwargs) {
  std::vector<engine::CachePin> pins;
  const auto msgs = body.find("messages");
  if (msgs != body.end() && msgs->is_array()) {
    for (size_t i = 0; i < msgs->size(); ++i) {
      const json& m = (*msgs)[i];
      const auto content = m.is_object() ? m.find("content") : m.end();
      if (content == m.end() || !content->is_array()) continue;
      for (size_t k = 0; k < content->size(); ++k) {
        const std::string path = "messages[" + std::to_string(i) + "].content[" + std::to_string(k) + "]";
        const std::optional<seconds> ttl = part_breakpoint((*content)[k], path, policy);
        // A message list that does not map one to one onto the body's (never, as parsed today) pins nothing.
        if (!ttl || messages.size() != msgs->size()) continue;
        std::vector<ChatMessage> partial(messages.begin(), messages.begin() + static_cast<ptrdiff_t>(i));
        partial.push_back(messages[i]);
        partial.back().content = parts_text(*content, k + 1);
        std::vector<int32_t> tokens;
        try {
          tokens = ctx.chat_prompt(partial, false, kwargs);
        } catch (const ApiError&) {
          // A template that rejects this cut (e.g. a lone system message): the breakpoint covers what it can.
        }
        const auto mismatch = std::mismatch(tokens.begin(), tokens.end(), prompt.begin(), prompt.end());
        pins.push_back({static_cast<int32_t>(mismatch.first - tokens.begin()), *ttl});
      }
    }
  }
  const size_t n_explicit = kMaxOpenAIBreakpoints - (policy.implicit_ttl ? 1 : 0);
  if (pins.size() > n_explicit) pins.erase(pins.begin(), pins.end() - static_cast<ptrdiff_t>(n_explicit));
  for (const engine::CachePin& p : openai_prompt_pins(policy, prompt)) pins.push_back(p);
  return pins;
}

void add_openai_pin_usage(json& usage, const engine::RequestStats& stats, std::span<const engine::CachePin> pins,
                          int32_t block_size) {
  if (pins.empty()) return;
  const engine::CachePin* longest = &pins.front();
  for (const engine::CachePin& p : pins) {
    if (p.n_tokens > longest->n_tokens || (p.n_tokens == longest->n_tokens && p.ttl > longest->ttl)) longest = &p;
  }
  const int32_t n = std::min(longest->n_tokens, stats.n_prompt_tokens);
  json& details = usage["prompt_tokens_details"];
  details["cache_pinned_tokens"] = block_size > 0 ? n / block_size * block_size : 0;
  details["cache_pin_ttl_seconds"] = longest->ttl.count();
  if (stats.n_pin_refused_blocks > 0) details["cache_pin_refused_blocks"] = stats.n_pin_refused_blocks;
}

}  // namespace preface::server
