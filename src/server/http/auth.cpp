#include "server/http/auth.h"

#include <sstream>

#include "server/api/api_error.h"
#include "util/error.h"
#include "util/read_file.h"

namespace preface::server {
namespace {

// Equality whose time depends on the lengths only, not on where the first difference lies.
bool same_secret(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

}  // namespace

std::unordered_map<std::string, std::string> load_api_keys(const std::string& path) {
  std::istringstream in(read_regular_file(path, 64u << 20, "the API keys file"));
  std::unordered_map<std::string, std::string> keys;  // key -> tenant
  int line_no = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_no;
    std::istringstream fields(line);
    std::string key, tenant, extra;
    if (!(fields >> key) || key[0] == '#') continue;
    if (!(fields >> tenant)) tenant = key;
    if (fields >> extra && extra[0] != '#') {
      throw Error(path + ":" + std::to_string(line_no) + ": expected 'key tenant', found more fields");
    }
    if (!keys.emplace(key, tenant).second) {
      throw Error(path + ":" + std::to_string(line_no) + ": duplicate key");
    }
  }
  if (keys.empty()) throw Error("the API keys file " + path + " holds no key");
  return keys;
}

std::string presented_key(const httplib::Request& req) {
  const std::string auth = req.get_header_value("Authorization");
  constexpr std::string_view kBearer = "Bearer ";
  if (auth.size() > kBearer.size() && auth.compare(0, kBearer.size(), kBearer) == 0) {
    return auth.substr(kBearer.size());
  }
  return req.get_header_value("x-api-key");
}

std::string authenticate(const ServerOptions& options, const httplib::Request& req) {
  if (options.api_keys.empty()) return "";
  const std::string key = presented_key(req);
  if (key.empty()) {
    throw ApiError(401, "an API key is required (Authorization: Bearer KEY, or x-api-key: KEY)", "",
                   "invalid_api_key");
  }
  if (const auto it = options.api_keys.find(key); it != options.api_keys.end()) return it->second;
  throw ApiError(401, "the API key is not valid", "", "invalid_api_key");
}

bool is_admin(const ServerOptions& options, const std::string& key) {
  return !options.admin_key.empty() && same_secret(key, options.admin_key);
}

bool may_read_tenant_metrics(const ServerOptions& options, const std::string& key) {
  return (!options.metrics_key.empty() && same_secret(key, options.metrics_key)) || is_admin(options, key);
}

}  // namespace preface::server
