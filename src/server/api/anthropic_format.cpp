// Anthropic Messages response bodies and the streaming event sequence: message_start, content_block_start, ping,
// content_block_delta..., content_block_stop, message_delta, message_stop (or an error event).
#include "grammar/tool_call_stream.h"
#include "server/api/anthropic_api.h"
#include "server/api/api_error.h"
#include "server/api/tool_calls_api.h"

namespace preface::server {
namespace {

using nlohmann::json;

class MessagesFormat : public ResponseFormat {
 public:
  MessagesFormat(ServerContext& ctx, std::vector<engine::CachePin> pins, std::optional<ToolOutput> tool_output,
                 bool reasoning)
      : ctx_(ctx), id_(ctx.new_id("msg_")), pins_(std::move(pins)), tool_output_(tool_output), reasoning_(reasoning) {
    if (tool_output_) calls_ = tool_output_->stream();
  }

  // message_start goes out with the first token, when the prompt's cache counts are known: its usage splits
  // the prompt as the final message_delta's does (blocks written while decoding count there only).
  bool start_after_first_token() const override { return true; }
  void set_prompt_cache(int32_t n_cached, int32_t n_written) override {
    n_cached_ = std::max(0, n_cached);
    n_written_ = std::max(0, n_written);
  }

  std::string stream_start(int32_t n_prompt_tokens) override {
    json message = envelope();
    message["content"] = json::array();
    message["stop_reason"] = nullptr;
    message["stop_sequence"] = nullptr;
    merge_extra_fields(message);
    GenerationSummary so_far;  // the prompt's part of the final usage
    so_far.stats.n_prompt_tokens = n_prompt_tokens;
    so_far.stats.n_cached_tokens = n_cached_;
    so_far.stats.n_written_tokens = n_written_;
    message["usage"] = anthropic_usage(so_far, pins_);
    message["usage"].erase("cache_savings");
    std::string out = sse_event("message_start", {{"type", "message_start"}, {"message", message}});
    // With tools or reasoning, blocks open as their first text arrives.
    if (!calls_ && !reasoning_) out += open_block({{"type", "text"}, {"text", ""}}, Block::Text);
    return out + sse_event("ping", {{"type", "ping"}});
  }

  std::string stream_delta(const GenerationDelta& d) override {
    std::string out;
    if (!d.reasoning.empty()) out = thinking_delta(d.reasoning);
    if (!d.calls.empty()) {  // harmony's calls
      for (const grammar::ToolCallEvent& e : d.calls) {
        n_channel_calls_ += e.kind == grammar::ToolCallEvent::Kind::CallStart ? 1 : 0;
      }
      out += call_events(d.calls);
    }
    if (d.text.empty()) return out;
    if (calls_) return out + call_events(calls_->push(d.text));
    return out + text_delta(d.text);
  }

  std::string stream_end(const GenerationSummary& s) override {
    if (s.kind == StopKind::Error || s.kind == StopKind::Cancelled) {
      const bool shutdown = s.kind == StopKind::Cancelled;
      return sse_event("error", error_body(ApiFlavor::Anthropic, shutdown ? 503 : 500,
                                           shutdown ? "the request was cancelled: the server is shutting down"
                                                    : s.error));
    }
    std::string out;
    if (calls_) out = call_events(calls_->finish());
    if (n_blocks_ == 0) out += open_block({{"type", "text"}, {"text", ""}}, Block::Text);
    out += sse_event("content_block_stop", {{"type", "content_block_stop"}, {"index", n_blocks_ - 1}});
    const bool called = (calls_ && calls_->n_calls() > 0) || n_channel_calls_ > 0;
    return out +
           sse_event("message_delta", {{"type", "message_delta"},
                                       {"delta", {{"stop_reason", called ? "tool_use" : anthropic_stop_reason(s.kind)},
                                                  {"stop_sequence", stop_sequence(s)}}},
                                       {"usage", anthropic_usage(s, pins_)}}) +
           sse_event("message_stop", {{"type", "message_stop"}});
  }

