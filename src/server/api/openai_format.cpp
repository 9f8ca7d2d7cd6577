// OpenAI response bodies and stream chunks for /v1/completions ("text_completion") and /v1/chat/completions
// ("chat.completion" / "chat.completion.chunk").
#include "grammar/tool_call_stream.h"
#include "server/api/api_error.h"
#include "server/api/openai_api.h"

namespace preface::server {
namespace {

using nlohmann::json;

// Chat logprobs: {"content": [{"token", "logprob", "bytes", "top_logprobs": [...]}], "refusal": null}.
json chat_logprob_entries(const Tokenizer& tok, const std::vector<TokenLogprob>& lps) {
  json content = json::array();
  for (const TokenLogprob& lp : lps) {
    const std::string text = token_text(tok, lp.token);
    json top = json::array();
    for (const TopLogprob& t : lp.top) {
      const std::string alt = token_text(tok, t.token);
      top.push_back({{"token", alt}, {"logprob", t.logprob}, {"bytes", byte_array(alt)}});
    }
    content.push_back({{"token", text}, {"logprob", lp.logprob}, {"bytes", byte_array(text)}, {"top_logprobs", top}});
  }
  return content;
}

// Legacy completions logprobs: parallel arrays; text_offset counts bytes from the start of the completion.
json completion_logprobs(const Tokenizer& tok, const std::vector<TokenLogprob>& lps, size_t& text_offset) {
  json tokens = json::array(), token_lps = json::array(), tops = json::array(), offsets = json::array();
  for (const TokenLogprob& lp : lps) {
    const std::string text = token_text(tok, lp.token);
    tokens.push_back(text);
    token_lps.push_back(lp.logprob);
    json top = json::object();
    for (const TopLogprob& t : lp.top) top[token_text(tok, t.token)] = t.logprob;
    tops.push_back(std::move(top));
    offsets.push_back(text_offset);
    text_offset += text.size();
  }
  return {{"tokens", tokens}, {"token_logprobs", token_lps}, {"top_logprobs", tops}, {"text_offset", offsets}};
}

std::string error_event(const GenerationSummary& s) {
  const bool shutdown = s.kind == StopKind::Cancelled;
  const std::string message = shutdown ? "the request was cancelled: the server is shutting down" : s.error;
  return sse_data(error_body(ApiFlavor::OpenAI, shutdown ? 503 : 500, message));
}

class OpenAIFormat : public ResponseFormat {
 public:
  OpenAIFormat(ServerContext& ctx, const OpenAIRequest& r, bool chat)
      : ctx_(ctx),
        chat_(chat),
        logprobs_(r.logprobs),
        include_usage_(r.include_usage),
        pins_(r.generation.params.cache_pins),
        id_(ctx.new_id(chat ? "chatcmpl-" : "cmpl-")),
        created_(ServerContext::unix_now()),
        tool_output_(chat ? r.tool_output : std::nullopt) {
    if (tool_output_) calls_ = tool_output_->stream();
  }

  std::string stream_start(int32_t) override {
    if (!chat_) return {};
    return sse_data(chunk({{"role", "assistant"}, {"content", ""}}, json(nullptr), json(nullptr)));
  }

  std::string stream_delta(const GenerationDelta& d) override {
    // Reasoning (harmony's analysis channel) as delta.reasoning_content, as llama.cpp and vLLM stream it.
    std::string reasoning;
    if (chat_ && !d.reasoning.empty()) {
      reasoning = sse_data(chunk(json{{"reasoning_content", d.reasoning}}, json(nullptr), json(nullptr)));
    }
    if (chat_ && !d.calls.empty()) {  // harmony's calls
      for (const grammar::ToolCallEvent& e : d.calls) {
        n_channel_calls_ += e.kind == grammar::ToolCallEvent::Kind::CallStart ? 1 : 0;
      }
      reasoning += call_chunks(d.calls, json(nullptr));
    }
    if (d.text.empty() && (!logprobs_ || d.logprobs.empty())) return reasoning;
    return reasoning + content_delta(d);
  }

  std::string content_delta(const GenerationDelta& d) {
    json lp = json(nullptr);
    if (logprobs_) {
      lp = chat_ ? json{{"content", chat_logprob_entries(ctx_.tokenizer, d.logprobs)}, {"refusal", nullptr}}
                 : completion_logprobs(ctx_.tokenizer, d.logprobs, text_offset_);
    }
    if (calls_) return call_chunks(calls_->push(d.text), lp);
    return sse_data(chunk(chat_ ? json{{"content", d.text}} : json(d.text), lp, json(nullptr)));
  }

  std::string stream_end(const GenerationSummary& s) override {
    std::string out;
    if (s.kind == StopKind::Error || s.kind == StopKind::Cancelled) {
      out = error_event(s);
    } else {
      if (calls_) out = call_chunks(calls_->finish(), json(nullptr));
      const bool called = (calls_ && calls_->n_calls() > 0) || n_channel_calls_ > 0;
      const char* finish = called ? "tool_calls" : openai_finish_reason(s.kind);
      json last = chunk(chat_ ? json::object() : json(""), json(nullptr), finish);
      merge_extra_fields(last);
      out += sse_data(last);
      if (include_usage_) {
        json last = envelope(chat_ ? "chat.completion.chunk" : "text_completion");
        last["choices"] = json::array();
        last["usage"] = openai_usage(s, pins_, ctx_.model.block_size);
        out += sse_data(last);
      }
    }
    return out + "data: [DONE]\n\n";
  }

