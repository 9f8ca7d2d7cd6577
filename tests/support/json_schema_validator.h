// A small JSON Schema validator for tests: checks an instance against the subset grammar/json_schema.h
// compiles (type, enum, const, properties, required, additionalProperties, items, minItems, maxItems,
// minLength, maxLength, pattern, format date/time/date-time/uuid/email/uri/hostname/ipv4/ipv6, minimum, maximum,
// exclusiveMinimum, exclusiveMaximum, prefixItems, nullable, anyOf, oneOf, allOf, local $ref), written
// independently of the compiler so that it can catch the compiler's mistakes. Written here: Debian packages no
// C++ JSON Schema validator.
#pragma once
#include <map>
#include <regex>
#include <string>

#include <nlohmann/json.hpp>

namespace preface::test {

class JsonSchemaValidator {
 public:
  explicit JsonSchemaValidator(nlohmann::json root) : root_(std::move(root)) {}

  // "" when `v` is valid, else the first violation found (with its instance path).
  std::string validate(const nlohmann::json& v) const { return check(root_, v, "$"); }

 private:
  static size_t code_points(const std::string& s) {
    size_t n = 0;
    for (unsigned char c : s) n += (c & 0xC0) != 0x80 ? 1 : 0;
    return n;
  }

  static bool has_type(const nlohmann::json& v, const std::string& t) {
    if (t == "object") return v.is_object();
    if (t == "array") return v.is_array();
    if (t == "string") return v.is_string();
    if (t == "integer") return v.is_number_integer() || (v.is_number_float() && v.get<double>() == static_cast<double>(static_cast<int64_t>(v.get<double>())));
    if (t == "number") return v.is_number();
    if (t == "boolean") return v.is_boolean();
    if (t == "null") return v.is_null();
    return false;
  }

