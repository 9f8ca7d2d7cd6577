// The grammar that forces calls in a row's format (grammar/tool_formats.h), written with the row's markers as its
// template renders them, arguments in the schema's property order.
#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "grammar/grammar.h"
#include "grammar/schema_regex.h"
#include "grammar/tool_calls.h"
#include "grammar/utf8_ranges.h"

namespace preface::grammar {
namespace {

using nlohmann::json;

std::string lit(std::string_view s) { return s.empty() ? std::string("\"\"") : gbnf_literal(s); }

std::vector<uint32_t> code_points(std::string_view s) {
  std::vector<uint32_t> out;
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    const int n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    uint32_t cp = n == 1 ? c : c & (0x3F >> (n - 1));
    for (int k = 1; k < n && i + static_cast<size_t>(k) < s.size(); ++k) {
      cp = (cp << 6) | (static_cast<unsigned char>(s[i + static_cast<size_t>(k)]) & 0x3F);
    }
    out.push_back(cp);
    i += static_cast<size_t>(n);
  }
  return out;
}

std::string class_char(uint32_t cp) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out = "\\u";
  for (int shift = 12; shift >= 0; shift -= 4) out += kHex[(cp >> shift) & 0xF];
  return out;
}

// A rule `name` ::= text in which `marker` (BMP code points m0 m1 ...) does not occur: a repetition of pieces
// each of which starts with any character but m0, or with m0 .. m(k-1) followed by a character that is neither
// m(k) nor m0. Every m0 of the text starts a piece that stops short of the marker, so the marker never occurs
// (text such as "<<" before a marker starting with '<' is left out: the grammar need not produce every string).
std::string not_containing(const std::string& name, std::string_view marker) {
  const std::vector<uint32_t> m = code_points(marker);
  std::string alts = cat("[^", class_char(m[0]), "]");
  std::string prefix;
  for (size_t k = 1; k < m.size(); ++k) {
    prefix += utf8_encode(m[k - 1]);
    alts += cat(" | ", lit(prefix), " [^", class_char(m[0]), m[k] == m[0] ? "" : class_char(m[k]), "]");
  }
  return cat(name, " ::= ( ", alts, " )*\n");
}

// The strings a string schema allows, when it lists them (enum / const); empty otherwise.
std::vector<std::string> listed_strings(const json& p) {
  std::vector<std::string> out;
  if (const auto c = p.find("const"); c != p.end() && c->is_string()) out.push_back(c->get<std::string>());
  if (const auto e = p.find("enum"); e != p.end() && e->is_array()) {
    for (const json& v : *e) {
      if (v.is_string()) out.push_back(v.get<std::string>());
    }
  }
  return out;
}

class Builder {
 public:
  Builder(const ToolFormat& f, const std::vector<ToolSpec>& tools, std::vector<Loosened>* loosened)
      : f_(f), tools_(tools), loosened_(loosened) {}

  std::string build(bool parallel, std::string_view prefix) {
    std::string alts;
    for (size_t i = 0; i < tools_.size(); ++i) alts += cat(i ? " | " : "", body(i));
    std::string root = cat("root ::= ", lit(prefix), " ", lit(f_.section_open), " tc-call");
    if (parallel && f_.parallel) root += cat(" ( ", lit(f_.separator), " tc-call )*");
    root += cat(" ", lit(f_.section_close), "\n");
    std::string out = cat(root, "tc-call ::= ", lit(f_.call_open), " ( ", alts, " ) ", lit(f_.call_close), "\n", rules_);
    std::vector<Loosened> found;
    try {
      out += json_schemas_gbnf_rules(schemas_, names_, &found);
    } catch (const GrammarError& e) {
      throw GrammarError(map_path(e.where), e.detail);
    }
    if (loosened_ != nullptr) {
      for (const Loosened& l : found) loosened_->push_back({map_path(l.path), l.what});
    }
    if (f_.syntax == ToolSyntax::GemmaObject) out += gemma_value_rules();
    return out;
  }

 private:
  // A JSON value rule for `schema`, reported as tool `tool`'s path `where` ("" for its arguments object).
  std::string json_rule(const json& schema, size_t tool, const std::string& where) {
    names_.push_back(cat("tc-j", std::to_string(names_.size())));
    schemas_.push_back(schema);
    origins_.push_back(cat("[", std::to_string(tool), "]", where.empty() ? "" : ".", where));
    return names_.back();
  }
  // A path "[k].<path>" of the JSON compile as the tool's.
  std::string map_path(const std::string& path) const {
    if (path.rfind("[", 0) != 0) return path;
    const size_t close = path.find(']');
    const size_t k = std::stoul(path.substr(1, close - 1));
    const std::string& origin = origins_.at(k);
    const std::string rest = path.substr(close + 1);
    return cat(origin, rest);
  }
  void loosen(size_t tool, const std::string& where, const std::string& what) {
    if (loosened_ != nullptr) loosened_->push_back({cat("[", std::to_string(tool), "].", where), what});
  }

