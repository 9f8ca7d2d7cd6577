#include "server/http/request_log.h"

#include <atomic>
#include <cstdio>

namespace preface::server {
namespace {

std::atomic<uint64_t> g_next_id{1};
thread_local RequestRecord t_record;

// Quotes a free-text field, keeping the line one line.
std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (const char c : s.substr(0, 300)) {
    if (c == '"' || c == '\\') out += '\\';
    out += (c == '\n' || c == '\r') ? ' ' : c;
  }
  return out + "\"";
}

// A client-chosen token (method, path) as printable ASCII without spaces, so it cannot forge log lines.
std::string token(const std::string& s) {
  if (s.empty()) return "-";
  std::string out = s.substr(0, 200);
  for (char& c : out) {
    if (c <= ' ' || c > '~') c = '?';
  }
  return out;
}

}  // namespace

RequestRecord& current_request() { return t_record; }

void begin_request(std::chrono::steady_clock::time_point start) {
  t_record = RequestRecord{};
  t_record.id = std::to_string(g_next_id.fetch_add(1));
  t_record.start = start;
}

void adopt_request_id(const std::string& client_id) {
  if (client_id.empty() || client_id.size() > kMaxRequestIdBytes) return;
  for (const char c : client_id) {
    if (c <= ' ' || c > '~' || c == '"' || c == '\\') return;
  }
  t_record.id = client_id;
}

std::string request_log_line(const RequestRecord& r, const std::string& method, const std::string& path, int status,
                             const std::string& client, const std::string& extra) {
  const double ms = r.start == std::chrono::steady_clock::time_point{}
                        ? 0.0
                        : std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - r.start).count();
  char latency[32];
  std::snprintf(latency, sizeof latency, "%.1fms", ms);
  std::string line = "req " + (r.id.empty() ? std::string("-") : r.id) + " " + token(method) + " " + token(path) +
                     " status=" + std::to_string(status) +
                     " client=" + (client.empty() ? "-" : client) + " tenant=" + (r.tenant.empty() ? "-" : r.tenant) +
                     " latency=" + latency + extra;
  if (!r.reason.empty()) line += " reason=" + quoted(r.reason);
  return line;
}

}  // namespace preface::server
