// Anthropic Messages response bodies and the streaming event sequence: message_start, content_block_start, ping,
// content_block_delta..., content_block_stop, message_delta, message_stop (or an error event).
#include "server/api/anthropic_api.h"
#include "server/api/api_error.h"

namespace preface::server {
namespace {

using nlohmann::json;

class MessagesFormat : public ResponseFormat {
 public:
  MessagesFormat(ServerContext& ctx, std::vector<engine::CachePin> pins)
      : ctx_(ctx), id_(ctx.new_id("msg_")), pins_(std::move(pins)) {}

  std::string stream_start(int32_t n_prompt_tokens) override {
    json message = envelope();
    message["content"] = json::array();
    message["stop_reason"] = nullptr;
    message["stop_sequence"] = nullptr;
    merge_extra_fields(message);
    // The cache counts are known only when the request ends; message_delta carries the final usage.
    message["usage"] = {{"input_tokens", n_prompt_tokens},
                        {"cache_creation_input_tokens", 0},
                        {"cache_read_input_tokens", 0},
                        {"cache_creation", {{"ephemeral_5m_input_tokens", 0}, {"ephemeral_1h_input_tokens", 0}}},
                        {"output_tokens", 0}};
    return sse_event("message_start", {{"type", "message_start"}, {"message", message}}) +
           sse_event("content_block_start",
                     {{"type", "content_block_start"}, {"index", 0}, {"content_block", {{"type", "text"}, {"text", ""}}}}) +
           sse_event("ping", {{"type", "ping"}});
  }

  std::string stream_delta(const GenerationDelta& d) override {
    if (d.text.empty()) return {};
    return sse_event("content_block_delta", {{"type", "content_block_delta"},
                                             {"index", 0},
                                             {"delta", {{"type", "text_delta"}, {"text", d.text}}}});
  }

  std::string stream_end(const GenerationSummary& s) override {
    if (s.kind == StopKind::Error || s.kind == StopKind::Cancelled) {
      const bool shutdown = s.kind == StopKind::Cancelled;
      return sse_event("error", error_body(ApiFlavor::Anthropic, shutdown ? 503 : 500,
                                           shutdown ? "the request was cancelled: the server is shutting down"
                                                    : s.error));
    }
    return sse_event("content_block_stop", {{"type", "content_block_stop"}, {"index", 0}}) +
           sse_event("message_delta", {{"type", "message_delta"},
                                       {"delta", {{"stop_reason", anthropic_stop_reason(s.kind)},
                                                  {"stop_sequence", stop_sequence(s)}}},
                                       {"usage", anthropic_usage(s, pins_)}}) +
           sse_event("message_stop", {{"type", "message_stop"}});
  }

  json full_response(const std::string& text, const std::vector<TokenLogprob>&, const GenerationSummary& s) override {
    json out = envelope();
    out["content"] = json::array({{{"type", "text"}, {"text", text}}});
    out["stop_reason"] = anthropic_stop_reason(s.kind);
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

  ServerContext& ctx_;
  std::string id_;
  std::vector<engine::CachePin> pins_;  // the request's cache_control breakpoints (the usage's cache_creation split)
};

}  // namespace

std::unique_ptr<ResponseFormat> make_messages_format(ServerContext& ctx, const AnthropicRequest& r) {
  return std::make_unique<MessagesFormat>(ctx, r.generation.params.cache_pins);
}

}  // namespace preface::server
