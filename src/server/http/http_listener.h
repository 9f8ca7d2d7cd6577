// The HTTP server's connection loop: httplib::Server with its per-connection processing replaced, so that a
// connection is bounded as a whole, not per read (issue 28 item 2).
//
// httplib 0.11 (Debian 12) serves each accepted socket on a task-queue thread through the virtual
// process_and_close_socket(); this class overrides it with the same keep-alive loop over its own Stream
// (ConnectionStream) and httplib's protected process_request(). Per connection:
//
//   per client    at most max_per_client connections of one remote address are processed at once; a connection
//                 beyond that is answered 429 + Retry-After + Connection: close at once, before reading its
//                 request (so a slow sender cannot hold the thread), and handed to a Lingerer to be closed.
//                 A connection from a trusted proxy (trusted_proxy.h) is not limited as a whole: each of its
//                 requests counts against the client X-Forwarded-For names instead (admit_forwarded, called once
//                 the headers are read; the proxy has buffered the request, so slow senders stay its problem).
//   deadline      each request (request line, headers and body) must arrive within header_timeout_s from its
//                 first byte, extended by 1 s per kMinRateBytesPerSecond bytes received (a large body on a
//                 slow link still arrives; a trickle of header lines does not). Past it: 408 + Connection:
//                 close. Each single read still waits at most read_timeout_s.
//   half-close    writes only wait for room in the socket (not for the client's sending side to be open), so
//                 a client that shut down its sending side after its request still gets its answer.
//   keep-alive    an idle connection waits at most keep_alive_timeout_s for its next request; draining (see
//                 begin_drain) or a stopped listener ends it after the request being served.
//
// Refused and timed-out connections never reach httplib's handlers: they are reported to on_refused (the
// request log). Thread-safe: process_and_close_socket runs on many threads at once.
#pragma once
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <unordered_map>

#include "server/http/lingerer.h"
#include "server/http/trusted_proxy.h"

namespace preface::server {

struct ListenerConfig {
  int32_t header_timeout_s = 20;     // whole request (see above)
  int32_t read_timeout_s = 30;       // one read
  int32_t write_timeout_s = 30;      // one write
  int32_t keep_alive_timeout_s = 5;  // idle between requests
  int32_t max_per_client = 32;       // connections of one remote address processed at once (>= 1)
  int32_t retry_after_s = 1;         // Retry-After of a 429
  TrustedProxies trusted_proxies;    // peers whose X-Forwarded-For names the client (serve --trusted-proxy)
};

// A connection answered without httplib (a per-client refusal or a request past its deadline).
struct RefusedConnection {
  int status;            // 429 or 408
  std::string client;    // remote address
  std::string reason;    // for the log
  double latency_ms;     // from the first byte (408) or from the start of processing (429)
};

class HttpListener : public httplib::Server {
 public:
  static constexpr size_t kMinRateBytesPerSecond = 64 * 1024;
  // How long a refused (429) or timed-out (408) connection stays open after its answer (see lingerer.h).
  static constexpr std::chrono::milliseconds kLinger{100};

  explicit HttpListener(ListenerConfig config) : config_(config), lingerer_(kLinger) {}

  // Linux lets listen() be called again to enlarge the backlog (httplib 0.11 listens with 5).
  bool widen_backlog(int n_backlog);
  // From now on every connection closes after the request it is serving (idle ones at once).
  void begin_drain() { draining_.store(true); }
  // Stops accepting without stopping the server: the listening socket is shut down, so httplib's accept loop
  // ends and its task queue then waits for the connections being served. (httplib's stop() would also cut
  // every chunked response short: its writers stop once the listening socket is closed.)
  void stop_accepting();
  // Connections of `client` being processed now (requests, for a client behind a trusted proxy).
  int32_t n_connections_of(const std::string& client) const;
  // Connections being processed now, of every client.
  int32_t n_connections() const;
  // Called once a request's headers are read, on its connection's thread: on a connection from a trusted proxy,
  // counts the request against its forwarded client until the request is answered; false when that client is
  // over max_per_client (answer 429). True, counting nothing, on any other connection.
  bool admit_forwarded(const httplib::Request& req);
  // Who sent `req`: the forwarded client behind a trusted proxy, else the peer address.
  std::string client_of(const httplib::Request& req) const;
  int32_t max_per_client() const { return std::max<int32_t>(config_.max_per_client, 1); }

  // Called on the connection's thread (set before serving).
  std::function<void(const RefusedConnection&)> on_refused;
  // Called on the connection's thread before each request is read: the time its first byte arrived.
  std::function<void(std::chrono::steady_clock::time_point)> on_request_start;
  // True on a thread serving a connection over the server's cap (ConnectionGate's refusers): such a connection
  // gets one request, which must arrive within kOverflowTimeoutS, so slow senders cannot hold the few refusers.
  std::function<bool()> on_overflow_thread;
  static constexpr int32_t kOverflowTimeoutS = 2;

 private:
  bool process_and_close_socket(socket_t sock) override;
  bool enter(const std::string& client);  // false: over max_per_client (counted anyway; leave() follows)
  void leave(const std::string& client);
  void leave_forwarded();  // after each request: undoes admit_forwarded's count, if it made one

  const ListenerConfig config_;
  std::atomic<bool> draining_{false};
  mutable std::mutex mu_;
  std::unordered_map<std::string, int32_t> per_client_;  // remote address -> connections being processed
  std::atomic<int32_t> n_proxied_{0};  // connections from trusted proxies being processed (not in per_client_)
  Lingerer lingerer_;  // closes the sockets of answered refusals
};

}  // namespace preface::server
