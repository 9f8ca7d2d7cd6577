#include "server/api/ollama_api.h"

#include "util/utc_time.h"

#include <chrono>
#include <deque>
#include <set>

namespace preface::server {
namespace {

using nlohmann::json;

// Options that size or place the model: fixed by the server's command line, accepted without effect.
const std::set<std::string>& load_options() {
  static const std::set<std::string> k{"num_ctx",   "num_batch", "num_gpu",  "num_thread", "main_gpu",
                                       "use_mmap",  "use_mlock", "numa",     "low_vram",   "num_keep",
                                       "vocab_only", "f16_kv",   "logits_all"};
  return k;
}

// Ollama's options -> the OpenAI body's fields.
void apply_options(const json& body, json& out) {
  const auto it = body.find("options");
  if (it == body.end() || it->is_null()) return;
  if (!it->is_object()) throw ApiError(400, "must be an object", "options");
  static const std::pair<const char*, const char*> kMap[] = {
      {"temperature", "temperature"},         {"top_p", "top_p"},       {"top_k", "top_k"},
      {"min_p", "min_p"},                     {"seed", "seed"},         {"stop", "stop"},
      {"repeat_penalty", "repetition_penalty"}, {"presence_penalty", "presence_penalty"},
      {"frequency_penalty", "frequency_penalty"}};
  for (const auto& [key, v] : it->items()) {
    if (key == "num_predict") {
      if (!v.is_number_integer()) throw ApiError(400, "must be an integer", "options.num_predict");
      if (v.get<int64_t>() >= 0) out["max_tokens"] = v;  // -1 and -2: up to the context (the default)
      continue;
    }
    bool mapped = false;
    for (const auto& [from, to] : kMap) {
      if (key == from) {
        out[to] = v;
        mapped = true;
      }
    }
    if (!mapped && !load_options().count(key)) {
      throw ApiError(400, "is not supported by this server", "options." + key);
    }
  }
}

void apply_common(const JsonFields& f, const json& body, json& out) {
  if (const auto model = f.string("model")) out["model"] = *model;
  apply_options(body, out);
  if (const auto fmt = body.find("format"); fmt != body.end() && !fmt->is_null() && *fmt != "") {
    if (*fmt == "json") {
      out["response_format"] = {{"type", "json_object"}};
    } else if (fmt->is_object()) {
      out["response_format"] = {{"type", "json_schema"}, {"json_schema", {{"name", "format"}, {"schema", *fmt}}}};
    } else {
      f.fail("format", "must be \"json\" or a JSON Schema object");
    }
  }
  if (const auto think = body.find("think"); think != body.end() && !think->is_null()) {
    if (think->is_boolean()) {
      out["chat_template_kwargs"] = {{"enable_thinking", think->get<bool>()}};
    } else if (think->is_string()) {
      out["reasoning_effort"] = *think;  // gpt-oss: "low" | "medium" | "high"
    } else {
      f.fail("think", "must be a boolean or low, medium, high");
    }
  }
  (void)body.find("keep_alive");  // the model stays loaded for the server's life
  for (const char* name : {"images", "suffix", "template"}) {
    const auto it = body.find(name);
    if (it != body.end() && !it->is_null() && !it->empty() && *it != "") f.fail(name, "is not supported");
  }
  if (const auto c = body.find("context"); c != body.end() && c->is_array() && !c->empty()) {
    f.fail("context", "is not supported (send the conversation to /api/chat)");
  }
}

// An error of the OpenAI path renamed to the Ollama field it came from.
OpenAIRequest build(const json& openai, ServerContext& ctx, bool chat) {
  try {
    return chat ? parse_chat_request(openai, ctx) : parse_completion_request(openai, ctx);
  } catch (const ApiError& e) {
    static const std::pair<const char*, const char*> kRenames[] = {
        {"max_tokens", "options.num_predict"}, {"repetition_penalty", "options.repeat_penalty"},
        {"response_format", "format"}, {"chat_template_kwargs", "think"}, {"reasoning_effort", "think"},
        {"temperature", "options.temperature"}, {"top_p", "options.top_p"}, {"top_k", "options.top_k"},
        {"min_p", "options.min_p"}, {"seed", "options.seed"}, {"stop", "options.stop"}};
    for (const auto& [from, to] : kRenames) {
      if (e.param.rfind(from, 0) == 0) {
        throw ApiError(e.status, e.what(), to + e.param.substr(std::string_view(from).size()), e.code);
      }
    }
    throw;
  }
}

// Ollama messages -> OpenAI messages: tool calls get ids ("call_<message>_<k>"), and each tool message answers
// the oldest call not answered yet.
json chat_messages(const JsonFields& f) {
  const json* arr = f.array("messages");
  if (arr == nullptr) f.fail("messages", "is required");
  json out = json::array();
  std::deque<std::string> open_calls;
  for (size_t i = 0; i < arr->size(); ++i) {
    const json& m = (*arr)[i];
    if (!m.is_object()) f.fail("messages", "entries must be objects");
    const JsonFields mf(m, "messages[" + std::to_string(i) + "].");
    const std::string role = mf.string("role").value_or("");
    json msg = {{"role", role}, {"content", mf.string("content").value_or("")}};
    if (const json* images = mf.array("images"); images != nullptr && !images->empty()) {
      mf.fail("images", "are not supported");
    }
    if (const json* calls = mf.array("tool_calls"); calls != nullptr && !calls->empty()) {
      json list = json::array();
      for (size_t k = 0; k < calls->size(); ++k) {
        const JsonFields cf((*calls)[k], mf.path("tool_calls[" + std::to_string(k) + "]."));
        const json* fn = cf.object("function");
        if (fn == nullptr) cf.fail("function", "is required");
        const JsonFields ff(*fn, cf.path("function."));
        const auto name = ff.string("name");
        if (!name) ff.fail("name", "is required");
        const auto args = fn->find("arguments");
        const std::string text = args == fn->end() || args->is_null() ? "{}"
                                 : args->is_string()                  ? args->get<std::string>()
                                                                      : args->dump();
        const std::string id = "call_" + std::to_string(i) + "_" + std::to_string(k);
        open_calls.push_back(id);
        list.push_back({{"id", id}, {"type", "function"}, {"function", {{"name", *name}, {"arguments", text}}}});
      }
      msg["tool_calls"] = std::move(list);
    }
    if (role == "tool") {
      if (open_calls.empty()) mf.fail("role", "a tool message must follow an assistant message with tool_calls");
      msg["tool_call_id"] = open_calls.front();
      open_calls.pop_front();
    }
    out.push_back(std::move(msg));
  }
  return out;
}

}  // namespace

OllamaRequest parse_ollama_chat(const json& body, ServerContext& ctx) {
  const JsonFields f(body);
  OllamaRequest r;
  r.model = f.string("model").value_or(ctx.model_id);
  r.stream = f.boolean("stream").value_or(true);
  json openai = {{"messages", chat_messages(f)}};
  apply_common(f, body, openai);
  if (const json* tools = f.array("tools"); tools != nullptr && !tools->empty()) openai["tools"] = *tools;
  r.openai = build(openai, ctx, true);
  return r;
}

OllamaRequest parse_ollama_generate(const json& body, ServerContext& ctx) {
  const JsonFields f(body);
  OllamaRequest r;
  r.chat = false;
  r.model = f.string("model").value_or(ctx.model_id);
  r.stream = f.boolean("stream").value_or(true);
  const std::string prompt = f.string("prompt").value_or("");
  if (prompt.empty()) f.fail("prompt", "is required (this server keeps its one model loaded)");
  json openai = json::object();
  const bool raw = f.boolean("raw").value_or(false);
  if (raw) {
    openai["prompt"] = prompt;
  } else {
    openai["messages"] = json::array();
    if (const auto system = f.string("system"); system && !system->empty()) {
      openai["messages"].push_back({{"role", "system"}, {"content", *system}});
    }
    openai["messages"].push_back({{"role", "user"}, {"content", prompt}});
  }
  apply_common(f, body, openai);
  r.openai = build(openai, ctx, !raw);
  return r;
}

namespace {

json details() {
  return {{"parent_model", ""}, {"format", "gguf"}, {"family", ""}, {"families", nullptr},
          {"parameter_size", ""}, {"quantization_level", ""}};
}

}  // namespace

std::string ollama_time_now() { return utc_time(std::chrono::system_clock::now(), 9); }

json ollama_tags(const ServerContext& ctx) {
  const std::string created = utc_time(std::chrono::system_clock::from_time_t(ctx.created_unix), 9);
  return {{"models", json::array({{{"name", ctx.model_id}, {"model", ctx.model_id}, {"modified_at", created},
                                   {"size", 0}, {"digest", ""}, {"details", details()}}})}};
}

json ollama_ps(const ServerContext& ctx) {
  return {{"models", json::array({{{"name", ctx.model_id}, {"model", ctx.model_id}, {"size", 0}, {"digest", ""},
                                   {"details", details()}, {"expires_at", "9999-12-31T23:59:59Z"},
                                   {"size_vram", 0}, {"context_length", ctx.model.ctx_len}}})}};
}

json ollama_show(const ServerContext& ctx) {
  json capabilities = json::array({"completion"});
  const std::string& source = ctx.chat_renderer->source();
  if (ctx.chat_renderer->is_jinja() && source.find("tools") != std::string::npos) capabilities.push_back("tools");
  return {{"license", ""},
          {"modelfile", ""},
          {"parameters", ""},
          {"template", source},
          {"details", details()},
          {"model_info", {{"general.context_length", ctx.model.ctx_len}}},
          {"capabilities", capabilities},
          {"modified_at", utc_time(std::chrono::system_clock::from_time_t(ctx.created_unix), 9)}};
}

}  // namespace preface::server
