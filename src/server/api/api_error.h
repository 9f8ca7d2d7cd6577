// Errors of the HTTP APIs and their two wire shapes, plus typed access to request JSON.
//
// An ApiError carries the HTTP status and, optionally, the offending parameter and a machine-readable code;
// the error TYPE is derived from the status per API:
//   OpenAI     {"error": {"message", "type", "param", "code"}}
//              400/404/405/413: invalid_request_error; 5xx: server_error.
//   Anthropic  {"type": "error", "error": {"type", "message"}}
//              400/405: invalid_request_error; 404: not_found_error; 413: request_too_large;
//              503: overloaded_error; other 5xx: api_error.
//   Ollama     {"error": "message"}                                   (/api/*)
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/error.h"

namespace preface::server {

enum class ApiFlavor { OpenAI, Anthropic, Ollama };

class ApiError : public Error {
 public:
  ApiError(int status_, const std::string& message, std::string param_ = {}, std::string code_ = {})
      : Error(message), status(status_), param(std::move(param_)), code(std::move(code_)) {}
  int status;
  std::string param;  // the request field at fault ("" when none)
  std::string code;   // e.g. "model_not_found", "context_length_exceeded" ("" when none)
};

std::string error_type(ApiFlavor flavor, int status);
nlohmann::json error_body(ApiFlavor flavor, int status, const std::string& message, const std::string& param = {},
                          const std::string& code = {});
inline nlohmann::json error_body(ApiFlavor flavor, const ApiError& e) {
  return error_body(flavor, e.status, e.what(), e.param, e.code);
}

// The API a path belongs to: /v1/messages* is Anthropic, /api/* Ollama, everything else OpenAI-shaped.
ApiFlavor flavor_for_path(std::string_view path);

// Serialises JSON for the wire; invalid UTF-8 (a token that ends mid-character) becomes U+FFFD instead of
// throwing.
std::string dump_json(const nlohmann::json& j);

// Deepest nesting of objects and arrays accepted in a request body (the top-level object counts as one).
inline constexpr int kMaxJsonDepth = 64;

// Parses a request body that must be a JSON object of at most kMaxJsonDepth levels; throws ApiError 400
// otherwise, before any deeper level is built.
nlohmann::json parse_json_object(const std::string& body);

// Typed, range-checked access to the fields of one JSON object. A missing field or JSON null gives nullopt;
// a present field of the wrong type or out of range throws ApiError 400 naming it (as `prefix + name`).
class JsonFields {
 public:
  explicit JsonFields(const nlohmann::json& obj, std::string prefix = {}) : obj_(obj), prefix_(std::move(prefix)) {}

  bool has(const std::string& name) const;
  std::optional<bool> boolean(const std::string& name) const;
  std::optional<int64_t> integer(const std::string& name, int64_t lo, int64_t hi) const;
  std::optional<double> number(const std::string& name, double lo, double hi) const;
  std::optional<std::string> string(const std::string& name) const;
  // An object or array field (nullptr when absent); wrong type throws.
  const nlohmann::json* object(const std::string& name) const;
  const nlohmann::json* array(const std::string& name) const;
  // A string or an array of at most max_n strings (e.g. `stop`); each must be non-empty.
  std::vector<std::string> strings(const std::string& name, size_t max_n) const;

  [[noreturn]] void fail(const std::string& name, const std::string& what) const;
  std::string path(const std::string& name) const { return prefix_ + name; }

 private:
  const nlohmann::json* get(const std::string& name) const;  // nullptr when missing or null

  const nlohmann::json& obj_;
  std::string prefix_;
};

}  // namespace preface::server