  json full_response(const std::string& text, const std::string& reasoning,
                     const std::vector<ChannelCall>& channel_calls, const std::vector<TokenLogprob>& lps,
                     const GenerationSummary& s) override {
    json choice = {{"index", 0}};
    json lp = json(nullptr);
    if (logprobs_) {
      size_t offset = 0;
      lp = chat_ ? json{{"content", chat_logprob_entries(ctx_.tokenizer, lps)}, {"refusal", nullptr}}
                 : completion_logprobs(ctx_.tokenizer, lps, offset);
    }
    const auto parsed = tool_output_ ? tool_output_->parse(text) : std::nullopt;
    if (chat_ && !channel_calls.empty()) {  // harmony's calls: the arguments as generated
      json calls = json::array();
      for (const ChannelCall& c : channel_calls) {
        calls.push_back({{"id", ctx_.new_call_id()},
                         {"type", "function"},
                         {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
      }
      choice["message"] = {{"role", "assistant"}, {"content", text.empty() ? json(nullptr) : json(text)},
                           {"refusal", nullptr}, {"tool_calls", calls}};
    } else if (parsed && !parsed->calls.empty()) {
      json calls = json::array();
      for (const grammar::ParsedToolCall& c : parsed->calls) {
        calls.push_back({{"id", ctx_.new_call_id()},
                         {"type", "function"},
                         {"function", {{"name", c.name}, {"arguments", dump_json(c.arguments)}}}});
      }
      const json content = parsed->content.empty() ? json(nullptr) : json(parsed->content);
      choice["message"] = {{"role", "assistant"}, {"content", content}, {"refusal", nullptr}, {"tool_calls", calls}};
    } else if (chat_) {
      choice["message"] = {{"role", "assistant"}, {"content", text}, {"refusal", nullptr}};
    } else {
      choice["text"] = text;
    }
    if (chat_ && !reasoning.empty()) choice["message"]["reasoning_content"] = reasoning;
    choice["logprobs"] = lp;
    const bool called = (parsed && !parsed->calls.empty()) || (chat_ && !channel_calls.empty());
    choice["finish_reason"] = called ? "tool_calls" : openai_finish_reason(s.kind);
    json out = envelope(chat_ ? "chat.completion" : "text_completion");
    out["choices"] = json::array({choice});
    out["usage"] = openai_usage(s, pins_, ctx_.model.block_size);
    merge_extra_fields(out);
    return out;
  }

  const std::string& id() const override { return id_; }

 private:
  json envelope(const char* object) const {
    return {{"id", id_}, {"object", object}, {"created", created_}, {"model", ctx_.model_id},
            {"system_fingerprint", "preface"}};
  }

  // One streamed choice: `delta_or_text` is the chat delta object or the completion text.
  json chunk(const json& delta_or_text, const json& logprobs, const json& finish_reason) const {
    json choice = {{"index", 0}};
    choice[chat_ ? "delta" : "text"] = delta_or_text;
    choice["logprobs"] = logprobs;
    choice["finish_reason"] = finish_reason;
    json out = envelope(chat_ ? "chat.completion.chunk" : "text_completion");
    out["choices"] = json::array({choice});
    if (include_usage_) out["usage"] = nullptr;
    return out;
  }

  // Tool-call events as chunks: text as delta.content, a call's start as delta.tool_calls [{index, id, type,
  // function: {name, arguments: ""}}], argument fragments as [{index, function: {arguments}}]. `lp` rides on the
  // first chunk (or an empty-content one when the events are held back).
  std::string call_chunks(const std::vector<grammar::ToolCallEvent>& events, json lp) {
    std::string out;
    for (const grammar::ToolCallEvent& e : events) {
      json delta;
      if (e.kind == grammar::ToolCallEvent::Kind::Text) {
        delta = {{"content", e.text}};
      } else if (e.kind == grammar::ToolCallEvent::Kind::CallStart) {
        delta = {{"tool_calls", json::array({{{"index", e.index},
                                              {"id", ctx_.new_call_id()},
                                              {"type", "function"},
                                              {"function", {{"name", e.text}, {"arguments", ""}}}}})}};
      } else {
        delta = {{"tool_calls", json::array({{{"index", e.index}, {"function", {{"arguments", e.text}}}}})}};
      }
      out += sse_data(chunk(delta, lp, json(nullptr)));
      lp = json(nullptr);
    }
    if (out.empty() && !lp.is_null()) out = sse_data(chunk(json{{"content", ""}}, lp, json(nullptr)));
    return out;
  }

  ServerContext& ctx_;
  bool chat_;
  bool logprobs_;
  bool include_usage_;
  std::vector<engine::CachePin> pins_;  // the request's cache pins (the usage's cache_pinned_tokens)
  std::string id_;
  int64_t created_;
  size_t text_offset_ = 0;  // bytes of completion text streamed so far (legacy logprobs text_offset)
  std::optional<ToolOutput> tool_output_;            // chat with tools
  std::unique_ptr<grammar::ToolCallStream> calls_;  // streams: the calls parsed so far
  int32_t n_channel_calls_ = 0;                     // streams: calls read from the reply's channels (harmony)
};

}  // namespace

std::unique_ptr<ResponseFormat> make_completion_format(ServerContext& ctx, const OpenAIRequest& request) {
  return std::make_unique<OpenAIFormat>(ctx, request, false);
}

std::unique_ptr<ResponseFormat> make_chat_format(ServerContext& ctx, const OpenAIRequest& request) {
  return std::make_unique<OpenAIFormat>(ctx, request, true);
}

}  // namespace preface::server
