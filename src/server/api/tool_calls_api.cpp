#include "server/api/tool_calls_api.h"

#include <algorithm>
#include <cctype>
#include <set>

#include "grammar/grammar.h"
#include "server/api/think_split.h"
#include "util/json_depth.h"

namespace preface::server {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

bool valid_tool_name(const std::string& name) {
  if (name.empty() || name.size() > 128) return false;
  for (const char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' && c != '.') return false;
  }
  return true;
}

void add_tool(ToolsRequest& r, const JsonFields& tf, const std::string& name, const json* description,
              const json* schema) {
  if (!valid_tool_name(name)) tf.fail("name", "must be 1-128 characters of letters, digits, '_', '-' or '.'");
  for (const grammar::ToolSpec& s : r.specs) {
    if (s.name == name) tf.fail("name", "'" + name + "' names two tools");
  }
  ordered_json function = {{"name", name}};
  if (description != nullptr && description->is_string()) function["description"] = *description;
  const json parameters = schema != nullptr ? *schema : json{{"type", "object"}, {"properties", json::object()}};
  function["parameters"] = canonical_json(parameters);
  if (r.tools.is_null()) r.tools = ordered_json::array();
  r.tools.push_back({{"type", "function"}, {"function", std::move(function)}});
  r.specs.push_back({name, parameters});
}

// Text of a message's content: a string, null, or text parts joined.
std::string text_of(const json& content, const JsonFields& mf) {
  if (content.is_null()) return {};
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) mf.fail("content", "must be a string or an array of content parts");
  std::string text;
  for (const json& part : content) {
    const JsonFields pf(part, mf.path("content[]."));
    if (!part.is_object() || pf.string("type").value_or("") != "text") {
      mf.fail("content", "parts must be text parts ({\"type\": \"text\", \"text\": ...})");
    }
    text += pf.string("text").value_or("");
  }
  return text;
}

}  // namespace

ordered_json canonical_json(const json& v) {
  // nlohmann::json keeps object keys sorted; ordered_json then preserves that order.
  return ordered_json::parse(json(v).dump());
}

std::optional<ordered_json> arguments_object(const json& v) {
  if (v.is_object()) return canonical_json(v);
  if (!v.is_string()) return std::nullopt;
  // The string's own nesting counts against the body's limit: it is copied and rendered like any other value.
  const std::string& text = v.get_ref<const std::string&>();
  if (!json_depth_within(text, kMaxJsonDepth)) {
    throw ApiError(400, "tool call arguments nest JSON deeper than " + std::to_string(kMaxJsonDepth) + " levels");
  }
  ordered_json parsed = ordered_json::parse(text, nullptr, false);
  if (!parsed.is_object()) return std::nullopt;
  return parsed;
}

ToolsRequest parse_openai_tools(const JsonFields& f, const json& body) {
  ToolsRequest r;
  if (const json* tools = f.array("tools")) {
    for (size_t i = 0; i < tools->size(); ++i) {
      const std::string p = "tools[" + std::to_string(i) + "].";
      const json& t = (*tools)[i];
      if (!t.is_object()) throw ApiError(400, "'tools[" + std::to_string(i) + "]' must be an object", p + "type");
      const JsonFields tf(t, p);
      if (tf.string("type").value_or("function") != "function") tf.fail("type", "must be 'function'");
      const json* fn = tf.object("function");
      if (fn == nullptr) tf.fail("function", "is required");
      const JsonFields ff(*fn, p + "function.");
      const auto name = ff.string("name");
      if (!name) ff.fail("name", "is required");
      (void)ff.boolean("strict");  // every schema is enforced exactly when a call is forced
      const json* params = ff.object("parameters");
      const auto d = fn->find("description");
      add_tool(r, ff, *name, d == fn->end() ? nullptr : &*d, params);
    }
  }
  r.parallel = f.boolean("parallel_tool_calls").value_or(true);
  const auto it = body.find("tool_choice");
  if (it == body.end() || it->is_null()) return r;
  if (it->is_string()) {
    const std::string c = it->get<std::string>();
    if (c == "auto") return r;
    if (c == "none") {
      r.choice = ToolChoice::None;
      return r;
    }
    if (c != "required") f.fail("tool_choice", "must be 'auto', 'none', 'required' or a named function, got '" + c + "'");
    r.choice = ToolChoice::Required;
  } else {
    if (!it->is_object()) f.fail("tool_choice", "must be a string or an object");
    const JsonFields cf(*it, "tool_choice.");
    if (cf.string("type").value_or("function") != "function") cf.fail("type", "must be 'function'");
    const json* fn = cf.object("function");
    const auto name = fn != nullptr ? JsonFields(*fn, "tool_choice.function.").string("name") : std::nullopt;
    if (!name) cf.fail("function", "must name the function to call ({\"name\": ...})");
    r.choice = ToolChoice::Required;
    r.named = *name;
  }
  if (r.specs.empty()) f.fail("tool_choice", "requires tools");
  if (r.named && std::none_of(r.specs.begin(), r.specs.end(), [&](const auto& s) { return s.name == *r.named; })) {
    f.fail("tool_choice", "names the function '" + *r.named + "', which is not in tools");
  }
  return r;
}

