// TLS to Redis (rediss://) for hiredis 0.14, Debian 12's, which has no TLS of its own (hiredis_ssl came in 1.0):
// OpenSSL speaks TLS to the server on a TCP socket, and hiredis talks plain RESP over one end of a local socket
// pair (redisConnectFd) whose other end a relay thread moves to and from the TLS stream. Written here because no
// Debian 12 package gives hiredis TLS (stunnel would be a second process to run beside every replica).
//
// The server's certificate is verified against ca_file (or the system's store when empty) and the host name (or IP
// address) of the URL; a client certificate is presented when cert_file/key_file are given (redis-server's
// tls-auth-clients). One relay thread per connection; it ends when hiredis closes its end (redisFree) or the TLS
// stream ends, and then shuts its end down so a hiredis read sees the end at once.
#pragma once
#include <memory>
#include <string>
#include <thread>

namespace preface::kv {

struct RedisTlsOptions {
  std::string ca_file;    // PEM CA certificates the server's certificate must chain to ("" = the system's)
  std::string cert_file;  // PEM client certificate ("" = none)
  std::string key_file;   // its PEM private key
};

class RedisTlsLink {
 public:
  // Connects to host:port, completes the handshake and verifies the certificate within timeout_ms. nullptr with
  // *why set when any of that fails (the reason names the step: connect, certificate, handshake).
  static std::unique_ptr<RedisTlsLink> open(const std::string& host, int port, const RedisTlsOptions& options,
                                            int timeout_ms, std::string* why);
  // Joins the relay (hiredis's end must be closed first: redisFree, or never handed over).
  ~RedisTlsLink();
  RedisTlsLink(const RedisTlsLink&) = delete;
  RedisTlsLink& operator=(const RedisTlsLink&) = delete;

  // hiredis's end, to hand to redisConnectFd (which owns it from then on) exactly once; -1 after.
  int release_client_fd();

 private:
  struct State;
  explicit RedisTlsLink(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
  std::thread relay_;
};

// Checks that the TLS options can be loaded (files exist, key matches certificate); "" when they can.
std::string check_redis_tls_options(const RedisTlsOptions& options);

}  // namespace preface::kv
