#include "server/api/structured_output.h"

#include <string>
#include <vector>

#include "grammar/schema_regex.h"

namespace preface::server {
namespace {

using nlohmann::json;

// A compile error as a 400 whose param is the field, extended by the schema path inside it.
[[noreturn]] void rethrow(const grammar::GrammarError& e, const std::string& param) {
  const bool schema_path = !e.where.empty() && e.where.rfind("rule '", 0) != 0 && e.where.rfind("offset ", 0) != 0;
  const std::string where = schema_path ? param + "." + e.where : param;
  throw ApiError(400, where + ": " + (schema_path ? e.detail : std::string(e.what())), where);
}

using Warnings = std::vector<std::string>;

std::shared_ptr<grammar::Constraint> schema_constraint(ServerContext& ctx, const json& schema, const std::string& param,
                                                       Warnings& warnings) {
  if (!schema.is_object() && !schema.is_boolean()) throw ApiError(400, param + ": must be a JSON Schema object", param);
  std::vector<grammar::Loosened> loosened;
  try {
    std::shared_ptr<grammar::Constraint> c = ctx.grammars().json_schema(schema, &loosened);
    for (const grammar::Loosened& l : loosened) warnings.push_back(l.text(param));
    return c;
  } catch (const grammar::GrammarError& e) {
    rethrow(e, param);
  }
}

// A schema given as an object or as JSON text (vLLM's guided_json accepts both).
std::shared_ptr<grammar::Constraint> schema_or_text(ServerContext& ctx, const json& v, const std::string& param,
                                                    Warnings& warnings) {
  if (!v.is_string()) return schema_constraint(ctx, v, param, warnings);
  json parsed;
  try {
    parsed = parse_json_object(v.get<std::string>());
  } catch (const ApiError& e) {
    throw ApiError(400, param + ": not a JSON Schema object (" + e.what() + ")", param);
  }
  return schema_constraint(ctx, parsed, param, warnings);
}

std::shared_ptr<grammar::Constraint> gbnf_constraint(ServerContext& ctx, const json& v, const std::string& param) {
  if (!v.is_string()) throw ApiError(400, "'" + param + "' must be a string of GBNF grammar text", param);
  try {
    return ctx.grammars().gbnf(v.get<std::string>());
  } catch (const grammar::GrammarError& e) {
    rethrow(e, param);
  }
}

std::shared_ptr<grammar::Constraint> choice_constraint(ServerContext& ctx, const json& v, const std::string& param) {
  if (!v.is_array() || v.empty()) throw ApiError(400, "'" + param + "' must be a non-empty array of strings", param);
  std::string text = "root ::= ";
  for (size_t i = 0; i < v.size(); ++i) {
    if (!v[i].is_string()) throw ApiError(400, "'" + param + "' must be a non-empty array of strings", param);
    text += (i ? " | " : "") + grammar::gbnf_literal(v[i].get<std::string>());
  }
  try {
    return ctx.grammars().gbnf(text + "\n");
  } catch (const grammar::GrammarError& e) {
    rethrow(e, param);
  }
}

std::shared_ptr<grammar::Constraint> json_object_constraint(ServerContext& ctx) { return ctx.grammars().json_object(); }

std::shared_ptr<grammar::Constraint> response_format(ServerContext& ctx, const json& rf, Warnings& warnings) {
  const JsonFields r(rf, "response_format.");
  const std::string type = r.string("type").value_or("");
  if (type == "text") return nullptr;
  if (type == "json_object") {
    const auto it = rf.find("schema");  // llama.cpp's extension
    if (it != rf.end() && !it->is_null()) return schema_constraint(ctx, *it, "response_format.schema", warnings);
    return json_object_constraint(ctx);
  }
  if (type == "json_schema") {
    const json* js = r.object("json_schema");
    if (js == nullptr) r.fail("json_schema", "is required when type is 'json_schema'");
    const JsonFields j(*js, "response_format.json_schema.");
    (void)j.string("name");
    (void)j.string("description");
    (void)j.boolean("strict");  // every schema is enforced exactly; strict changes nothing
    const auto it = js->find("schema");
    if (it == js->end() || it->is_null()) {
      return schema_constraint(ctx, json::object(), "response_format.json_schema.schema", warnings);
    }
    return schema_constraint(ctx, *it, "response_format.json_schema.schema", warnings);
  }
  r.fail("type", "must be 'text', 'json_object' or 'json_schema', got '" + type + "'");
}

std::shared_ptr<grammar::Constraint> structured_outputs(ServerContext& ctx, const json& so, Warnings& warnings) {
  if (!so.is_object()) throw ApiError(400, "'structured_outputs' must be an object", "structured_outputs");
  std::shared_ptr<grammar::Constraint> out;
  int n = 0;
  for (const auto& [key, v] : so.items()) {
    if (v.is_null() || key == "disable_fallback" || key == "disable_any_whitespace" || key == "backend") continue;
    const std::string param = "structured_outputs." + key;
    if (key == "json") {
      out = schema_or_text(ctx, v, param, warnings);
    } else if (key == "grammar") {
      out = gbnf_constraint(ctx, v, param);
    } else if (key == "choice") {
      out = choice_constraint(ctx, v, param);
    } else if (key == "json_object") {
      if (!v.is_boolean()) throw ApiError(400, "'" + param + "' must be a boolean", param);
      if (!v.get<bool>()) continue;
      out = json_object_constraint(ctx);
    } else {
      throw ApiError(400, "'" + param + "' is not supported (supported: json, grammar, choice, json_object)", param);
    }
    ++n;
  }
  if (n > 1) throw ApiError(400, "'structured_outputs' must set one of json, grammar, choice, json_object", "structured_outputs");
  return out;
}

}  // namespace

void apply_openai_structured_output(const JsonFields& f, const json& body, ServerContext& ctx,
                                    GenerationRequest& request) {
  std::shared_ptr<grammar::Constraint> c;
  std::vector<std::string> given;
  auto take = [&](const char* name, std::shared_ptr<grammar::Constraint> one) {
    if (!one) return;
    given.emplace_back(name);
    if (given.size() > 1) {
      throw ApiError(400, "'" + given[0] + "' and '" + given[1] + "' cannot be combined: one constraint per request",
                     given[1]);
    }
    c = std::move(one);
  };
  auto field = [&](const char* name) -> const json* {
    const auto it = body.find(name);
    return it == body.end() || it->is_null() ? nullptr : &*it;
  };
  Warnings& w = request.warnings;
  if (const json* rf = f.object("response_format")) take("response_format", response_format(ctx, *rf, w));
  if (const json* g = field("grammar")) take("grammar", gbnf_constraint(ctx, *g, "grammar"));
  if (const json* s = field("json_schema")) take("json_schema", schema_constraint(ctx, *s, "json_schema", w));
  if (const json* s = field("guided_json")) take("guided_json", schema_or_text(ctx, *s, "guided_json", w));
  if (const json* g = field("guided_grammar")) take("guided_grammar", gbnf_constraint(ctx, *g, "guided_grammar"));
  if (const json* ch = field("guided_choice")) take("guided_choice", choice_constraint(ctx, *ch, "guided_choice"));
  if (const json* so = field("structured_outputs")) take("structured_outputs", structured_outputs(ctx, *so, w));
  if (field("guided_regex") != nullptr) {
    f.fail("guided_regex", "is not supported (use guided_json with a string 'pattern', or guided_grammar)");
  }
  (void)f.string("guided_decoding_backend");  // one matcher serves every request; the choice changes nothing
  request.params.constraint = std::move(c);
  request.params.constraint_strip_space = request.text_start;
}

void apply_anthropic_structured_output(const JsonFields& f, ServerContext& ctx, GenerationRequest& request) {
  std::shared_ptr<grammar::Constraint> c;
  auto format = [&](const json& fmt, const std::string& param) {
    const JsonFields ff(fmt, param + ".");
    const std::string type = ff.string("type").value_or("");
    if (type != "json_schema") ff.fail("type", "must be 'json_schema', got '" + type + "'");
    const json* schema = ff.object("schema");
    if (schema == nullptr) ff.fail("schema", "is required");
    if (c) throw ApiError(400, "'output_config.format' and 'output_format' cannot be combined", param);
    c = schema_constraint(ctx, *schema, param + ".schema", request.warnings);
  };
  if (const json* oc = f.object("output_config")) {
    if (const json* fmt = JsonFields(*oc, "output_config.").object("format")) format(*fmt, "output_config.format");
  }
  if (const json* of = f.object("output_format")) format(*of, "output_format");
  request.params.constraint = std::move(c);
  request.params.constraint_strip_space = request.text_start;
}

}  // namespace preface::server
