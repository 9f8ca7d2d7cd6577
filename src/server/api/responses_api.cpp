#include "server/api/responses_api.h"

#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace preface::server {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

// Text of a message item's content: a string, or input_text / output_text / text parts joined.
std::string item_text(const json& content, const std::string& where) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) throw ApiError(400, where + ": must be a string or an array of text parts", where);
  std::string text;
  for (size_t j = 0; j < content.size(); ++j) {
    const json& part = content[j];
    const std::string p = where + "[" + std::to_string(j) + "]";
    const std::string type = part.is_object() ? part.value("type", "") : "";
    if (type != "input_text" && type != "output_text" && type != "text") {
      throw ApiError(400, p + ": parts of type '" + type + "' are not supported (input_text, output_text)", p);
    }
    const auto t = part.find("text");
    if (t == part.end() || !t->is_string()) throw ApiError(400, p + ".text: must be a string", p + ".text");
    text += t->get<std::string>();
  }
  return text;
}

// The request's input as chat messages appended to `messages`, and as items with ids (input_items).
void read_input(const json& input, ServerContext& ctx, ordered_json& messages, json& items) {
  if (input.is_string()) {
    messages.push_back({{"role", "user"}, {"content", input.get<std::string>()}});
    items.push_back({{"id", ctx.new_id("msg_")}, {"type", "message"}, {"role", "user"},
                     {"content", {{{"type", "input_text"}, {"text", input.get<std::string>()}}}}});
    return;
  }
  if (!input.is_array()) throw ApiError(400, "input: must be a string or an array of items", "input");
  for (size_t i = 0; i < input.size(); ++i) {
    const json& it = input[i];
    const std::string where = "input[" + std::to_string(i) + "]";
    if (!it.is_object()) throw ApiError(400, where + ": must be an object", where);
    const JsonFields f(it, where + ".");
    const std::string type = f.string("type").value_or(it.contains("role") ? "message" : "");
    json item = it;
    if (!item.contains("id")) item["id"] = ctx.new_id(type == "function_call" ? "fc_" : "msg_");
    if (type == "message") {
      std::string role = f.string("role").value_or("");
      if (role != "user" && role != "system" && role != "developer" && role != "assistant") {
        f.fail("role", "must be user, system, developer or assistant, got '" + role + "'");
      }
      const auto c = it.find("content");
      if (c == it.end()) f.fail("content", "is required");
      messages.push_back({{"role", role == "developer" ? "system" : role}, {"content", item_text(*c, where + ".content")}});
    } else if (type == "function_call") {
      const auto call_id = f.string("call_id"), name = f.string("name"), args = f.string("arguments");
      if (!call_id || !name) f.fail(call_id ? "name" : "call_id", "is required");
      const ordered_json call = {{"id", *call_id}, {"type", "function"},
                                 {"function", {{"name", *name}, {"arguments", args.value_or("{}")}}}};
      // Calls in a row are one assistant turn (parallel calls).
      if (!messages.empty() && messages.back()["role"] == "assistant" && messages.back().contains("tool_calls")) {
        messages.back()["tool_calls"].push_back(call);
      } else {
        messages.push_back({{"role", "assistant"}, {"content", nullptr}, {"tool_calls", ordered_json::array({call})}});
      }
    } else if (type == "function_call_output") {
      const auto call_id = f.string("call_id");
      if (!call_id) f.fail("call_id", "is required");
      const auto out = it.find("output");
      if (out == it.end()) f.fail("output", "is required");
      messages.push_back({{"role", "tool"}, {"tool_call_id", *call_id}, {"content", item_text(*out, where + ".output")}});
    } else if (type == "reasoning") {
      // Earlier reasoning is not rendered (most templates drop it from past turns).
    } else {
      f.fail("type", "'" + type + "' is not supported (message, function_call, function_call_output, reasoning)");
    }
    items.push_back(std::move(item));
  }
}