  std::string body(size_t i) {
    const ToolSpec& t = tools_[i];
    const std::string name = lit(t.name);
    switch (f_.syntax) {
      case ToolSyntax::JsonObject: {
        const std::string head = cat("{\"", std::string(f_.name_key), "\": ", json(t.name).dump(), ", \"",
                                     std::string(f_.args_key), "\": ");
        return cat(lit(head), " ", json_rule(t.parameters, i, ""), " \"}\"");
      }
      case ToolSyntax::NameJson: {
        std::string out = cat(lit(f_.name_prefix), " ", name);
        if (f_.name_index) out += " \":\" [0-9]{1,3}";
        return cat(out, " ", lit(f_.name_close), " ", json_rule(t.parameters, i, ""));
      }
      case ToolSyntax::NameXml: return cat(name, " ", lit(f_.name_close), " ", params(i, "", ""));
      case ToolSyntax::Pythonic: return cat(name, " \"(\" ", params(i, "\", \"", "="), " \")\"");
      case ToolSyntax::GemmaObject: return cat(name, " \"{\" ", params(i, "\",\"", ":"), " \"}\"");
    }
    return name;
  }

  // The arguments of tool i, in property order, required ones always. sep (a GBNF literal, or "" for none)
  // joins them; assign follows each key (Pythonic, GemmaObject).
  std::string params(size_t i, const std::string& sep, const std::string& assign) {
    const json& schema = tools_[i].parameters;
    std::vector<std::pair<std::string, bool>> props;  // item rule, required
    if (const auto p = schema.find("properties"); schema.is_object() && p != schema.end() && p->is_object()) {
      std::set<std::string> required;
      if (const auto r = schema.find("required"); r != schema.end() && r->is_array()) {
        for (const json& k : *r) {
          if (k.is_string()) required.insert(k.get<std::string>());
        }
      }
      for (const auto& [key, sub] : p->items()) props.emplace_back(item(i, key, sub, assign), required.count(key) > 0);
    }
    const std::string base = cat("tc-p", std::to_string(i), "-");
    if (sep.empty()) {
      std::string out = "\"\"";
      for (const auto& [rule, req] : props) out += cat(" ", rule, req ? "" : "?");
      return out;
    }
    // first-j: the list starting at property j or later; rest-j: ", item" for j and later.
    const size_t n = props.size();
    for (size_t j = n + 1; j-- > 0;) {
      const std::string first = cat(base, "first-", std::to_string(j)), rest = cat(base, "rest-", std::to_string(j));
      if (j == n) {
        rules_ += cat(first, " ::= \"\"\n", rest, " ::= \"\"\n");
        continue;
      }
      const auto& [rule, req] = props[j];
      const std::string first_next = cat(base, "first-", std::to_string(j + 1));
      const std::string rest_next = cat(base, "rest-", std::to_string(j + 1));
      rules_ += cat(first, " ::= ", rule, " ", rest_next, req ? "" : cat(" | ", first_next), "\n");
      rules_ += cat(rest, " ::= ( ", sep, " ", rule, " )", req ? "" : "?", " ", rest_next, "\n");
    }
    return cat(base, "first-0");
  }

  // One argument: its key and value in the row's syntax.
  std::string item(size_t i, const std::string& key, const json& property, const std::string& assign) {
    const std::string where = cat("properties.", key);
    // The property alone, with the tool schema's definitions, so that its $refs resolve.
    json sub = property;
    for (const char* defs : {"$defs", "definitions"}) {
      const json& root = tools_[i].parameters;
      if (sub.is_object() && root.is_object() && root.contains(defs) && !sub.contains(defs)) sub[defs] = root[defs];
    }
    const bool str = is_string_schema(sub);
    std::string value;
    if (f_.syntax == ToolSyntax::Pythonic) {
      value = json_rule(sub, i, where);
    } else if (str) {
      value = raw_string(i, where, sub);
    } else if (f_.syntax == ToolSyntax::GemmaObject) {
      const auto type = sub.is_object() ? sub.find("type") : sub.end();
      const bool scalar = sub.is_object() && type != sub.end() && type->is_string() &&
                          (*type == "number" || *type == "integer" || *type == "boolean" || *type == "null");
      if (scalar) {
        value = json_rule(sub, i, where);
      } else {
        loosen(i, where, "values other than strings, numbers and booleans are not checked in this format");
        (void)json_rule(sub, i, where);  // compiled all the same, so that a malformed schema is an error
        value = "tc-gv";
      }
    } else {
      value = json_rule(sub, i, where);
    }
    const std::string rule = cat("tc-a", std::to_string(n_items_++));
    std::string head;
    if (f_.syntax == ToolSyntax::NameXml) {
      std::string mid(f_.param_mid);
      if (f_.typed_params) mid += str ? "true\">" : "false\">";
      rules_ += cat(rule, " ::= ", lit(cat(std::string(f_.param_open), key, mid)), " ", value, " ",
                    lit(f_.param_close), "\n");
    } else {
      rules_ += cat(rule, " ::= ", lit(cat(key, assign)), " ", value, "\n");
    }
    return rule;
  }

