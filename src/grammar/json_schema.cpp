// JSON Schema -> GBNF (see json_schema.h for the subset). Written here: Debian packages no JSON-Schema-to-
// grammar compiler. The shape of the generated grammar follows llama.cpp's json-schema-to-grammar (read, not
// copied): one rule per subschema that needs one, primitives shared.
#include "grammar/json_schema.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "grammar/number_range.h"
#include "grammar/schema_formats.h"
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

const std::set<std::string>& handled() {
  static const std::set<std::string> k{
      "type",      "enum",      "const",   "properties", "required",         "additionalProperties",
      "items",     "minItems",  "maxItems", "minLength", "maxLength",        "pattern",
      "format",    "anyOf",     "oneOf",   "allOf",      "$ref",             "minimum",
      "maximum",   "exclusiveMinimum",     "exclusiveMaximum",               "prefixItems", "nullable"};
  return k;
}

// Validation keywords the grammar does not enforce: dropped, and reported as loosened.
const std::set<std::string>& unenforced() {
  static const std::set<std::string> k{
      "multipleOf",    "uniqueItems",       "contains",         "minContains",     "maxContains",
      "patternProperties", "propertyNames", "minProperties",    "maxProperties",   "dependentRequired",
      "dependentSchemas",  "dependencies",  "unevaluatedProperties", "unevaluatedItems", "not",
      "if",            "then",              "else",             "additionalItems"};
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

  // (schema path, what is not enforced), in the order met.
  const std::vector<std::pair<std::string, std::string>>& loosened() const { return loosened_; }

  // `name ::= <the schema>` and the rules it needs, without the primitives.
  std::string compile_as(const std::string& name) {
    std::string out = name + " ::= " + visit(root_, "", 0) + "\n";
    for (const auto& [rule, body] : rules_) out += rule + " ::= " + body + "\n";
    return out;
  }

 private:
  [[noreturn]] static void fail(const std::string& path, const std::string& what) { throw GrammarError(path, what); }

  void loosen(const std::string& path, const std::string& what) {
    for (const auto& n : loosened_) {
      if (n.first == path && n.second == what) return;
    }
    loosened_.emplace_back(path, what);
  }

  std::string new_rule(const std::string& body) {
    if (rules_.size() >= kMaxSchemaRules) fail("", "the schema is too large");
    std::string name = cat(prefix_, "r", std::to_string(rules_.size()));
    rules_.emplace_back(name, body);
    return name;
  }

  // A count keyword (minItems, maxLength, ...): dflt when absent; above kMaxSchemaCount a minimum is lowered to
  // it and a maximum dropped (-1), both loosened.
  int64_t count(const json& s, const char* key, const std::string& path, int64_t dflt) {
    const auto it = s.find(key);
    if (it == s.end()) return dflt;
    if (!it->is_number_integer() || it->get<int64_t>() < 0) fail(join_path(path, key), "must be an integer >= 0");
    const int64_t v = it->get<int64_t>();
    if (v <= kMaxSchemaCount) return v;
    loosen(path, cat("'", key, "' above ", std::to_string(kMaxSchemaCount), " is not enforced"));
    return std::string_view(key).substr(0, 3) == "min" ? kMaxSchemaCount : -1;
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
      if (unenforced().count(key)) loosen(path, cat("'", key, "' is not enforced"));
    }
    if (const auto it = s.find("nullable"); it != s.end() && it->is_boolean() && it->get<bool>()) {
      json inner = s;
      inner.erase("nullable");
      return new_rule(cat("( ", visit(inner, path, depth + 1), " | null )"));
    }
    if (const auto it = s.find("$ref"); it != s.end()) {
      for (const auto& [key, v] : s.items()) {
        if (key != "$ref" && handled().count(key)) loosen(path, cat("'", key, "' beside '$ref' is not enforced"));
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
    if (const auto it = s.find("allOf"); it != s.end()) {
      if (!it->is_array() || it->empty()) fail(join_path(path, "allOf"), "must be a non-empty array");
      return visit(merge_all_of(s, path), path, depth + 1);
    }
    for (const char* comb : {"anyOf", "oneOf"}) {
      const auto it = s.find(comb);
      if (it == s.end()) continue;
      const std::string cpath = join_path(path, comb);
      if (!it->is_array() || it->empty()) fail(cpath, "must be a non-empty array");
      for (const auto& [key, v] : s.items()) {
        if (key != comb && handled().count(key)) loosen(path, cat("'", key, "' beside '", comb, "' is not enforced"));
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

  // allOf and the keywords beside it as one schema: properties and required united, every other keyword taken
  // when the parts agree on it. Parts that conflict, or hold $ref or combinators, leave only the first part's
  // keywords for those (loosened).
  json merge_all_of(const json& s, const std::string& path) {
    json merged = s;
    merged.erase("allOf");
    const json& parts = s.at("allOf");
    for (size_t i = 0; i < parts.size(); ++i) {
      const json& part = parts[i];
      const std::string ppath = join_path(path, "allOf[" + std::to_string(i) + "]");
      if (part.is_boolean()) {
        if (!part.get<bool>()) fail(ppath, "the schema 'false' matches nothing");
        continue;
      }
      if (!part.is_object()) fail(ppath, "a schema must be an object or a boolean");
      for (const auto& [key, v] : part.items()) {
        if (key == "properties" && v.is_object()) {
          json& props = merged["properties"];
          if (!props.is_object()) props = json::object();
          for (const auto& [name, sub] : v.items()) {
            if (!props.contains(name)) {
              props[name] = sub;
            } else if (props[name] != sub) {
              loosen(ppath, cat("'properties.", name, "' is not enforced (it differs from another part's)"));
            }
          }
        } else if (key == "required" && v.is_array()) {
          json& req = merged["required"];
          if (!req.is_array()) req = json::array();
          for (const json& r : v) {
            if (std::find(req.begin(), req.end(), r) == req.end()) req.push_back(r);
          }
        } else if (!merged.contains(key)) {
          merged[key] = v;
        } else if (merged[key] != v && (handled().count(key) || unenforced().count(key))) {
          loosen(ppath, cat("'", key, "' is not enforced (it differs from another part's)"));
        }
      }
    }
    return merged;
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
    if (type == "number" || type == "integer") return number(s, type == "integer", path);
    if (type == "boolean" || type == "null") return type;
    fail(join_path(path, "type"), "unknown type '" + type + "'");
  }

  // A bound keyword: JSON Schema 2020-12's numeric exclusive* or draft 4's boolean one beside minimum/maximum.
  static std::optional<NumberBound> bound(const json& s, const char* inclusive, const char* exclusive,
                                          const std::string& path) {
    std::optional<NumberBound> out;
    const auto inc = s.find(inclusive), exc = s.find(exclusive);
    if (inc != s.end()) {
      if (!inc->is_number()) fail(join_path(path, inclusive), "must be a number");
      out = NumberBound{inc->get<double>(), exc != s.end() && exc->is_boolean() && exc->get<bool>()};
    }
    if (exc != s.end() && !exc->is_boolean()) {
      if (!exc->is_number()) fail(join_path(path, exclusive), "must be a number or a boolean");
      const double v = exc->get<double>();
      const bool lower = std::string_view(inclusive) == "minimum";
      // Both given: the tighter one (at equal values the exclusive one).
      if (!out || (lower ? v >= out->value : v <= out->value)) out = NumberBound{v, true};
    }
    return out;
  }

  std::string number(const json& s, bool integer, const std::string& path) {
    const std::optional<NumberBound> lo = bound(s, "minimum", "exclusiveMinimum", path);
    const std::optional<NumberBound> hi = bound(s, "maximum", "exclusiveMaximum", path);
    if (!lo && !hi) return integer ? "integer" : "number";
    if (integer) {
      const IntegerSpan span = integer_span(lo, hi);
      if (span.lo > span.hi) fail(path, "no integer satisfies the bounds");
      if (span.lo == -kMaxIntegerMagnitude && span.hi == kMaxIntegerMagnitude) return "integer";
      return new_rule(integer_range_gbnf(span.lo, span.hi));
    }
    const std::optional<std::string> body = number_range_gbnf(lo, hi);
    if (!body) fail(path, "no number this grammar writes satisfies the bounds");
    return new_rule(*body);
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
    std::string item = "value";  // of the elements after prefixItems ("" when there may be none)
    if (const auto it = s.find("items"); it != s.end()) {
      if (it->is_boolean() && !it->get<bool>()) {
        item.clear();
      } else {
        item = visit(*it, join_path(path, "items"), depth + 1);
      }
    }
    std::vector<std::string> prefix;
    if (const auto it = s.find("prefixItems"); it != s.end()) {
      if (!it->is_array()) fail(join_path(path, "prefixItems"), "must be an array of schemas");
      for (size_t i = 0; i < it->size(); ++i) {
        prefix.push_back(visit((*it)[i], join_path(path, "prefixItems[" + std::to_string(i) + "]"), depth + 1));
      }
    }
    const auto n_prefix = static_cast<int64_t>(prefix.size());
    const int64_t lo = count(s, "minItems", path, 0);
    int64_t hi = s.contains("maxItems") ? count(s, "maxItems", path, 0) : -1;
    if (item.empty()) hi = hi < 0 ? n_prefix : std::min(hi, n_prefix);
    if (hi >= 0 && hi < lo) fail(path, "maxItems is below minItems (or the items allowed): no array satisfies it");
    if (hi == 0) return new_rule("\"[\" ws \"]\"");
    // Element k (k >= 0): prefix[k] or item. Elements past min(lo, n) are optional, each only after the one
    // before it; the rest (past the prefix) repeat.
    const int64_t n_listed = hi < 0 ? n_prefix : std::min(n_prefix, hi);
    std::string tail;  // what may follow element n_listed - 1
    if (n_listed == n_prefix && !item.empty() && (hi < 0 || hi > n_prefix)) {
      const int64_t rest_lo = std::max<int64_t>(lo - n_prefix, 0), rest_hi = hi < 0 ? -1 : hi - n_prefix;
      tail = cat("( \",\" ws ", item, " ws )", reps(rest_lo, rest_hi));
      if (n_prefix == 0) {  // the plain array: element 0 is an item too
        const std::string more = cat("( \",\" ws ", item, " ws )", reps(lo > 0 ? lo - 1 : 0, hi < 0 ? -1 : hi - 1));
        return new_rule(cat("\"[\" ws ( ", item, " ws ", more, " )", lo == 0 ? "?" : "", " \"]\""));
      }
    }
    for (int64_t k = n_listed - 1; k >= 0; --k) {
      const std::string elem = cat(k ? "\",\" ws " : "", prefix[static_cast<size_t>(k)], " ws ", tail);
      tail = k < lo ? elem : cat("( ", elem, " )?");
    }
    return new_rule(cat("\"[\" ws ", tail, " \"]\""));
  }

  // A string's grammar: a pattern when it compiles, else its format when known, else length bounds or any string.
  // What is dropped on the way is loosened.
  std::string string(const json& s, const std::string& path) {
    const bool has_len = s.contains("minLength") || s.contains("maxLength");
    const int64_t lo = count(s, "minLength", path, 0);
    const int64_t hi = s.contains("maxLength") ? count(s, "maxLength", path, 0) : -1;
    if (hi >= 0 && hi < lo) fail(path, "maxLength is below minLength: no string satisfies the schema");
    const auto quoted = [&](const std::string& body) { return new_rule(cat("\"\\\"\" ", body, " \"\\\"\"")); };
    std::optional<std::string> body;
    std::string by;  // the keyword that gave `body`
    if (const auto it = s.find("pattern"); it != s.end()) {
      if (!it->is_string()) fail(join_path(path, "pattern"), "must be a string");
      try {
        body = pattern_to_gbnf(it->get<std::string>(), "char");
        by = "pattern";
      } catch (const GrammarError& e) {
        loosen(join_path(path, "pattern"), cat("not enforced (", e.detail, ")"));
      }
    }
    if (const auto it = s.find("format"); it != s.end()) {
      if (!it->is_string()) fail(join_path(path, "format"), "must be a string");
      const std::string f = it->get<std::string>();
      const std::optional<std::string> fbody = string_format_gbnf(f);
      if (body) {
        // A pattern that compiles is taken to imply its format (zod writes both).
      } else if (!fbody) {
        loosen(join_path(path, "format"), cat("'", f, "' is not enforced (known: ", known_string_formats(), ")"));
      } else {
        body = fbody;
        by = "format";
      }
    }
    if (body) {
      if (has_len) loosen(path, cat("'minLength'/'maxLength' beside '", by, "' are not enforced"));
      return quoted(*body);
    }
    if (!has_len) return "string";
    return quoted(cat("char", reps(lo, hi)));
  }

  const json& root_;
  const std::string prefix_;  // of rule names, distinct per schema when several share a grammar
  std::vector<std::pair<std::string, std::string>> rules_;
  std::map<std::string, std::string> refs_;
  std::vector<std::pair<std::string, std::string>> loosened_;
};

}  // namespace

SchemaGrammar compile_json_schema(const json& schema) {
  Compiler c(schema);
  SchemaGrammar out;
  out.gbnf = c.compile();
  for (const auto& [path, what] : c.loosened()) out.loosened.push_back({path, what});
  return out;
}

std::string Loosened::text(const std::string& prefix) const {
  std::string p = prefix;
  if (!path.empty()) p = cat(p, p.empty() || path[0] == '[' ? "" : ".", path);
  return p.empty() ? what : cat(p, ": ", what);
}

std::string json_schemas_gbnf_rules(const std::vector<json>& schemas, const std::vector<std::string>& names,
                                    std::vector<Loosened>* loosened) {
  std::string out = kPrimitives;
  for (size_t i = 0; i < schemas.size(); ++i) {
    const std::string where = cat("[", std::to_string(i), "]");
    Compiler c(schemas[i], cat("s", std::to_string(i), "-"));
    try {
      out += c.compile_as(names.at(i));
    } catch (const GrammarError& e) {
      throw GrammarError(e.where.empty() ? where : cat(where, ".", e.where), e.detail);
    }
    if (loosened == nullptr) continue;
    for (const auto& [path, what] : c.loosened()) {
      loosened->push_back({path.empty() ? where : cat(where, ".", path), what});
    }
  }
  return out;
}

std::string json_object_gbnf() { return std::string("root ::= object\n") + kPrimitives; }

}  // namespace preface::grammar
