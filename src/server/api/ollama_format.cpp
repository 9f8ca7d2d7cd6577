// Ollama's response objects: NDJSON lines while streaming ({"model", "created_at", "message": {"role",
// "content", "thinking"}, "done": false} for /api/chat, "response" instead of "message" for /api/generate), then
// a last line with "done": true, "done_reason" ("stop" | "length"), the tool calls ({"function": {"name",
// "arguments": {...}}}) and the counts and durations (nanoseconds); an error mid-stream is a {"error"} line.
// Unstreamed: one object, the whole reply and the counts.
#include "grammar/tool_call_stream.h"
#include "grammar/tool_calls.h"
#include "server/api/ollama_api.h"

namespace preface::server {
namespace {

using nlohmann::json;

class OllamaFormat : public ResponseFormat {
 public:
  OllamaFormat(ServerContext& ctx, const OllamaRequest& r)
      : id_(ctx.new_id("ollama-")), model_(r.model), chat_(r.chat), tool_output_(r.openai.tool_output) {
    if (tool_output_) calls_ = tool_output_->stream();
  }

  const char* stream_content_type() const override { return "application/x-ndjson"; }
  std::string stream_start(int32_t) override { return {}; }

  std::string stream_delta(const GenerationDelta& d) override {
    std::string content;
    take_calls(d.calls, content);
    if (calls_) {
      take_calls(calls_->push(d.text), content);
    } else {
      content += d.text;
    }
    if (content.empty() && d.reasoning.empty()) return {};
    return line(piece(content, d.reasoning, json(), false));
  }

  std::string stream_end(const GenerationSummary& s) override {
    if (s.kind == StopKind::Error || s.kind == StopKind::Cancelled) {
      return line({{"error", s.kind == StopKind::Cancelled ? "the server is shutting down" : s.error}});
    }
    std::string content;
    if (calls_) take_calls(calls_->finish(), content);
    std::string out = content.empty() ? "" : line(piece(content, "", json(), false));
    json last = piece("", "", tool_calls(), true);
    add_stats(last, s);
    return out + line(last);
  }

  json full_response(const std::string& text, const std::string& reasoning, const std::vector<ChannelCall>& channel,
                     const std::vector<TokenLogprob>&, const GenerationSummary& s) override {
    std::string content = text;
    for (const ChannelCall& c : channel) calls_seen_.emplace_back(c.name, c.arguments);
    if (calls_seen_.empty() && tool_output_) {
      if (const auto parsed = tool_output_->parse(text); parsed && !parsed->calls.empty()) {
        content = parsed->content;
        for (const grammar::ParsedToolCall& c : parsed->calls) calls_seen_.emplace_back(c.name, dump_json(c.arguments));
      }
    }
    json out = piece(content, reasoning, tool_calls(), true);
    add_stats(out, s);
    merge_extra_fields(out);
    return out;
  }

  const std::string& id() const override { return id_; }

 private:
  static std::string line(const json& j) { return dump_json(j) + "\n"; }

  json piece(const std::string& content, const std::string& thinking, const json& calls, bool done) const {
    json out = {{"model", model_}, {"created_at", ollama_time_now()}};
    if (chat_) {
      json msg = {{"role", "assistant"}, {"content", content}};
      if (!thinking.empty()) msg["thinking"] = thinking;
      if (calls.is_array() && !calls.empty()) msg["tool_calls"] = calls;
      out["message"] = std::move(msg);
    } else {
      out["response"] = content;
      if (!thinking.empty()) out["thinking"] = thinking;
    }
    out["done"] = done;
    return out;
  }

  // Calls as Ollama writes them: arguments an object (the text as generated when it is not one).
  json tool_calls() const {
    json out = json::array();
    for (const auto& [name, args] : calls_seen_) {
      json parsed = json::parse(args, nullptr, false);
      out.push_back({{"function", {{"name", name}, {"arguments", parsed.is_object() ? parsed : json(args)}}}});
    }
    return out;
  }

  void take_calls(const std::vector<grammar::ToolCallEvent>& events, std::string& content) {
    for (const grammar::ToolCallEvent& e : events) {
      if (e.kind == grammar::ToolCallEvent::Kind::Text) {
        content += e.text;
      } else if (e.kind == grammar::ToolCallEvent::Kind::CallStart) {
        calls_seen_.emplace_back(e.text, "");
      } else if (!calls_seen_.empty()) {
        calls_seen_.back().second += e.text;
      }
    }
  }

  static void add_stats(json& out, const GenerationSummary& s) {
    const auto ns = [](double ms) { return static_cast<int64_t>(ms * 1e6); };
    out["done_reason"] = s.kind == StopKind::Length ? "length" : "stop";
    out["total_duration"] = ns(s.stats.total_ms);
    out["load_duration"] = 0;
    out["prompt_eval_count"] = s.stats.n_prompt_tokens;
    out["prompt_eval_duration"] = ns(s.stats.prefill_ms);
    out["eval_count"] = s.n_completion_tokens;
    out["eval_duration"] = ns(s.stats.decode_ms);
    out["prompt_cached_count"] = s.stats.n_cached_tokens;  // preface: prompt tokens served by the prefix cache
  }

  std::string id_;
  std::string model_;
  bool chat_;
  std::optional<ToolOutput> tool_output_;
  std::unique_ptr<grammar::ToolCallStream> calls_;
  std::vector<std::pair<std::string, std::string>> calls_seen_;  // (name, arguments text)
};

}  // namespace

std::unique_ptr<ResponseFormat> make_ollama_format(ServerContext& ctx, const OllamaRequest& request) {
  return std::make_unique<OllamaFormat>(ctx, request);
}

}  // namespace preface::server