// Responses tools -> chat tools; tool_choice likewise.
json chat_tools(const json& tools) {
  if (!tools.is_array()) throw ApiError(400, "tools: must be an array", "tools");
  json out = json::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const json& t = tools[i];
    const std::string where = "tools[" + std::to_string(i) + "]";
    if (!t.is_object() || t.value("type", "") != "function") {
      throw ApiError(400, where + ".type: only 'function' tools are supported", where + ".type");
    }
    json fn = json::object();
    for (const char* k : {"name", "description", "parameters", "strict"}) {
      if (t.contains(k)) fn[k] = t[k];
    }
    out.push_back({{"type", "function"}, {"function", fn}});
  }
  return out;
}

json chat_tool_choice(const json& choice) {
  if (choice.is_string()) return choice;
  if (choice.is_object() && choice.value("type", "") == "function") {
    return {{"type", "function"}, {"function", {{"name", choice.value("name", "")}}}};
  }
  throw ApiError(400, "tool_choice: must be 'auto', 'none', 'required' or {\"type\": \"function\", \"name\"}",
                 "tool_choice");
}

json chat_response_format(const json& text) {
  const auto fmt = text.find("format");
  if (!text.is_object() || fmt == text.end()) return nullptr;
  if (!fmt->is_object()) throw ApiError(400, "text.format: must be an object", "text.format");
  const std::string type = fmt->value("type", "");
  if (type != "json_schema") return {{"type", type}};
  json js = json::object();
  for (const char* k : {"name", "schema", "strict", "description"}) {
    if (fmt->contains(k)) js[k] = (*fmt)[k];
  }
  return {{"type", "json_schema"}, {"json_schema", js}};
}

// A chat-path error renamed to the Responses field it came from.
std::string responses_param(std::string p) {
  const std::pair<const char*, const char*> renames[] = {
      {"response_format.json_schema.", "text.format."}, {"response_format", "text.format"},
      {"max_tokens", "max_output_tokens"}, {"messages", "input"}, {"reasoning_effort", "reasoning.effort"}};
  for (const auto& [from, to] : renames) {
    if (p.rfind(from, 0) == 0) return to + p.substr(std::string_view(from).size());
  }
  if (p.rfind("tools[", 0) == 0) {  // tools[i].function.x -> tools[i].x
    const size_t at = p.find("].function.");
    if (at != std::string::npos) p.erase(at + 2, 9);
  }
  return p;
}

OpenAIRequest build_chat(const json& chat_body, ServerContext& ctx) {
  try {
    return parse_chat_request(chat_body, ctx);
  } catch (const ApiError& e) {
    if (e.param.empty()) throw;
    const std::string param = responses_param(e.param);
    std::string message = e.what();
    if (message.rfind(e.param, 0) == 0) message = param + message.substr(e.param.size());
    throw ApiError(e.status, message, param, e.code);
  }
}

bool uses_tools(const ordered_json& messages, const ordered_json& tools) {
  if (tools.is_array() && !tools.empty()) return true;
  for (const ordered_json& m : messages) {
    if (m.value("role", "") == "tool" || m.contains("tool_calls")) return true;
  }
  return false;
}

// The text a conversation renders to, by the path parse_chat_request takes for it.
std::string render_text(ServerContext& ctx, const ordered_json& messages, const ordered_json& tools, bool gen,
                        const ordered_json& kwargs) {
  if (uses_tools(messages, tools)) return ctx.render_chat_json(messages, tools, gen, kwargs).text;
  std::vector<ChatMessage> chat;
  for (const ordered_json& m : messages) {
    chat.push_back({m.value("role", ""), m["content"].is_string() ? m["content"].get<std::string>() : ""});
  }
  return ctx.render_chat(chat, gen, kwargs).text;
}

