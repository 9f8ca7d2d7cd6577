// The Responses API's response object ("object": "response") and its stream of typed events: response.created,
// response.in_progress, then per output item (reasoning, message, function_call in the order generated)
// output_item.added, content_part.added, *.delta ..., *.done, content_part.done, output_item.done, and finally
// response.completed (or response.incomplete when max_output_tokens cut it, response.failed on an error).
// Every event carries its type and a sequence_number.
#include "grammar/tool_call_stream.h"
#include "server/api/responses_api.h"

namespace preface::server {
namespace {

using nlohmann::json;

enum class ItemKind { None, Reasoning, Message, Call };

class ResponsesFormat : public ResponseFormat {
 public:
  ResponsesFormat(ServerContext& ctx, ResponsesRequest& r, std::string tenant)
      : ctx_(ctx),
        id_(ctx.new_id("resp_")),
        created_(ServerContext::unix_now()),
        tenant_(std::move(tenant)),
        store_(r.store),
        resumed_(r.resumed),
        echo_(r.echo),
        input_items_(r.input_items),
        pending_(r.pending),
        tool_output_(r.chat.tool_output) {
    if (tool_output_) calls_ = tool_output_->stream();
  }

  std::string stream_start(int32_t) override {
    const json r = response("in_progress", nullptr);
    std::string out = event("response.created", {{"response", r}});  // numbered before the next one
    return out + event("response.in_progress", {{"response", r}});
  }

  std::string stream_delta(const GenerationDelta& d) override {
    std::string out;
    if (!d.reasoning.empty()) out += append(ItemKind::Reasoning, d.reasoning);
    out += call_events(d.calls);
    if (d.text.empty()) return out;
    if (calls_) return out + call_events(calls_->push(d.text));
    return out + append(ItemKind::Message, d.text);
  }

  std::string stream_end(const GenerationSummary& s) override {
    std::string out;
    if (calls_) out += call_events(calls_->finish());
    out += close_item();
    if (s.kind == StopKind::Error || s.kind == StopKind::Cancelled) {
      const std::string message =
          s.kind == StopKind::Cancelled ? "the request was cancelled: the server is shutting down" : s.error;
      json r = response("failed", &s);
      r["error"] = {{"code", "server_error"}, {"message", message}};
      return out + event("response.failed", {{"response", r}});
    }
    const json r = finished(s);
    return out + event(s.kind == StopKind::Length ? "response.incomplete" : "response.completed", {{"response", r}});
  }

  json full_response(const std::string& text, const std::string& reasoning, const std::vector<ChannelCall>& channel,
                     const std::vector<TokenLogprob>&, const GenerationSummary& s) override {
    if (!reasoning.empty()) items_.push_back(reasoning_item(ctx_.new_id("rs_"), reasoning, "completed"));
    std::string content = text;
    std::vector<std::pair<std::string, std::string>> calls;  // (name, arguments)
    for (const ChannelCall& c : channel) calls.emplace_back(c.name, c.arguments);
    if (calls.empty() && tool_output_) {
      if (const auto parsed = tool_output_->parse(text); parsed && !parsed->calls.empty()) {
        content = parsed->content;
        for (const grammar::ParsedToolCall& c : parsed->calls) calls.emplace_back(c.name, dump_json(c.arguments));
      }
    }
    if (!content.empty() || calls.empty()) items_.push_back(message_item(ctx_.new_id("msg_"), content, "completed"));
    for (const auto& [name, args] : calls) {
      items_.push_back(call_item(ctx_.new_id("fc_"), ctx_.new_call_id(), name, args, "completed"));
    }
    return finished(s);
  }

  const std::string& id() const override { return id_; }

 private:
  static json message_item(const std::string& id, const std::string& text, const char* status) {
    return {{"id", id}, {"type", "message"}, {"status", status}, {"role", "assistant"},
            {"content", json::array({output_text(text)})}};
  }
  static json output_text(const std::string& text) {
    return {{"type", "output_text"}, {"text", text}, {"annotations", json::array()}, {"logprobs", json::array()}};
  }
  static json reasoning_item(const std::string& id, const std::string& text, const char* status) {
    return {{"id", id}, {"type", "reasoning"}, {"status", status}, {"summary", json::array()},
            {"content", json::array({{{"type", "reasoning_text"}, {"text", text}}})}};
  }
  static json call_item(const std::string& id, const std::string& call_id, const std::string& name,
                        const std::string& args, const char* status) {
    return {{"id", id}, {"type", "function_call"}, {"status", status}, {"call_id", call_id}, {"name", name},
            {"arguments", args}};
  }

  std::string event(const char* type, json payload) {
    payload["type"] = type;
    payload["sequence_number"] = seq_++;
    return sse_event(type, payload);
  }

  json item_ref() const { return {{"item_id", items_.back()["id"]}, {"output_index", items_.size() - 1}}; }

  // Opens an item of `kind` (closing the open one) and returns its events.
  std::string open_item(ItemKind kind, const std::string& call_name = "") {
    std::string out = close_item();
    open_ = kind;
    json item, part;
    if (kind == ItemKind::Message) {
      item = message_item(ctx_.new_id("msg_"), "", "in_progress");
      item["content"] = json::array();
      part = output_text("");
    } else if (kind == ItemKind::Reasoning) {
      item = reasoning_item(ctx_.new_id("rs_"), "", "in_progress");
      item["content"] = json::array();
      part = {{"type", "reasoning_text"}, {"text", ""}};
    } else {
      item = call_item(ctx_.new_id("fc_"), ctx_.new_call_id(), call_name, "", "in_progress");
    }
    items_.push_back(item);
    out += event("response.output_item.added", {{"output_index", items_.size() - 1}, {"item", item}});
    if (!part.is_null()) {
      items_.back()["content"].push_back(part);
      json p = item_ref();
      p["content_index"] = 0;
      p["part"] = part;
      out += event("response.content_part.added", p);
    }
    return out;
  }