ToolsRequest parse_anthropic_tools(const JsonFields& f) {
  ToolsRequest r;
  if (const json* tools = f.array("tools")) {
    for (size_t i = 0; i < tools->size(); ++i) {
      const std::string p = "tools[" + std::to_string(i) + "].";
      const json& t = (*tools)[i];
      if (!t.is_object()) throw ApiError(400, "'tools[" + std::to_string(i) + "]' must be an object", p + "name");
      const JsonFields tf(t, p);
      if (const auto type = tf.string("type"); type && *type != "custom") {
        tf.fail("type", "'" + *type + "' is not supported (only client tools with an input_schema)");
      }
      const auto name = tf.string("name");
      if (!name) tf.fail("name", "is required");
      const json* schema = tf.object("input_schema");
      if (schema == nullptr) tf.fail("input_schema", "is required");
      (void)tf.object("cache_control");  // every prefix is cached; the tools come first in the prompt
      const auto d = t.find("description");
      add_tool(r, tf, *name, d == t.end() ? nullptr : &*d, schema);
    }
  }
  const json* choice = f.object("tool_choice");
  if (choice == nullptr) return r;
  const JsonFields cf(*choice, "tool_choice.");
  r.parallel = !cf.boolean("disable_parallel_tool_use").value_or(false);
  const std::string type = cf.string("type").value_or("");
  if (type == "auto") return r;
  if (type == "none") {
    r.choice = ToolChoice::None;
    return r;
  }
  if (type != "any" && type != "tool") cf.fail("type", "must be 'auto', 'any', 'tool' or 'none', got '" + type + "'");
  r.choice = ToolChoice::Required;
  if (type == "tool") {
    const auto name = cf.string("name");
    if (!name) cf.fail("name", "is required when type is 'tool'");
    r.named = *name;
  }
  if (r.specs.empty()) f.fail("tool_choice", "requires tools");
  if (r.named && std::none_of(r.specs.begin(), r.specs.end(), [&](const auto& s) { return s.name == *r.named; })) {
    cf.fail("name", "names the tool '" + *r.named + "', which is not in tools");
  }
  return r;
}

std::optional<ToolOutput> apply_tools(const ToolsRequest& tools, ServerContext& ctx, GenerationRequest& request,
                                      const std::string& schema_field) {
  if (tools.specs.empty()) return std::nullopt;
  const ToolCallSetup& setup = ctx.tool_calls();
  const grammar::ToolFormat* format = setup.format;
  // A schema is only rendered into the prompt unless a call is forced: then the allowed tools' schemas are
  // compiled, a malformed one is a 400 naming it, and what the grammar cannot enforce is a warning.
  if (tools.choice == ToolChoice::None) return std::nullopt;
  if (tools.choice == ToolChoice::Auto) {
    if (format == nullptr) return std::nullopt;
    request.shown_tokens = setup.marker_tokens;
    return ToolOutput{format, false, tools.specs};
  }
  if (format == nullptr) {
    throw ApiError(400, "tool_choice: the chat template's tool-call format is not one of the known families "
                        "(docs/tool-calls.md), so a call cannot be forced",
                   "tool_choice");
  }
  if (request.params.constraint) {
    throw ApiError(400, "tool_choice: a forced tool call cannot be combined with a structured-output format",
                   "tool_choice");
  }
  std::vector<grammar::ToolSpec> allowed;
  std::vector<size_t> index;  // allowed[k] is tools.specs[index[k]]
  for (size_t i = 0; i < tools.specs.size(); ++i) {
    if (tools.named && tools.specs[i].name != *tools.named) continue;
    allowed.push_back(tools.specs[i]);
    index.push_back(i);
  }
  // A schema path "[k].<path>" of the call grammar as the request's field "tools[i].<schema_field>.<path>".
  const auto field = [&](const std::string& path) {
    const size_t close = path.find(']');
    const size_t k = std::stoul(path.substr(1, close - 1));
    return "tools[" + std::to_string(index.at(k)) + "]." + schema_field + path.substr(close + 1);
  };
  std::vector<grammar::Loosened> loosened;
  std::string gbnf;
  try {
    // A prompt that leaves a reasoning block open (enable_thinking): the call follows an empty one.
    const bool close_think = request.think_tags && prompt_opens_think(ctx.tokenizer, request.params.prompt);
    gbnf = grammar::tool_call_gbnf(*format, allowed, tools.parallel, &loosened, close_think ? "</think>\n\n" : "");
  } catch (const grammar::GrammarError& e) {
    if (e.where.rfind("[", 0) != 0) throw ApiError(400, std::string("tools: ") + e.what(), "tools");
    const std::string where = field(e.where);
    throw ApiError(400, where + ": " + e.detail, where);
  }
  for (const grammar::Loosened& l : loosened) request.warnings.push_back(field(l.path) + ": " + l.what);
  try {
    request.params.constraint = ctx.grammars().gbnf(gbnf);
  } catch (const grammar::GrammarError& e) {
    throw ApiError(400, std::string("tools: ") + e.what(), "tools");
  }
  request.params.constraint_strip_space = request.text_start;
  request.shown_tokens = setup.marker_tokens;
  return ToolOutput{format, true, tools.specs};
}