// The previous response's token ids continued by the new turns' tokens, or nullopt when the template does not
// render the earlier conversation as a prefix of the new one (see the header).
std::optional<std::vector<int32_t>> resume_tokens(ServerContext& ctx, const StoredResponse& prev,
                                                  const ordered_json& messages) {
  ordered_json through_reply = prev.prompt_messages;
  through_reply.push_back(prev.reply_message);
  const std::string p = render_text(ctx, prev.prompt_messages, prev.tools, true, prev.kwargs);
  const std::string a = render_text(ctx, through_reply, prev.tools, false, prev.kwargs);
  const std::string b = render_text(ctx, messages, prev.tools, true, prev.kwargs);
  if (a.rfind(p, 0) != 0 || b.rfind(a, 0) != 0) return std::nullopt;
  const std::string reply_part = a.substr(p.size());  // the reply as the template writes it, and what closes it
  StreamDecoder decoder(ctx.tokenizer, true);
  std::string generated;
  for (const int32_t t : prev.reply_tokens) generated += decoder.push(t);
  generated += decoder.flush();
  std::vector<int32_t> ids = prev.prompt_tokens;
  ids.insert(ids.end(), prev.reply_tokens.begin(), prev.reply_tokens.end());
  std::string tail;
  const std::string with_stop = prev.stop_token >= 0 ? generated + ctx.tokenizer.token_to_bytes(prev.stop_token) : "";
  if (prev.stop_token >= 0 && reply_part.rfind(with_stop, 0) == 0) {
    ids.push_back(prev.stop_token);
    tail = reply_part.substr(with_stop.size());
  } else if (reply_part.rfind(generated, 0) == 0) {
    tail = reply_part.substr(generated.size());  // a stop token the template does not write there is left out
  } else {
    return std::nullopt;
  }
  const std::vector<int32_t> more = ctx.tokenizer.encode(tail + b.substr(a.size()), false, true);
  ids.insert(ids.end(), more.begin(), more.end());
  return ids;
}

}  // namespace

