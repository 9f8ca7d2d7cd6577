// JSON Schema -> GBNF (see json_schema.h for the subset). Written here: Debian packages no JSON-Schema-to-
// grammar compiler. The shape of the generated grammar follows llama.cpp's json-schema-to-grammar (read, not
// copied): one rule per subschema that needs one, primitives shared.
#include "grammar/json_schema.h"

#include <map>
#include <set>
#include <vector>

#include "grammar/schema_regex.h"

namespace preface::grammar {
namespace {

using nlohmann::json;

// Shared primitive rules. Whitespace is bounded so a sampler cannot spend the token budget on it.
constexpr const char* kPrimitives = R"(ws ::= ( " " | "\n" [ \t]{0,8} )?
char ::= [^"\\\x7F\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} )
string ::= "\"" char* "\""
integer ::= "-"? ( [0-9] | [1-9] [0-9]{1,15} )
number ::= integer ( "." [0-9]{1,16} )? ( [eE] [-+]? [0-9]{1,2} )?
boolean ::= "true" | "false"
null ::= "null"
value ::= object | array | string | number | boolean | null
object ::= "{" ws ( member ( "," ws member )* )? "}"
member ::= string ws ":" ws value ws
array ::= "[" ws ( value ws ( "," ws value ws )* )? "]"
)";

const std::set<std::string>& annotations() {
  static const std::set<std::string> k{"title",    "description", "default",  "examples",  "$schema", "$id",
                                       "$comment", "deprecated",  "readOnly", "writeOnly", "strict",  "$defs",
                                       "definitions", "$anchor"};
  return k;
}

const std::set<std::string>& handled() {
  static const std::set<std::string> k{"type",     "enum",     "const",     "properties", "required",
                                       "additionalProperties", "items",     "minItems",   "maxItems",
                                       "minLength", "maxLength", "pattern",  "format",     "anyOf",
                                       "oneOf",    "allOf",    "$ref"};
  return k;
}

std::string join_path(const std::string& path, const std::string& key) {
  return path.empty() ? key : path + "." + key;
}

class Compiler {
 public:
  explicit Compiler(const json& root, std::string prefix = "") : root_(root), prefix_(std::move(prefix)) {}

  std::string compile() {
    const std::string root_expr = visit(root_, "", 0);
    std::string out = "root ::= " + root_expr + "\n" + kPrimitives;
    for (const auto& [name, body] : rules_) out += name + " ::= " + body + "\n";
    return out;
  }

  // `name ::= <the schema>` and the rules it needs, without the primitives.
  std::string compile_as(const std::string& name) {
    std::string out = name + " ::= " + visit(root_, "", 0) + "\n";
    for (const auto& [rule, body] : rules_) out += rule + " ::= " + body + "\n";
    return out;
  }

 private:
  [[noreturn]] static void fail(const std::string& path, const std::string& what) { throw GrammarError(path, what); }

  std::string new_rule(const std::string& body) {
    if (rules_.size() >= kMaxSchemaRules) fail("", "the schema is too large");
    std::string name = cat(prefix_, "r", std::to_string(rules_.size()));
    rules_.emplace_back(name, body);
    return name;
  }

  static int64_t count(const json& s, const char* key, const std::string& path, int64_t dflt) {
    const auto it = s.find(key);
    if (it == s.end()) return dflt;
    if (!it->is_number_integer() || it->get<int64_t>() < 0) fail(join_path(path, key), "must be an integer >= 0");
    const int64_t v = it->get<int64_t>();
    if (v > kMaxSchemaCount) {
      fail(join_path(path, key), "values above " + std::to_string(kMaxSchemaCount) + " are not supported");
    }
    return v;
  }

  // {lo, hi} repetition suffix (hi < 0: unbounded).
  static std::string reps(int64_t lo, int64_t hi) {
    if (hi < 0) return lo == 0 ? "*" : lo == 1 ? "+" : cat("{", std::to_string(lo), ",}");
    return cat("{", std::to_string(lo), ",", std::to_string(hi), "}");
  }