bool openai_uses_tools(const json& body) {
  if (const auto t = body.find("tools"); t != body.end() && t->is_array() && !t->empty()) return true;
  const auto m = body.find("messages");
  if (m == body.end() || !m->is_array()) return false;
  for (const json& msg : *m) {
    if (!msg.is_object()) continue;
    if (msg.value("role", json()) == "tool") return true;
    if (const auto c = msg.find("tool_calls"); c != msg.end() && !c->is_null()) return true;
  }
  return false;
}

ordered_json openai_template_messages(const JsonFields& f, int32_t max_messages) {
  const json* arr = f.array("messages");
  if (arr == nullptr || arr->empty()) f.fail("messages", "must be a non-empty array");
  if (arr->size() > static_cast<size_t>(max_messages)) {
    f.fail("messages", "holds " + std::to_string(arr->size()) + " messages; at most " +
                           std::to_string(max_messages) + " are accepted");
  }
  ordered_json out = ordered_json::array();
  std::set<std::string> call_ids;
  for (size_t i = 0; i < arr->size(); ++i) {
    const json& m = (*arr)[i];
    if (!m.is_object()) f.fail("messages", "entries must be objects");
    const JsonFields mf(m, "messages[" + std::to_string(i) + "].");
    std::string role = mf.string("role").value_or("");
    if (role == "developer") role = "system";
    if (role != "system" && role != "user" && role != "assistant" && role != "tool") {
      mf.fail("role", "must be system, developer, user, assistant or tool, got '" + role + "'");
    }
    static const json kNull;
    const auto c = m.find("content");
    ordered_json msg = {{"role", role}, {"content", text_of(c == m.end() ? kNull : *c, mf)}};
    if (role == "tool") {
      const auto id = mf.string("tool_call_id");
      if (!id) mf.fail("tool_call_id", "is required in a message with role 'tool'");
      if (!call_ids.count(*id)) mf.fail("tool_call_id", "'" + *id + "' matches no tool call of an earlier message");
      msg["tool_call_id"] = *id;
    }
    if (const auto name = mf.string("name")) msg["name"] = *name;
    if (const json* calls = mf.array("tool_calls"); calls != nullptr && role == "assistant" && !calls->empty()) {
      ordered_json list = ordered_json::array();
      for (size_t k = 0; k < calls->size(); ++k) {
        const JsonFields cf((*calls)[k], mf.path("tool_calls[" + std::to_string(k) + "]."));
        if (!(*calls)[k].is_object()) mf.fail("tool_calls", "entries must be objects");
        const auto id = cf.string("id");
        if (!id || id->empty()) cf.fail("id", "is required");
        const json* fn = cf.object("function");
        if (fn == nullptr) cf.fail("function", "is required");
        const JsonFields ff(*fn, cf.path("function."));
        const auto name = ff.string("name");
        if (!name) ff.fail("name", "is required");
        const auto a = fn->find("arguments");
        std::optional<ordered_json> args =
            a == fn->end() || a->is_null() ? std::optional(ordered_json::object()) : arguments_object(*a);
        if (!args) ff.fail("arguments", "must be a JSON object or the text of one");
        call_ids.insert(*id);
        list.push_back({{"id", *id}, {"type", "function"}, {"function", {{"name", *name}, {"arguments", *args}}}});
      }
      msg["tool_calls"] = std::move(list);
    }
    out.push_back(std::move(msg));
  }
  return out;
}

}  // namespace preface::server
