#include "server/api/anthropic_api.h"

#include <algorithm>
#include <cctype>
#include <set>

#include "server/api/api_error.h"
#include "server/api/structured_output.h"
#include "server/api/tool_calls_api.h"

namespace preface::server {
namespace {

using nlohmann::json;

constexpr size_t kMaxBreakpoints = 4;

struct Block {
  std::string text;   // text; tool_result: its content as text
  int32_t ttl_s = 0;  // > 0: cache_control breakpoint after this block
  enum class Kind { Text, ToolUse, ToolResult } kind = Kind::Text;
  std::string id;     // tool_use: its id; tool_result: the tool_use_id it answers
  std::string name;   // tool_use: the tool
  nlohmann::ordered_json input;  // tool_use: the arguments object
};

struct Turn {
  std::string role;  // "system", "user" or "assistant"
  std::vector<Block> blocks;
};

// The text blocks among the first n, joined with "\n".
std::string join(const std::vector<Block>& blocks, size_t n) {
  std::string out;
  bool first = true;
  for (size_t i = 0; i < n; ++i) {
    if (blocks[i].kind != Block::Kind::Text) continue;
    if (!first) out += '\n';
    out += blocks[i].text;
    first = false;
  }
  return out;
}

// A tool_result's content: a string or text blocks (joined with "\n").
std::string tool_result_text(const json& content, const std::string& path) {
  if (content.is_null()) return {};
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) throw ApiError(400, "'" + path + "' must be a string or an array of text blocks", path);
  std::string out;
  for (const json& b : content) {
    if (!b.is_object() || b.value("type", "") != "text" || !b.contains("text") || !b["text"].is_string()) {
      throw ApiError(400, "'" + path + "' may hold only text blocks", path);
    }
    if (!out.empty()) out.push_back('\n');
    out.append(b["text"].get_ref<const std::string&>());
  }
  return out;
}

// A tool_use or tool_result block (type already read).
Block tool_block(const json& b, const JsonFields& f, const std::string& type) {
  Block block;
  if (type == "tool_use") {
    block.kind = Block::Kind::ToolUse;
    const auto id = f.string("id"), name = f.string("name");
    if (!id || id->empty()) f.fail("id", "is required");
    if (!name) f.fail("name", "is required");
    const auto in = b.find("input");
    const auto args = in == b.end() || in->is_null() ? std::optional(nlohmann::ordered_json::object()) : arguments_object(*in);
    if (!args) f.fail("input", "must be an object");
    block.id = *id;
    block.name = *name;
    block.input = *args;
  } else {
    block.kind = Block::Kind::ToolResult;
    const auto id = f.string("tool_use_id");
    if (!id) f.fail("tool_use_id", "is required");
    (void)f.boolean("is_error");
    block.id = *id;
    const auto c = b.find("content");
    block.text = tool_result_text(c == b.end() ? json() : *c, f.path("content"));
  }
  return block;
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
  if (content.is_string()) {
    Block block;
    block.text = content.get<std::string>();
    return {block};
  }
  if (!content.is_array()) throw ApiError(400, "'" + path + "' must be a string or an array of content blocks", path);
  std::vector<Block> out;
  for (size_t i = 0; i < content.size(); ++i) {
    const std::string bpath = path + "[" + std::to_string(i) + "]";
    const json& b = content[i];
    if (!b.is_object()) throw ApiError(400, "'" + bpath + "' must be an object", bpath);
    const JsonFields f(b, bpath + ".");
    const std::string type = f.string("type").value_or("");
    Block block;
    if (type == "tool_use" || type == "tool_result") {
      block = tool_block(b, f, type);
    } else if (type != "text") {
      f.fail("type", "must be 'text', 'tool_use' or 'tool_result' (images are not supported), got '" + type + "'");
    } else {
      const auto text = f.string("text");
      if (!text) f.fail("text", "is required");
      block.text = *text;
    }
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

// The conversation as the template receives it. Plain text turns render as they always have; with tools or tool
// blocks, as template JSON: assistant tool_use blocks become tool_calls, user tool_result blocks tool messages
// (before the turn's text, in block order).
struct Conversation {
  const std::vector<Turn>& turns;
  const nlohmann::ordered_json& tools;  // null when the request has none
  bool json_path;
  const nlohmann::ordered_json& kwargs;  // template variables (enable_thinking from `thinking`)

  // The first n_turns turns, the last one cut to its first n_last blocks.
  chat::RenderedChat render(ServerContext& ctx, size_t n_turns, size_t n_last, bool add_generation_prompt) const {
    if (!json_path) {
      std::vector<ChatMessage> out;
      for (size_t i = 0; i < n_turns; ++i) {
        const size_t n = i + 1 == n_turns ? n_last : turns[i].blocks.size();
        out.push_back({turns[i].role, join(turns[i].blocks, n)});
      }
      return ctx.render_chat(out, add_generation_prompt, kwargs);
    }
    nlohmann::ordered_json out = nlohmann::ordered_json::array();
    for (size_t i = 0; i < n_turns; ++i) {
      const Turn& t = turns[i];
      const size_t n = i + 1 == n_turns ? n_last : t.blocks.size();
      nlohmann::ordered_json calls = nlohmann::ordered_json::array();
      for (size_t k = 0; k < n; ++k) {
        const Block& b = t.blocks[k];
        if (b.kind == Block::Kind::ToolResult) {
          out.push_back({{"role", "tool"}, {"content", b.text}, {"tool_call_id", b.id}});
        } else if (b.kind == Block::Kind::ToolUse) {
          calls.push_back({{"id", b.id}, {"type", "function"}, {"function", {{"name", b.name}, {"arguments", b.input}}}});
        }
      }
      const std::string text = join(t.blocks, n);
      if (t.role == "user" && text.empty() && !out.empty() && out.back()["role"] == "tool") continue;
      nlohmann::ordered_json msg = {{"role", t.role}, {"content", text}};
      if (!calls.empty()) msg["tool_calls"] = std::move(calls);
      out.push_back(std::move(msg));
    }
    return ctx.render_chat_json(out, tools, add_generation_prompt, kwargs);
  }
};

// tool_use blocks only in assistant turns, tool_result blocks only in user turns answering an earlier tool_use.
bool check_tool_blocks(const std::vector<Turn>& turns) {
  std::set<std::string> ids;
  bool any = false;
  for (const Turn& t : turns) {
    for (const Block& b : t.blocks) {
      if (b.kind == Block::Kind::Text) continue;
      any = true;
      if (b.kind == Block::Kind::ToolUse) {
        if (t.role != "assistant") throw ApiError(400, "tool_use blocks belong in assistant messages", "messages");
        ids.insert(b.id);
      } else if (t.role != "user") {
        throw ApiError(400, "tool_result blocks belong in user messages", "messages");
      } else if (!ids.count(b.id)) {
        throw ApiError(400, "a tool_result's tool_use_id '" + b.id + "' matches no earlier tool_use block",
                       "messages");
      }
    }
  }
  return any;
}

// The prompt: the conversation with a generation prompt; a final assistant turn is a prefill appended after it.
std::vector<int32_t> render_prompt(ServerContext& ctx, const Conversation& c) {
  const std::vector<Turn>& turns = c.turns;
  if (turns.back().role != "assistant") {
    return encode_chat_prompt(ctx.tokenizer, c.render(ctx, turns.size(), turns.back().blocks.size(), true));
  }
  const std::string prefill = join(turns.back().blocks, turns.back().blocks.size());
  if (!prefill.empty() && std::isspace(static_cast<unsigned char>(prefill.back()))) {
    throw ApiError(400, "final assistant content cannot end with trailing whitespace", "messages");
  }
  try {
    const size_t n = turns.size() - 1;
    chat::RenderedChat rendered = c.render(ctx, n, n > 0 ? turns[n - 1].blocks.size() : 0, true);
    rendered.add_content(prefill);  // the prefill is caller text too
    return encode_chat_prompt(ctx.tokenizer, rendered);
  } catch (const ApiError&) {
    throw;
  } catch (const Error& e) {
    throw ApiError(400, e.what(), "messages");
  }
}

std::vector<engine::CachePin> resolve_breakpoints(ServerContext& ctx, const Conversation& c,
                                                 const std::vector<int32_t>& prompt) {
  const std::vector<Turn>& turns = c.turns;
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
      std::vector<int32_t> tokens;
      try {
        tokens = encode_chat_prompt(ctx.tokenizer, c.render(ctx, t + 1, b + 1, false));
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
  const ToolsRequest tools = parse_anthropic_tools(f);
  // thinking {"type": "enabled", "budget_tokens"} | {"type": "disabled"}: the template's enable_thinking. The
  // budget is advisory, as Anthropic's (the reply's reasoning is not cut at it; max_tokens bounds the whole).
  nlohmann::ordered_json kwargs;
  if (const json* thinking = f.object("thinking")) {
    const JsonFields tf(*thinking, "thinking.");
    const std::string type = tf.string("type").value_or("");
    if (type != "enabled" && type != "disabled") tf.fail("type", "must be 'enabled' or 'disabled'");
    const auto budget = tf.integer("budget_tokens", 1, ctx.limits.max_output_tokens);
    if (type == "enabled" && !budget) tf.fail("budget_tokens", "is required when thinking is enabled");
    kwargs = {{"enable_thinking", type == "enabled"}};
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
  r.generation.harmony = template_is_harmony(ctx.chat_renderer->source());
  r.generation.think_tags = template_thinks(ctx.chat_renderer->source());
  (void)f.object("metadata");
  r.stream = f.boolean("stream").value_or(false);
  const std::vector<Turn> turns = parse_turns(f, body, ctx.limits.max_messages);
  const bool tool_blocks = check_tool_blocks(turns);
  const Conversation conversation{turns, tools.tools, tool_blocks || !tools.specs.empty(), kwargs};
  g.prompt = render_prompt(ctx, conversation);
  if (count_only) return r;
  g.cache_pins = resolve_breakpoints(ctx, conversation, g.prompt);
  apply_anthropic_structured_output(f, ctx, r.generation);
  r.tool_output = apply_tools(tools, ctx, r.generation, "input_schema");
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