  std::string visit(const json& s, const std::string& path, int depth) {
    if (depth > kMaxSchemaDepth) fail(path, "the schema is nested deeper than " + std::to_string(kMaxSchemaDepth));
    if (s.is_boolean()) {
      if (!s.get<bool>()) fail(path, "the schema 'false' matches nothing");
      return "value";
    }
    if (!s.is_object()) fail(path, "a schema must be an object or a boolean");
    for (const auto& [key, v] : s.items()) {
      if (!handled().count(key) && !annotations().count(key)) fail(path, "unsupported keyword '" + key + "'");
    }
    if (const auto it = s.find("$ref"); it != s.end()) {
      for (const auto& [key, v] : s.items()) {
        if (key != "$ref" && handled().count(key)) fail(path, "'$ref' beside '" + key + "' is not supported");
      }
      return ref(*it, join_path(path, "$ref"), depth);
    }
    if (const auto it = s.find("const"); it != s.end()) return gbnf_literal(it->dump());
    if (const auto it = s.find("enum"); it != s.end()) {
      if (!it->is_array() || it->empty()) fail(join_path(path, "enum"), "must be a non-empty array");
      std::string out = "(";
      for (size_t i = 0; i < it->size(); ++i) out += (i ? " | " : "") + gbnf_literal((*it)[i].dump());
      return out + ")";
    }
    for (const char* comb : {"anyOf", "oneOf", "allOf"}) {
      const auto it = s.find(comb);
      if (it == s.end()) continue;
      const std::string cpath = join_path(path, comb);
      if (!it->is_array() || it->empty()) fail(cpath, "must be a non-empty array");
      for (const auto& [key, v] : s.items()) {
        if (key != comb && handled().count(key)) fail(path, "'" + key + "' beside '" + comb + "' is not supported");
      }
      if (std::string(comb) == "allOf") {
        if (it->size() != 1) fail(cpath, "only an allOf of one schema is supported");
        return visit((*it)[0], cpath + "[0]", depth + 1);
      }
      std::string out = "(";
      for (size_t i = 0; i < it->size(); ++i) {
        out += (i ? " | " : "") + visit((*it)[i], cpath + "[" + std::to_string(i) + "]", depth + 1);
      }
      return new_rule(out + ")");
    }
    const auto t = s.find("type");
    if (t == s.end()) return typed(s, infer_type(s), path, depth);
    if (t->is_string()) return typed(s, t->get<std::string>(), path, depth);
    if (!t->is_array() || t->empty()) fail(join_path(path, "type"), "must be a string or a non-empty array");
    std::string out = "(";
    for (size_t i = 0; i < t->size(); ++i) {
      if (!(*t)[i].is_string()) fail(join_path(path, "type"), "entries must be strings");
      out += (i ? " | " : "") + typed(s, (*t)[i].get<std::string>(), path, depth);
    }
    return new_rule(out + ")");
  }

  static std::string infer_type(const json& s) {
    for (const char* k : {"properties", "additionalProperties", "required"}) {
      if (s.contains(k)) return "object";
    }
    for (const char* k : {"items", "minItems", "maxItems"}) {
      if (s.contains(k)) return "array";
    }
    for (const char* k : {"pattern", "minLength", "maxLength", "format"}) {
      if (s.contains(k)) return "string";
    }
    return "any";
  }

  std::string typed(const json& s, const std::string& type, const std::string& path, int depth) {
    if (type == "any") return "value";
    if (type == "object") return object(s, path, depth);
    if (type == "array") return array(s, path, depth);
    if (type == "string") return string(s, path);
    if (type == "number" || type == "integer" || type == "boolean" || type == "null") return type;
    fail(join_path(path, "type"), "unknown type '" + type + "'");
  }

  std::string ref(const json& r, const std::string& path, int depth) {
    if (!r.is_string()) fail(path, "must be a string");
    const std::string target = r.get<std::string>();
    if (const auto it = refs_.find(target); it != refs_.end()) return it->second;
    if (target.empty() || target[0] != '#') fail(path, "only local references ('#...') are supported");
    const json* node = &root_;
    if (target.size() > 1) {
      try {
        node = &root_.at(json::json_pointer(target.substr(1)));
      } catch (const json::exception&) {
        fail(path, "'" + target + "' does not resolve inside the schema");
      }
    }
    // The rule is named before its body is compiled, so a recursive reference finds it.
    const std::string name = new_rule("");
    refs_.emplace(target, name);
    const size_t index = rules_.size() - 1;
    const std::string body = visit(*node, target, depth + 1);
    rules_[index].second = body;
    return name;
  }

