// The request log: one line per HTTP request, rejected ones included (issue 26 item 6), written when its answer
// is complete:
//
//   req ID METHOD PATH status=S client=ADDR tenant=T latency=MSms [generation fields] [reason="..."]
//
// ID is the client's X-Request-Id (printable, at most kMaxRequestIdBytes) or a number the server assigns; it is
// echoed in the X-Request-Id response header. tenant is "-" before authentication succeeds (or "" tenants, when
// keys are off, print as "-"). latency runs from the request's first byte to the end of its answer (for a
// stream: its last event). A generation adds its token counts and finish reason; a rejected request its error.
//
// An HTTP request is served start to end on one thread (httplib's connection thread, streams included), so its
// record is thread-local: begin_request() at its first byte, filled by the layers that learn something.
#pragma once
#include <chrono>
#include <string>

namespace preface::server {

inline constexpr size_t kMaxRequestIdBytes = 128;

struct RequestRecord {
  std::string id;
  std::chrono::steady_clock::time_point start{};
  std::string tenant;      // set once authenticated
  std::string reason;      // the error of a rejected request
  bool deferred = false;   // a generation writes the line itself (at its end)
};

// The record of the request being served on this thread.
RequestRecord& current_request();
// A fresh record starting at `start`, with a new server-assigned id.
void begin_request(std::chrono::steady_clock::time_point start);
// Adopts the client's X-Request-Id when it is usable (printable ASCII without spaces or quotes, 1..128 bytes).
void adopt_request_id(const std::string& client_id);

// The line (without newline). `extra`: more " key=value" fields.
std::string request_log_line(const RequestRecord& r, const std::string& method, const std::string& path, int status,
                             const std::string& client, const std::string& extra);

}  // namespace preface::server