  std::string check(const nlohmann::json& s, const nlohmann::json& v, const std::string& at) const {
    using nlohmann::json;
    if (s.is_boolean()) return s.get<bool>() ? "" : at + ": false schema";
    if (v.is_null() && s.value("nullable", json(false)) == json(true)) return "";
    if (auto it = s.find("$ref"); it != s.end()) {
      const std::string ref = it->get<std::string>();
      const json& target = ref == "#" ? root_ : root_.at(json::json_pointer(ref.substr(1)));
      return check(target, v, at);
    }
    if (auto it = s.find("type"); it != s.end()) {
      bool ok = false;
      if (it->is_string()) ok = has_type(v, it->get<std::string>());
      for (const json& t : it->is_array() ? *it : json::array()) ok = ok || has_type(v, t.get<std::string>());
      if (!ok) return at + ": wrong type for " + it->dump();
    }
    if (auto it = s.find("const"); it != s.end() && *it != v) return at + ": not the const " + it->dump();
    if (auto it = s.find("enum"); it != s.end()) {
      bool found = false;
      for (const json& e : *it) found = found || e == v;
      if (!found) return at + ": not in enum";
    }
    if (auto it = s.find("anyOf"); it != s.end()) {
      bool any = false;
      for (const json& sub : *it) any = any || check(sub, v, at).empty();
      if (!any) return at + ": matches no anyOf branch";
    }
    if (auto it = s.find("oneOf"); it != s.end()) {
      int n = 0;
      for (const json& sub : *it) n += check(sub, v, at).empty() ? 1 : 0;
      if (n != 1) return at + ": matches " + std::to_string(n) + " oneOf branches";
    }
    if (auto it = s.find("allOf"); it != s.end()) {
      for (const json& sub : *it) {
        if (auto e = check(sub, v, at); !e.empty()) return e;
      }
    }
    if (v.is_object()) {
      const json props = s.value("properties", json::object());
      for (const json& r : s.value("required", json::array())) {
        if (!v.contains(r.get<std::string>())) return at + ": missing required '" + r.get<std::string>() + "'";
      }
      for (const auto& [k, x] : v.items()) {
        if (props.contains(k)) {
          if (auto e = check(props[k], x, at + "." + k); !e.empty()) return e;
        } else if (auto ap = s.find("additionalProperties"); ap != s.end()) {
          if (ap->is_boolean() && !ap->get<bool>()) return at + ": additional property '" + k + "'";
          if (auto e = check(*ap, x, at + "." + k); !e.empty()) return e;
        }
      }
    }
    if (v.is_number()) {
      const double x = v.get<double>();
      auto num = [&](const char* k) { return s.contains(k) && s[k].is_number(); };
      const bool d4_lo = s.value("exclusiveMinimum", json(false)) == json(true);  // draft 4 booleans
      const bool d4_hi = s.value("exclusiveMaximum", json(false)) == json(true);
      if (num("minimum") && (d4_lo ? x <= s["minimum"].get<double>() : x < s["minimum"].get<double>())) {
        return at + ": below the minimum";
      }
      if (num("maximum") && (d4_hi ? x >= s["maximum"].get<double>() : x > s["maximum"].get<double>())) {
        return at + ": above the maximum";
      }
      if (num("exclusiveMinimum") && x <= s["exclusiveMinimum"].get<double>()) return at + ": not above the bound";
      if (num("exclusiveMaximum") && x >= s["exclusiveMaximum"].get<double>()) return at + ": not below the bound";
    }
    if (v.is_array()) {
      if (s.contains("minItems") && v.size() < s["minItems"].get<size_t>()) return at + ": too few items";
      if (s.contains("maxItems") && v.size() > s["maxItems"].get<size_t>()) return at + ": too many items";
      const json prefix = s.value("prefixItems", json::array());
      for (size_t i = 0; i < v.size(); ++i) {
        const auto it = s.find("items");
        const json* sub = i < prefix.size() ? &prefix[i] : it != s.end() ? &*it : nullptr;
        if (sub == nullptr) continue;
        if (auto e = check(*sub, v[i], at + "[" + std::to_string(i) + "]"); !e.empty()) return e;
      }
    }
    if (v.is_string()) {
      const std::string str = v.get<std::string>();
      if (s.contains("minLength") && code_points(str) < s["minLength"].get<size_t>()) return at + ": too short";
      if (s.contains("maxLength") && code_points(str) > s["maxLength"].get<size_t>()) return at + ": too long";
      if (auto it = s.find("pattern"); it != s.end() && !std::regex_search(str, std::regex(it->get<std::string>()))) {
        return at + ": does not match pattern " + it->get<std::string>();
      }
      if (auto it = s.find("format"); it != s.end()) {
        static const std::string kDate = R"(\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01]))";
        static const std::string kTime = R"(([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d+)?(Z|[+-]([01]\d|2[0-3]):[0-5]\d))";
        const std::string f = it->get<std::string>();
        // Hostnames: RFC 1123 labels; email: zod 4's default pattern; URIs: a scheme, "://", an authority.
        static const std::string kLabel = "[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?";
        static const std::string kHost = "(?=.{1,253}$)" + kLabel + "(\\." + kLabel + ")*";
        static const std::string kOctet = "(25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)";
        static const std::map<std::string, std::string> kFormats = {
            {"date", kDate},
            {"time", kTime},
            {"date-time", kDate + "T" + kTime},
            {"uuid", "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"},
            {"hostname", kHost},
            {"email", R"((?!\.)(?!.*\.\.)([A-Za-z0-9_'+\-\.]*)[A-Za-z0-9_+-]@([A-Za-z0-9][A-Za-z0-9\-]*\.)+[A-Za-z]{2,})"},
            {"ipv4", kOctet + "(\\." + kOctet + "){3}"},
            {"ipv6", "[0-9A-Fa-f]{1,4}(:[0-9A-Fa-f]{1,4}){7}"},
            {"uri", "[A-Za-z][A-Za-z0-9+.-]*://[^\\s/?#]+([/?#][^\\s]*)?"},
        };
        const auto fit = kFormats.find(f);
        const std::string re = fit == kFormats.end() ? ".*" : fit->second;
        if (!std::regex_match(str, std::regex(re))) return at + ": not a " + f;
      }
    }
    return "";
  }

  nlohmann::json root_;
};

}  // namespace preface::test