  static bool ap_false(const json& s) {
    const auto it = s.find("additionalProperties");
    return it != s.end() && it->is_boolean() && !it->get<bool>();
  }

  std::string object(const json& s, const std::string& path, int depth) {
    std::map<std::string, const json*> props;  // key order
    static const json kAny = json::object();
    if (const auto it = s.find("properties"); it != s.end()) {
      if (!it->is_object()) fail(join_path(path, "properties"), "must be an object");
      for (const auto& [k, v] : it->items()) props.emplace(k, &v);
    }
    std::set<std::string> required;
    if (const auto it = s.find("required"); it != s.end()) {
      if (!it->is_array()) fail(join_path(path, "required"), "must be an array of strings");
      for (const json& k : *it) {
        if (!k.is_string()) fail(join_path(path, "required"), "must be an array of strings");
        required.insert(k.get<std::string>());
        if (!props.count(k.get<std::string>()) && ap_false(s)) {
          fail(join_path(path, "required"), "names '" + k.get<std::string>() +
                                                "', which is not in properties while additionalProperties is false");
        }
        props.emplace(k.get<std::string>(), &kAny);
      }
    }
    const auto ap = s.find("additionalProperties");
    if (ap != s.end() && !ap->is_boolean() && !ap->is_object()) {
      fail(join_path(path, "additionalProperties"), "must be a boolean or a schema");
    }
    if (props.empty()) {
      if (ap != s.end() && ap->is_boolean() && !ap->get<bool>()) return gbnf_literal("{") + " ws " + gbnf_literal("}");
      const std::string value =
          ap != s.end() && ap->is_object() ? visit(*ap, join_path(path, "additionalProperties"), depth + 1) : "value";
      const std::string member = new_rule("string ws \":\" ws " + value + " ws");
      return new_rule("\"{\" ws ( " + member + " ( \",\" ws " + member + " )* )? \"}\"");
    }
    // Properties in key order, each required one always, each optional one maybe; a comma before every
    // property but the first emitted. rest[k][after]: the properties from k on, `after` = one was emitted.
    std::vector<std::pair<std::string, std::string>> kv;  // (key, member expression)
    for (const auto& [key, sub] : props) {
      const std::string value = visit(*sub, join_path(join_path(path, "properties"), key), depth + 1);
      kv.emplace_back(key, gbnf_literal(json(key).dump()) + " ws \":\" ws " + value + " ws");
    }
    std::string next_first = "\"\"", next_after = "\"\"";
    for (size_t k = kv.size(); k-- > 0;) {
      const bool req = required.count(kv[k].first) > 0;
      const std::string member = "( " + kv[k].second + " )";
      std::string first = member + " " + next_after;
      std::string after = "\",\" ws " + member + " " + next_after;
      if (!req) {
        first += " | " + next_first;
        after += " | " + next_after;
      }
      next_first = new_rule(first);
      next_after = new_rule(after);
    }
    return new_rule("\"{\" ws " + next_first + " \"}\"");
  }

  std::string array(const json& s, const std::string& path, int depth) {
    for (const char* k : {"prefixItems", "contains", "uniqueItems"}) {
      if (s.contains(k)) fail(path, std::string("unsupported keyword '") + k + "'");
    }
    std::string item = "value";
    if (const auto it = s.find("items"); it != s.end()) {
      if (it->is_boolean() && !it->get<bool>()) {
        item.clear();
      } else {
        item = visit(*it, join_path(path, "items"), depth + 1);
      }
    }
    const int64_t lo = count(s, "minItems", path, 0);
    int64_t hi = s.contains("maxItems") ? count(s, "maxItems", path, 0) : -1;
    if (item.empty()) hi = 0;
    if (hi >= 0 && hi < lo) fail(path, "maxItems is below minItems: no array satisfies the schema");
    if (hi == 0) return new_rule("\"[\" ws \"]\"");
    const std::string elem = item + " ws";
    const std::string more = "( \",\" ws " + elem + " )" + reps(lo > 0 ? lo - 1 : 0, hi < 0 ? -1 : hi - 1);
    const std::string body = "( " + elem + " " + more + " )" + (lo == 0 ? "?" : "");
    return new_rule("\"[\" ws " + body + " \"]\"");
  }