  json full_response(const std::string& text, const std::string& reasoning,
                     const std::vector<ChannelCall>& channel_calls, const std::vector<TokenLogprob>&,
                     const GenerationSummary& s) override {
    json out = envelope();
    const auto parsed = tool_output_ ? tool_output_->parse(text) : std::nullopt;
    if (!channel_calls.empty()) {  // harmony's calls; arguments that are not a JSON object (or nest too deep) give {}
      out["content"] = json::array();
      if (!text.empty()) out["content"].push_back({{"type", "text"}, {"text", text}});
      for (const ChannelCall& c : channel_calls) {
        json input = json::object();
        try {
          if (const auto args = arguments_object(json(c.arguments))) input = json::parse(args->dump());
        } catch (const ApiError&) {
        }
        out["content"].push_back(
            {{"type", "tool_use"}, {"id", ctx_.new_id("toolu_")}, {"name", c.name}, {"input", input}});
      }
      out["stop_reason"] = "tool_use";
    } else if (parsed && !parsed->calls.empty()) {
      out["content"] = json::array();
      if (!parsed->content.empty()) out["content"].push_back({{"type", "text"}, {"text", parsed->content}});
      for (const grammar::ParsedToolCall& c : parsed->calls) {
        out["content"].push_back({{"type", "tool_use"}, {"id", ctx_.new_id("toolu_")}, {"name", c.name}, {"input", c.arguments}});
      }
      out["stop_reason"] = "tool_use";
    } else {
      out["content"] = json::array({{{"type", "text"}, {"text", text}}});
      out["stop_reason"] = anthropic_stop_reason(s.kind);
    }
    if (!reasoning.empty()) {  // the model's reasoning (harmony's analysis channel) as a leading thinking block
      out["content"].insert(out["content"].begin(), {{"type", "thinking"}, {"thinking", reasoning}, {"signature", ""}});
    }
    out["stop_sequence"] = stop_sequence(s);
    out["usage"] = anthropic_usage(s, pins_);
    merge_extra_fields(out);
    return out;
  }

  const std::string& id() const override { return id_; }

 private:
  json envelope() const { return {{"id", id_}, {"type", "message"}, {"role", "assistant"}, {"model", ctx_.model_id}}; }
  static json stop_sequence(const GenerationSummary& s) {
    return s.kind == StopKind::StopString ? json(s.stop_string) : json(nullptr);
  }

  enum class Block : uint8_t { Text, Thinking, Tool };

  // content_block_start of a new block at the next index (the open one, if any, stopped first).
  std::string open_block(const json& block, Block kind) {
    std::string out;
    if (n_blocks_ > 0) out = sse_event("content_block_stop", {{"type", "content_block_stop"}, {"index", n_blocks_ - 1}});
    out += sse_event("content_block_start", {{"type", "content_block_start"}, {"index", n_blocks_}, {"content_block", block}});
    ++n_blocks_;
    open_ = kind;
    return out;
  }

  std::string thinking_delta(const std::string& text) {
    std::string out;
    if (n_blocks_ == 0 || open_ != Block::Thinking) {
      out = open_block({{"type", "thinking"}, {"thinking", ""}, {"signature", ""}}, Block::Thinking);
    }
    return out + sse_event("content_block_delta", {{"type", "content_block_delta"},
                                                   {"index", n_blocks_ - 1},
                                                   {"delta", {{"type", "thinking_delta"}, {"thinking", text}}}});
  }

  std::string text_delta(const std::string& text) {
    std::string out;
    if (n_blocks_ == 0 || open_ != Block::Text) out = open_block({{"type", "text"}, {"text", ""}}, Block::Text);
    return out + sse_event("content_block_delta", {{"type", "content_block_delta"},
                                                   {"index", n_blocks_ - 1},
                                                   {"delta", {{"type", "text_delta"}, {"text", text}}}});
  }

  // Text as text blocks, each call as a tool_use block (input {} at the start, as Anthropic streams it) whose
  // arguments arrive as input_json_delta events.
  std::string call_events(const std::vector<grammar::ToolCallEvent>& events) {
    std::string out;
    for (const grammar::ToolCallEvent& e : events) {
      if (e.kind == grammar::ToolCallEvent::Kind::Text) {
        out += text_delta(e.text);
      } else if (e.kind == grammar::ToolCallEvent::Kind::CallStart) {
        out += open_block({{"type", "tool_use"}, {"id", ctx_.new_id("toolu_")}, {"name", e.text}, {"input", json::object()}},
                          Block::Tool);
      } else {
        out += sse_event("content_block_delta", {{"type", "content_block_delta"},
                                                 {"index", n_blocks_ - 1},
                                                 {"delta", {{"type", "input_json_delta"}, {"partial_json", e.text}}}});
      }
    }
    return out;
  }

  ServerContext& ctx_;
  std::string id_;
  std::vector<engine::CachePin> pins_;  // the request's cache_control breakpoints (the usage's cache_creation split)
  std::optional<ToolOutput> tool_output_;
  int32_t n_cached_ = 0, n_written_ = 0;  // the prompt's cache counts at the first token
  std::unique_ptr<grammar::ToolCallStream> calls_;  // streams with tools: the calls parsed so far
  bool reasoning_;              // the reply may carry reasoning (thinking blocks)
  int32_t n_channel_calls_ = 0; // calls read from the reply's channels (harmony)
  int32_t n_blocks_ = 0;       // content blocks started
  Block open_ = Block::Text;   // the kind of the last started block
};

}  // namespace

std::unique_ptr<ResponseFormat> make_messages_format(ServerContext& ctx, const AnthropicRequest& r) {
  return std::make_unique<MessagesFormat>(ctx, r.generation.params.cache_pins, r.tool_output, r.generation.harmony);
}

}  // namespace preface::server