  // Text for the open item of `kind` (opening one when needed).
  std::string append(ItemKind kind, const std::string& text) {
    std::string out = open_ == kind ? "" : open_item(kind);
    json p = item_ref();
    p["delta"] = text;
    if (kind == ItemKind::Call) {
      items_.back()["arguments"] = items_.back()["arguments"].get<std::string>() + text;
      return out + event("response.function_call_arguments.delta", p);
    }
    json& part = items_.back()["content"][0];
    part["text"] = part["text"].get<std::string>() + text;
    p["content_index"] = 0;
    if (kind == ItemKind::Message) p["logprobs"] = json::array();
    return out + event(kind == ItemKind::Message ? "response.output_text.delta" : "response.reasoning_text.delta", p);
  }

  std::string call_events(const std::vector<grammar::ToolCallEvent>& events) {
    std::string out;
    for (const grammar::ToolCallEvent& e : events) {
      if (e.kind == grammar::ToolCallEvent::Kind::CallStart) {
        out += open_item(ItemKind::Call, e.text);
      } else if (e.kind == grammar::ToolCallEvent::Kind::Arguments) {
        if (open_ == ItemKind::Call) out += append(ItemKind::Call, e.text);
      } else if (!e.text.empty()) {
        out += append(ItemKind::Message, e.text);
      }
    }
    return out;
  }

  std::string close_item() {
    if (open_ == ItemKind::None) return {};
    const ItemKind kind = open_;
    open_ = ItemKind::None;
    json& item = items_.back();
    item["status"] = "completed";
    std::string out;
    json p = item_ref();
    if (kind == ItemKind::Call) {
      p["arguments"] = item["arguments"];
      out += event("response.function_call_arguments.done", p);
    } else {
      const json part = item["content"][0];
      p["content_index"] = 0;
      p["text"] = part["text"];
      if (kind == ItemKind::Message) p["logprobs"] = json::array();
      out += event(kind == ItemKind::Message ? "response.output_text.done" : "response.reasoning_text.done", p);
      json done = item_ref();
      done["content_index"] = 0;
      done["part"] = part;
      out += event("response.content_part.done", done);
    }
    out += event("response.output_item.done", {{"output_index", items_.size() - 1}, {"item", item}});
    return out;
  }

  json response(const char* status, const GenerationSummary* s) const {
    json r = {{"id", id_}, {"object", "response"}, {"created_at", created_}, {"status", status},
              {"error", nullptr}, {"incomplete_details", nullptr}, {"model", ctx_.model_id}, {"output", items_}};
    r.update(echo_);
    if (s != nullptr) {
      const int32_t n_in = s->stats.n_prompt_tokens;
      r["usage"] = {{"input_tokens", n_in},
                    {"input_tokens_details",
                     {{"cached_tokens", s->stats.n_cached_tokens}, {"cache_write_tokens", s->stats.n_written_tokens}}},
                    {"output_tokens", s->n_completion_tokens},
                    {"output_tokens_details", {{"reasoning_tokens", 0}}},
                    {"total_tokens", n_in + s->n_completion_tokens},
                    {"cache_savings", cache_savings_json(s->stats)}};
    } else {
      r["usage"] = nullptr;
    }
    r["preface"] = {{"resumed", resumed_}};
    return r;
  }

  // The final object (completed, or incomplete at max_output_tokens), stored when the request asked for it.
  json finished(const GenerationSummary& s) {
    const bool cut = s.kind == StopKind::Length;
    json r = response(cut ? "incomplete" : "completed", &s);
    if (cut) r["incomplete_details"] = {{"reason", "max_output_tokens"}};
    merge_extra_fields(r);
    if (store_) store(r, s);
    return r;
  }

  void store(const json& r, const GenerationSummary& s) {
    std::string text;
    nlohmann::ordered_json calls = nlohmann::ordered_json::array();
    for (const json& item : items_) {
      if (item["type"] == "message") text += item["content"][0]["text"].get<std::string>();
      if (item["type"] == "function_call") {
        calls.push_back({{"id", item["call_id"]}, {"type", "function"},
                         {"function", {{"name", item["name"]}, {"arguments", item["arguments"]}}}});
      }
    }
    pending_->id = id_;
    pending_->response = r;
    pending_->input_items = input_items_;
    pending_->reply_message = {{"role", "assistant"}, {"content", calls.empty() || !text.empty() ? json(text) : json()}};
    if (!calls.empty()) pending_->reply_message["tool_calls"] = calls;
    pending_->reply_tokens = s.output_tokens;
    pending_->stop_token = s.stats.stop_token;
    ctx_.responses.put(tenant_, pending_);
  }

  ServerContext& ctx_;
  std::string id_;
  int64_t created_;
  std::string tenant_;
  bool store_;
  bool resumed_;
  json echo_;
  json input_items_;
  std::shared_ptr<StoredResponse> pending_;
  std::optional<ToolOutput> tool_output_;
  std::unique_ptr<grammar::ToolCallStream> calls_;
  std::vector<json> items_;  // the output items so far
  ItemKind open_ = ItemKind::None;
  int64_t seq_ = 0;
};

}  // namespace

std::unique_ptr<ResponseFormat> make_responses_format(ServerContext& ctx, ResponsesRequest& request,
                                                      const std::string& tenant) {
  return std::make_unique<ResponsesFormat>(ctx, request, tenant);
}

}  // namespace preface::server
