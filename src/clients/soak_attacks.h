// The soak's attacks that need a raw TCP connection (issue 28): a slowloris request (a header line every
// 250 ms, never finished) and a client that sends a whole non-streamed request and closes at once.
#pragma once

#include <string>

#include "clients/loadgen_client.h"

namespace preface::cli::soak {

struct RawResult {
  int http_status = 0;  // the final status line's code; 0 when none arrived
  std::string error;    // why there is none: connect failure, reset, timeout
};

// Trickles header lines of a request to `path` until the server answers (it should: 408 at its --header-timeout)
// or `give_up_s` passes.
RawResult slowloris(const loadgen::Target& target, const std::string& path, double give_up_s);

// Sends a complete POST of `body` to `path` and closes the connection after `close_after_ms`, unread.
RawResult send_and_vanish(const loadgen::Target& target, const std::string& path, const std::string& body,
                          int close_after_ms);

}  // namespace preface::cli::soak