  // A string argument written raw: its listed values, or any text that cannot end it early.
  std::string raw_string(size_t i, const std::string& where, const json& sub) {
    const bool gemma = f_.syntax == ToolSyntax::GemmaObject;
    const std::string quote = gemma ? "\"<|\\\"|>\"" : "";
    const std::vector<std::string> listed = listed_strings(sub);
    if (!listed.empty()) {
      std::string alts;
      for (size_t k = 0; k < listed.size(); ++k) alts += cat(k ? " | " : "", lit(listed[k]));
      return cat(quote, " ( ", alts, " ) ", quote);
    }
    std::string_view trimmed = gemma ? std::string_view("<|\"|>") : f_.param_close;
    trimmed.remove_prefix(std::min(trimmed.size(), trimmed.find_first_not_of(" \t\r\n")));
    trimmed.remove_suffix(trimmed.size() - (trimmed.find_last_not_of(" \t\r\n") + 1));
    for (const char* k : {"pattern", "format"}) {
      if (sub.contains(k)) loosen(i, cat(where, ".", k), cat("'", k, "' is not enforced on a string written raw"));
    }
    const auto length = [&](const char* k) -> std::optional<int64_t> {
      const auto it = sub.find(k);
      if (it == sub.end() || !it->is_number_integer() || it->get<int64_t>() < 0) return std::nullopt;
      return std::min<int64_t>(it->get<int64_t>(), kMaxSchemaCount);
    };
    if (const auto lo = length("minLength"), hi = length("maxLength"); lo || hi) {
      // A bounded length: characters other than the end marker's first, so that it cannot occur.
      const std::string c = cat("[^", class_char(code_points(trimmed).at(0)), "]");
      return cat(quote, " ", c, "{", std::to_string(lo.value_or(0)), ",", hi ? std::to_string(*hi) : "", "} ", quote);
    }
    auto [it, fresh] = text_rules_.try_emplace(std::string(trimmed), cat("tc-t", std::to_string(text_rules_.size())));
    if (fresh) rules_ += not_containing(it->second, trimmed);
    return cat(quote, " ", it->second, " ", quote);
  }

  // Any value in Gemma 4's syntax (nested objects and lists).
  std::string gemma_value_rules() {
    std::string out = not_containing("tc-gs", "<|\"|>");
    out += "tc-gv ::= \"<|\\\"|>\" tc-gs \"<|\\\"|>\" | number | boolean | null | tc-go | tc-gl\n";
    out += "tc-go ::= \"{\" ( tc-gk \":\" tc-gv ( \",\" tc-gk \":\" tc-gv )* )? \"}\"\n";
    out += "tc-gk ::= [a-zA-Z_] [a-zA-Z0-9_]*\n";
    out += "tc-gl ::= \"[\" ( tc-gv ( \",\" tc-gv )* )? \"]\"\n";
    return out;
  }

  const ToolFormat& f_;
  const std::vector<ToolSpec>& tools_;
  std::vector<Loosened>* loosened_;
  std::vector<json> schemas_;
  std::vector<std::string> names_, origins_;
  std::map<std::string, std::string> text_rules_;  // end marker -> rule of text without it
  std::string rules_;
  size_t n_items_ = 0;
};

}  // namespace

bool is_string_schema(const json& p) {
  if (!p.is_object()) return false;
  if (const auto type = p.find("type"); type != p.end()) return *type == "string";
  for (const char* k : {"enum", "const"}) {
    if (const auto e = p.find(k); e != p.end()) {
      if (e->is_string()) return true;
      if (e->is_array()) return !e->empty() && std::all_of(e->begin(), e->end(), [](const json& v) { return v.is_string(); });
    }
  }
  return false;
}

std::string tool_call_gbnf(const ToolFormat& format, const std::vector<ToolSpec>& tools, bool parallel,
                           std::vector<Loosened>* loosened, std::string_view prefix) {
  if (tools.empty()) throw GrammarError("", "no tools to call");
  return Builder(format, tools, loosened).build(parallel, prefix);
}

}  // namespace preface::grammar