ResponsesRequest parse_responses_request(const json& body, ServerContext& ctx, const std::string& tenant) {
  const JsonFields f(body);
  for (const char* name : {"background", "conversation", "prompt"}) {
    if (f.has(name) && !body[name].is_null() && body[name] != json(false)) {
      f.fail(name, "is not supported by this server");
    }
  }
  if (const auto t = f.string("truncation"); t && *t != "disabled") {
    f.fail("truncation", "only 'disabled' is supported (a prompt beyond the context is a 400)");
  }
  ResponsesRequest r;
  r.stream = f.boolean("stream").value_or(false);
  r.store = f.boolean("store").value_or(true);
  const std::string instructions = f.string("instructions").value_or("");
  ordered_json messages = ordered_json::array();
  std::shared_ptr<const StoredResponse> prev;
  const std::string prev_id = f.string("previous_response_id").value_or("");
  if (!prev_id.empty()) {
    prev = ctx.responses.get(tenant, prev_id);
    if (!prev) {
      throw ApiError(404, "previous_response_id: no stored response '" + prev_id + "' (unknown, expired or deleted)",
                     "previous_response_id", "previous_response_not_found");
    }
    // The previous instructions are not carried over: its conversation without them, then these.
    ordered_json earlier = prev->prompt_messages;
    if (!prev->instructions.empty() && !earlier.empty()) earlier.erase(earlier.begin());
    earlier.push_back(prev->reply_message);
    if (!instructions.empty()) messages.push_back({{"role", "system"}, {"content", instructions}});
    for (ordered_json& m : earlier) messages.push_back(std::move(m));
  } else if (!instructions.empty()) {
    messages.push_back({{"role", "system"}, {"content", instructions}});
  }
  const auto input = body.find("input");
  if (input == body.end() || input->is_null()) f.fail("input", "is required");
  r.input_items = json::array();
  read_input(*input, ctx, messages, r.input_items);

  json chat = {{"messages", messages}};
  if (const auto v = f.integer("max_output_tokens", 1, ctx.limits.max_output_tokens)) chat["max_tokens"] = *v;
  // OpenAI's fields and the chat path's extensions (llama.cpp's and vLLM's sampling and grammar fields).
  for (const char* k : {"temperature", "top_p", "top_k", "min_p", "seed", "presence_penalty", "frequency_penalty",
                        "repetition_penalty", "stop", "ignore_eos", "parallel_tool_calls", "user", "cache_salt",
                        "cache_explain", "prompt_cache_key", "chat_template_kwargs", "grammar", "json_schema",
                        "guided_json", "guided_grammar", "guided_choice", "structured_outputs"}) {
    if (body.contains(k)) chat[k] = body[k];
  }
  if (const json* tools = f.array("tools")) chat["tools"] = chat_tools(*tools);
  if (body.contains("tool_choice") && !body["tool_choice"].is_null()) {
    chat["tool_choice"] = chat_tool_choice(body["tool_choice"]);
  }
  if (const json* text = f.object("text")) {
    if (json rf = chat_response_format(*text); !rf.is_null()) chat["response_format"] = std::move(rf);
  }
  if (const json* reasoning = f.object("reasoning")) {
    if (const auto effort = JsonFields(*reasoning, "reasoning.").string("effort")) chat["reasoning_effort"] = *effort;
  }
  r.chat = build_chat(chat, ctx);

  auto pending = std::make_shared<StoredResponse>();
  pending->prompt_messages = messages;
  {  // what the chat path rendered: its tools (canonical schemas) and template arguments
    const JsonFields cf(chat);
    pending->tools = parse_openai_tools(cf, chat).tools;
    const json* kwargs = cf.object("chat_template_kwargs");
    pending->kwargs = kwargs != nullptr ? ordered_json::parse(kwargs->dump()) : ordered_json();
    add_reasoning_effort(cf, pending->kwargs);
  }
  pending->instructions = instructions;
  pending->cache_salt = f.string("cache_salt").value_or("");
  if (prev && prev->instructions == instructions && prev->tools == pending->tools && prev->kwargs == pending->kwargs) {
    if (auto ids = resume_tokens(ctx, *prev, messages)) {
      r.chat.generation.params.prompt = std::move(*ids);
      r.chat.generation.params.cache_pins.clear();  // computed over the rendered prompt
      r.resumed = true;
    }
  }
  pending->prompt_tokens = r.chat.generation.params.prompt;
  r.pending = std::move(pending);

  r.echo = {{"instructions", instructions.empty() ? json(nullptr) : json(instructions)},
            {"previous_response_id", prev_id.empty() ? json(nullptr) : json(prev_id)},
            {"store", r.store},
            {"metadata", body.value("metadata", json::object())},
            {"tools", body.value("tools", json::array())},
            {"tool_choice", body.value("tool_choice", json("auto"))},
            {"text", body.value("text", json{{"format", {{"type", "text"}}}})},
            {"reasoning", body.value("reasoning", json{{"effort", nullptr}, {"summary", nullptr}})},
            {"max_output_tokens", body.value("max_output_tokens", json(nullptr))},
            {"temperature", body.value("temperature", json(1.0))},
            {"top_p", body.value("top_p", json(1.0))},
            {"parallel_tool_calls", body.value("parallel_tool_calls", json(true))},
            {"truncation", "disabled"},
            {"user", body.value("user", json(nullptr))}};
  return r;
}

json input_items_list(const StoredResponse& r, const std::string& order, int64_t limit, const std::string& after) {
  std::vector<json> items(r.input_items.begin(), r.input_items.end());
  if (order != "asc") std::reverse(items.begin(), items.end());
  size_t start = 0;
  if (!after.empty()) {
    while (start < items.size() && items[start].value("id", "") != after) ++start;
    start = start < items.size() ? start + 1 : items.size();
  }
  json data = json::array();
  for (size_t i = start; i < items.size() && static_cast<int64_t>(data.size()) < limit; ++i) data.push_back(items[i]);
  const bool more = start + data.size() < items.size();
  return {{"object", "list"},
          {"data", data},
          {"first_id", data.empty() ? json(nullptr) : data.front()["id"]},
          {"last_id", data.empty() ? json(nullptr) : data.back()["id"]},
          {"has_more", more}};
}

}  // namespace preface::server
