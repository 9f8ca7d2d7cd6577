#include "server/api/anthropic_api.h"

#include <algorithm>
#include <cctype>

#include "server/api/api_error.h"
#include "server/api/structured_output.h"

namespace preface::server {
namespace {

using nlohmann::json;

constexpr size_t kMaxBreakpoints = 4;

struct Block {
  std::string text;
  int32_t ttl_s = 0;  // > 0: cache_control breakpoint after this block
};

struct Turn {
  std::string role;  // "system", "user" or "assistant"
  std::vector<Block> blocks;
};

std::string join(const std::vector<Block>& blocks, size_t n) {
  std::string out;
  for (size_t i = 0; i < n; ++i) {
    if (i > 0) out += '\n';
    out += blocks[i].text;
  }
  return out;
}

int32_t parse_cache_control(const json& cc, const std::string& path) {
  const JsonFields f(cc, path + ".");
  if (!cc.is_object()) throw ApiError(400, "'" + path + "' must be an object", path);
  if (f.string("type").value_or("") != "ephemeral") f.fail("type", "must be 'ephemeral'");
  const std::string ttl = f.string("ttl").value_or("5m");
  if (ttl == "5m") return 300;
  if (ttl == "1h") return 3600;
  f.fail("ttl", "must be '5m' or '1h', got '" + ttl + "'");
}

// A string, or an array of text blocks (other block types are rejected).
std::vector<Block> parse_content(const json& content, const std::string& path) {
  if (content.is_string()) return {{content.get<std::string>(), 0}};
  if (!content.is_array()) throw ApiError(400, "'" + path + "' must be a string or an array of content blocks", path);
  std::vector<Block> out;
  for (size_t i = 0; i < content.size(); ++i) {
    const std::string bpath = path + "[" + std::to_string(i) + "]";
    const json& b = content[i];
    if (!b.is_object()) throw ApiError(400, "'" + bpath + "' must be an object", bpath);
    const JsonFields f(b, bpath + ".");
    const std::string type = f.string("type").value_or("");
    if (type != "text") f.fail("type", "must be 'text' (only text blocks are supported), got '" + type + "'");
    const auto text = f.string("text");
    if (!text) f.fail("text", "is required");
    Block block{*text, 0};
    if (const auto it = b.find("cache_control"); it != b.end() && !it->is_null()) {
      block.ttl_s = parse_cache_control(*it, bpath + ".cache_control");
    }
    out.push_back(std::move(block));
  }
  return out;
}

std::vector<Turn> parse_turns(const JsonFields& f, const json& body, int32_t max_messages) {
  std::vector<Turn> turns;
  if (const auto it = body.find("system"); it != body.end() && !it->is_null()) {
    std::vector<Block> sys = parse_content(*it, "system");
    if (!sys.empty()) turns.push_back({"system", std::move(sys)});
  }
  const json* msgs = f.array("messages");
  if (msgs == nullptr || msgs->empty()) f.fail("messages", "must be a non-empty array");
  if (msgs->size() > static_cast<size_t>(max_messages)) {
    f.fail("messages", "holds " + std::to_string(msgs->size()) + " messages; at most " +
                           std::to_string(max_messages) + " are accepted");
  }
  for (size_t i = 0; i < msgs->size(); ++i) {
    const std::string path = "messages[" + std::to_string(i) + "]";
    const json& m = (*msgs)[i];
    if (!m.is_object()) throw ApiError(400, "'" + path + "' must be an object", path);
    const JsonFields mf(m, path + ".");
    const std::string role = mf.string("role").value_or("");
    if (role != "user" && role != "assistant") mf.fail("role", "must be 'user' or 'assistant', got '" + role + "'");
    const auto it = m.find("content");
    if (it == m.end() || it->is_null()) mf.fail("content", "is required");
    std::vector<Block> blocks = parse_content(*it, path + ".content");
    if (!turns.empty() && turns.back().role == role) {
      for (Block& b : blocks) turns.back().blocks.push_back(std::move(b));
    } else {
      turns.push_back({role, std::move(blocks)});
    }
  }
  return turns;
}

std::vector<ChatMessage> to_messages(const std::vector<Turn>& turns, size_t n_turns) {
  std::vector<ChatMessage> out;
  for (size_t i = 0; i < n_turns; ++i) out.push_back({turns[i].role, join(turns[i].blocks, turns[i].blocks.size())});
  return out;
}

// The prompt: the conversation with a generation prompt; a final assistant turn is a prefill appended after it.
std::vector<int32_t> render_prompt(ServerContext& ctx, const std::vector<Turn>& turns) {
  if (turns.back().role != "assistant") return ctx.chat_prompt(to_messages(turns, turns.size()), true);
  const std::string prefill = join(turns.back().blocks, turns.back().blocks.size());
  if (!prefill.empty() && std::isspace(static_cast<unsigned char>(prefill.back()))) {
    throw ApiError(400, "final assistant content cannot end with trailing whitespace", "messages");
  }
  try {
    chat::RenderedChat rendered = ctx.render_chat(to_messages(turns, turns.size() - 1), true);
    rendered.add_content(prefill);  // the prefill is caller text too
    return encode_chat_prompt(ctx.tokenizer, rendered);
  } catch (const ApiError&) {
    throw;
  } catch (const Error& e) {
    throw ApiError(400, e.what(), "messages");
  }
}

std::vector<engine::CachePin> resolve_breakpoints(ServerContext& ctx, const std::vector<Turn>& turns,
                                                 const std::vector<int32_t>& prompt) {
  std::vector<engine::CachePin> out;
  for (size_t t = 0; t < turns.size(); ++t) {
    for (size_t b = 0; b < turns[t].blocks.size(); ++b) {
      const int32_t ttl_s = turns[t].blocks[b].ttl_s;
      if (ttl_s == 0) continue;
      if (out.size() == kMaxBreakpoints) {
        throw ApiError(400, "a maximum of " + std::to_string(kMaxBreakpoints) +
                                " blocks with cache_control may be provided");
      }
      if (!out.empty() && std::chrono::seconds(ttl_s) > out.back().ttl) {
        throw ApiError(400, "a cache_control breakpoint with ttl '1h' cannot follow one with ttl '5m'");
      }
      std::vector<ChatMessage> partial = to_messages(turns, t);
      partial.push_back({turns[t].role, join(turns[t].blocks, b + 1)});
      std::vector<int32_t> tokens;
      try {
        tokens = ctx.chat_prompt(partial, false);
      } catch (const ApiError&) {
        // A template that rejects this cut (e.g. a lone system message): the breakpoint covers what it can.
      }
      const auto mismatch = std::mismatch(tokens.begin(), tokens.end(), prompt.begin(), prompt.end());
      out.push_back({static_cast<int32_t>(mismatch.first - tokens.begin()), std::chrono::seconds(ttl_s)});
    }
  }
  return out;
}

}  // namespace

AnthropicRequest parse_messages_request(const json& body, ServerContext& ctx, bool count_only) {
  const JsonFields f(body);
  ctx.check_model(f.string("model"));
  if (const json* tools = f.array("tools"); tools != nullptr && !tools->empty()) f.fail("tools", "are not supported");
  if (const json* thinking = f.object("thinking")) {
    if (JsonFields(*thinking, "thinking.").string("type").value_or("disabled") != "disabled") {
      f.fail("thinking", "is not supported");
    }
  }
  AnthropicRequest r;
  engine::RequestParams& g = r.generation.params;
  const auto max_tokens = f.integer("max_tokens", 1, ctx.limits.max_output_tokens);
  if (!max_tokens && !count_only) f.fail("max_tokens", "is required");
  g.max_new_tokens = static_cast<int32_t>(max_tokens.value_or(1));
  g.sampling.temperature = static_cast<float>(f.number("temperature", 0, 1).value_or(1.0));
  g.sampling.top_p = static_cast<float>(f.number("top_p", 0, 1).value_or(1.0));
  if (g.sampling.top_p <= 0) f.fail("top_p", "must be greater than 0");
  g.sampling.top_k = static_cast<int32_t>(f.integer("top_k", 0, 1 << 30).value_or(0));
  g.sampling.seed = ctx.random_seed();
  r.generation.stop = f.strings("stop_sequences", static_cast<size_t>(ctx.limits.max_stop_strings));
  g.cache_salt = f.string("cache_salt").value_or("");
  r.generation.cache_explain = f.boolean("cache_explain").value_or(false);
  g.cache_bypass = !f.boolean("cache").value_or(true) || !f.boolean("cache_prompt").value_or(true);
  r.generation.text_start = true;
  (void)f.object("metadata");
  r.stream = f.boolean("stream").value_or(false);
  const std::vector<Turn> turns = parse_turns(f, body, ctx.limits.max_messages);
  g.prompt = render_prompt(ctx, turns);
  if (!count_only) g.cache_pins = resolve_breakpoints(ctx, turns, g.prompt);
  if (!count_only) apply_anthropic_structured_output(f, ctx, r.generation);
  return r;
}

json anthropic_usage(const GenerationSummary& s, std::span<const engine::CachePin> pins) {
  const int32_t n_cached = s.stats.n_cached_tokens, n_written = s.stats.n_written_tokens;
  // Written tokens lie at [n_cached, n_cached + n_written) (whole blocks after the hit); a 1h breakpoint keeps
  // [0, its n_tokens) for an hour.
  int32_t end_1h = 0;
  for (const engine::CachePin& p : pins) {
    if (p.ttl >= std::chrono::hours(1)) end_1h = std::max(end_1h, p.n_tokens);
  }
  const int32_t written_1h = std::clamp(end_1h - n_cached, 0, n_written);
  json usage = {{"input_tokens", std::max(0, s.stats.n_prompt_tokens - n_cached - n_written)},
                {"cache_creation_input_tokens", n_written},
                {"cache_read_input_tokens", n_cached},
                {"cache_creation",
                 {{"ephemeral_5m_input_tokens", n_written - written_1h}, {"ephemeral_1h_input_tokens", written_1h}}},
                {"output_tokens", s.n_completion_tokens},
                {"cache_savings", cache_savings_json(s.stats)}};
  // A cache_control breakpoint the tenant's pin budget (--pin-budget-per-tenant) or the pool's did not honour:
  // said, never silently dropped. Absent when every pin held.
  if (s.stats.n_pin_refused_blocks > 0) usage["cache_pin_refused_blocks"] = s.stats.n_pin_refused_blocks;
  // Of cache_read_input_tokens, those loaded from a cache tier below RAM; absent when none.
  if (s.stats.n_tier_tokens > 0) usage["cache_tier_read_input_tokens"] = s.stats.n_tier_tokens;
  return usage;
}

}  // namespace preface::server
