#include "server/api/api_error.h"

#include <cmath>

#include "util/json_depth.h"

namespace preface::server {

using nlohmann::json;

std::string error_type(ApiFlavor flavor, int status) {
  if (flavor == ApiFlavor::OpenAI) {
    if (status == 401) return "authentication_error";
    if (status == 403) return "permission_error";
    return status >= 500 ? "server_error" : "invalid_request_error";
  }
  switch (status) {
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 413: return "request_too_large";
    case 503: return "overloaded_error";
    default: return status >= 500 ? "api_error" : "invalid_request_error";
  }
}

json error_body(ApiFlavor flavor, int status, const std::string& message, const std::string& param,
                const std::string& code) {
  if (flavor == ApiFlavor::Anthropic) {
    return {{"type", "error"}, {"error", {{"type", error_type(flavor, status)}, {"message", message}}}};
  }
  if (flavor == ApiFlavor::Ollama) return {{"error", param.empty() ? message : param + ": " + message}};
  return {{"error",
           {{"message", message},
            {"type", error_type(flavor, status)},
            {"param", param.empty() ? json(nullptr) : json(param)},
            {"code", code.empty() ? json(nullptr) : json(code)}}}};
}

ApiFlavor flavor_for_path(std::string_view path) {
  if (path.rfind("/v1/messages", 0) == 0) return ApiFlavor::Anthropic;
  return path.rfind("/api/", 0) == 0 ? ApiFlavor::Ollama : ApiFlavor::OpenAI;
}

std::string dump_json(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

json parse_json_object(const std::string& body) {
  // nlohmann's parser is iterative, but copying, comparing and dumping a value recurse once per level, so a
  // body nested 100k deep would overflow the stack wherever it is touched; refuse it before parsing. A linear
  // pre-scan, not the parser's depth callback: with a callback, nlohmann scans the enclosing container for
  // discarded values after every value closes, which is quadratic in the values of one container.
  if (!json_depth_within(body, kMaxJsonDepth)) {
    throw ApiError(400, "the request body nests JSON deeper than " + std::to_string(kMaxJsonDepth) + " levels");
  }
  json j;
  try {
    j = json::parse(body);
  } catch (const json::exception& e) {
    // parse_error, and out_of_range for numbers beyond double's range (1e309).
    throw ApiError(400, std::string("the request body is not valid JSON: ") + e.what());
  }
  if (!j.is_object()) throw ApiError(400, "the request body must be a JSON object");
  return j;
}

const json* JsonFields::get(const std::string& name) const {
  const auto it = obj_.find(name);
  if (it == obj_.end() || it->is_null()) return nullptr;
  return &*it;
}

bool JsonFields::has(const std::string& name) const { return get(name) != nullptr; }

void JsonFields::fail(const std::string& name, const std::string& what) const {
  throw ApiError(400, "'" + path(name) + "' " + what, path(name));
}

std::optional<bool> JsonFields::boolean(const std::string& name) const {
  const json* v = get(name);
  if (v == nullptr) return std::nullopt;
  if (!v->is_boolean()) fail(name, "must be a boolean");
  return v->get<bool>();
}

std::optional<int64_t> JsonFields::integer(const std::string& name, int64_t lo, int64_t hi) const {
  const json* v = get(name);
  if (v == nullptr) return std::nullopt;
  int64_t x = 0;
  if (v->is_number_unsigned()) {
    const auto u = v->get<uint64_t>();
    if (u > static_cast<uint64_t>(hi)) fail(name, "must be at most " + std::to_string(hi));
    x = static_cast<int64_t>(u);
  } else if (v->is_number_integer()) {
    x = v->get<int64_t>();
  } else {
    fail(name, "must be an integer");
  }
  if (x < lo || x > hi) {
    fail(name, "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " + std::to_string(x));
  }
  return x;
}

std::optional<double> JsonFields::number(const std::string& name, double lo, double hi) const {
  const json* v = get(name);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number()) fail(name, "must be a number");
  const auto x = v->get<double>();
  if (!std::isfinite(x) || x < lo || x > hi) {
    json range = json::array({lo, hi});
    fail(name, "must be in " + range.dump() + ", got " + v->dump());
  }
  return x;
}

std::optional<std::string> JsonFields::string(const std::string& name) const {
  const json* v = get(name);
  if (v == nullptr) return std::nullopt;
  if (!v->is_string()) fail(name, "must be a string");
  return v->get<std::string>();
}

const json* JsonFields::object(const std::string& name) const {
  const json* v = get(name);
  if (v != nullptr && !v->is_object()) fail(name, "must be an object");
  return v;
}

const json* JsonFields::array(const std::string& name) const {
  const json* v = get(name);
  if (v != nullptr && !v->is_array()) fail(name, "must be an array");
  return v;
}

std::vector<std::string> JsonFields::strings(const std::string& name, size_t max_n) const {
  const json* v = get(name);
  std::vector<std::string> out;
  if (v == nullptr) return out;
  if (v->is_string()) {
    out.push_back(v->get<std::string>());
  } else if (v->is_array()) {
    if (v->size() > max_n) fail(name, "has more than " + std::to_string(max_n) + " entries");
    for (const json& s : *v) {
      if (!s.is_string()) fail(name, "must be a string or an array of strings");
      out.push_back(s.get<std::string>());
    }
  } else {
    fail(name, "must be a string or an array of strings");
  }
  for (const std::string& s : out) {
    if (s.empty()) fail(name, "must not contain empty strings");
  }
  return out;
}

}  // namespace preface::server