  std::string string(const json& s, const std::string& path) {
    const bool has_len = s.contains("minLength") || s.contains("maxLength");
    const int64_t lo = count(s, "minLength", path, 0);
    const int64_t hi = s.contains("maxLength") ? count(s, "maxLength", path, 0) : -1;
    if (hi >= 0 && hi < lo) fail(path, "maxLength is below minLength: no string satisfies the schema");
    if (const auto it = s.find("pattern"); it != s.end()) {
      if (!it->is_string()) fail(join_path(path, "pattern"), "must be a string");
      if (has_len || s.contains("format")) fail(path, "'pattern' beside minLength/maxLength/format is not supported");
      try {
        return new_rule("\"\\\"\" " + pattern_to_gbnf(it->get<std::string>(), "char") + " \"\\\"\"");
      } catch (const GrammarError& e) {
        fail(join_path(path, "pattern"), e.detail);
      }
    }
    if (const auto it = s.find("format"); it != s.end()) {
      if (!it->is_string()) fail(join_path(path, "format"), "must be a string");
      if (has_len) fail(path, "'format' beside minLength/maxLength is not supported");
      static const std::map<std::string, std::string> kFormats = {
          {"date", R"([0-9]{4} "-" ( "0" [1-9] | "1" [0-2] ) "-" ( "0" [1-9] | [12] [0-9] | "3" [01] ))"},
          {"time", R"(( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ":" [0-5] [0-9] ( "." [0-9]{1,6} )? )"
                   R"(( "Z" | [+-] ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ))"},
          {"uuid", R"([0-9a-f]{8} "-" [0-9a-f]{4} "-" [0-9a-f]{4} "-" [0-9a-f]{4} "-" [0-9a-f]{12})"},
      };
      const std::string f = it->get<std::string>();
      std::string body;
      if (f == "date-time") {
        body = "( " + kFormats.at("date") + " ) \"T\" ( " + kFormats.at("time") + " )";
      } else if (const auto fit = kFormats.find(f); fit != kFormats.end()) {
        body = fit->second;
      } else {
        fail(join_path(path, "format"), "unsupported format '" + f + "' (supported: date, time, date-time, uuid)");
      }
      return new_rule("\"\\\"\" " + body + " \"\\\"\"");
    }
    if (!has_len) return "string";
    return new_rule("\"\\\"\" char" + reps(lo, hi) + " \"\\\"\"");
  }

  const json& root_;
  const std::string prefix_;  // of rule names, distinct per schema when several share a grammar
  std::vector<std::pair<std::string, std::string>> rules_;
  std::map<std::string, std::string> refs_;
};

}  // namespace

std::string json_schema_to_gbnf(const json& schema) {
  // The schema's own keyword checks reject numeric bounds and the like: validation keywords of number/integer
  // are not in handled(), so {"type":"integer","minimum":0} is a 400, never a silently ignored bound.
  return Compiler(schema).compile();
}

std::string json_schemas_gbnf_rules(const std::vector<json>& schemas, const std::vector<std::string>& names) {
  std::string out = kPrimitives;
  for (size_t i = 0; i < schemas.size(); ++i) {
    try {
      out += Compiler(schemas[i], cat("s", std::to_string(i), "-")).compile_as(names.at(i));
    } catch (const GrammarError& e) {
      throw GrammarError("[" + std::to_string(i) + "]" + (e.where.empty() ? "" : "." + e.where), e.detail);
    }
  }
  return out;
}

std::string json_object_gbnf() { return std::string("root ::= object\n") + kPrimitives; }

}  // namespace preface::grammar
