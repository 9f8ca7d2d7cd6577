#include "kv/redis_tls.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>

namespace preface::kv {
namespace {

using Clock = std::chrono::steady_clock;

std::string ssl_error(const char* step) {
  const unsigned long e = ERR_get_error();
  char buf[256] = "";
  if (e != 0) ERR_error_string_n(e, buf, sizeof buf);
  ERR_clear_error();
  return std::string(step) + (e != 0 ? std::string(": ") + buf : "");
}

int ms_left(Clock::time_point deadline) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::max<int64_t>(ms, 0));
}

bool wait_fd(int fd, short events, int timeout_ms) {
  pollfd p{fd, events, 0};
  return ::poll(&p, 1, timeout_ms) > 0;
}

// A TCP connection to host:port within the deadline, non-blocking; -1 with *why set.
int tcp_connect(const std::string& host, int port, Clock::time_point deadline, std::string* why) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (const int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res); rc != 0) {
    *why = "cannot resolve " + host + ": " + gai_strerror(rc);
    return -1;
  }
  int fd = -1;
  for (addrinfo* ai = res; ai != nullptr && fd < 0; ai = ai->ai_next) {
    fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) continue;
    int rc = ::connect(fd, ai->ai_addr, ai->ai_addrlen);
    if (rc != 0 && errno == EINPROGRESS && wait_fd(fd, POLLOUT, ms_left(deadline))) {
      int err = 0;
      socklen_t len = sizeof err;
      rc = ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0 ? 0 : -1;
      if (rc != 0) errno = err != 0 ? err : ETIMEDOUT;
    } else if (rc != 0 && errno == EINPROGRESS) {
      errno = ETIMEDOUT;
    }
    if (rc != 0) {
      *why = std::string("connect: ") + std::strerror(errno);
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(res);
  if (fd >= 0) {
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  return fd;
}

struct CtxFree {
  void operator()(SSL_CTX* c) const { SSL_CTX_free(c); }
};
struct SslFree {
  void operator()(SSL* s) const { SSL_free(s); }
};

// A client context: TLS 1.2 or later, the peer verified against the CA file (or the system store), the client
// certificate loaded when given. nullptr with *why set.
std::unique_ptr<SSL_CTX, CtxFree> make_ctx(const RedisTlsOptions& o, std::string* why) {
  std::unique_ptr<SSL_CTX, CtxFree> ctx(SSL_CTX_new(TLS_client_method()));
  if (!ctx) {
    *why = ssl_error("TLS context");
    return nullptr;
  }
  SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION);
  SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER, nullptr);
  const bool cas = o.ca_file.empty() ? SSL_CTX_set_default_verify_paths(ctx.get()) == 1
                                     : SSL_CTX_load_verify_locations(ctx.get(), o.ca_file.c_str(), nullptr) == 1;
  if (!cas) {
    *why = ssl_error(("cannot load the CA certificates " + (o.ca_file.empty() ? "(system)" : o.ca_file)).c_str());
    return nullptr;
  }
  if (!o.cert_file.empty() || !o.key_file.empty()) {
    if (SSL_CTX_use_certificate_chain_file(ctx.get(), o.cert_file.c_str()) != 1 ||
        SSL_CTX_use_PrivateKey_file(ctx.get(), o.key_file.c_str(), SSL_FILETYPE_PEM) != 1 ||
        SSL_CTX_check_private_key(ctx.get()) != 1) {
      *why = ssl_error(("cannot load the client certificate " + o.cert_file + " / key " + o.key_file).c_str());
      return nullptr;
    }
  }
  return ctx;
}

}  // namespace

struct RedisTlsLink::State {
  std::unique_ptr<SSL_CTX, CtxFree> ctx;
  std::unique_ptr<SSL, SslFree> ssl;
  int tcp = -1;          // the TLS stream's socket (non-blocking)
  int relay_end = -1;    // our end of the pair
  int client_end = -1;   // hiredis's end until released

  ~State() {
    if (tcp >= 0) ::close(tcp);
    if (relay_end >= 0) ::close(relay_end);
    if (client_end >= 0) ::close(client_end);
  }

  // Waits until the TLS stream can go on after `rc` (WANT_READ / WANT_WRITE); false on anything else or after
  // timeout_ms.
  bool wait(int rc, int timeout_ms) {
    const int e = SSL_get_error(ssl.get(), rc);
    if (e == SSL_ERROR_WANT_READ) return wait_fd(tcp, POLLIN, timeout_ms);
    if (e == SSL_ERROR_WANT_WRITE) return wait_fd(tcp, POLLOUT, timeout_ms);
    return false;
  }

  bool write_all_tls(const char* p, size_t n) {
    while (n > 0) {
      const int rc = SSL_write(ssl.get(), p, static_cast<int>(std::min<size_t>(n, 1 << 20)));
      if (rc > 0) {
        p += rc;
        n -= static_cast<size_t>(rc);
      } else if (!wait(rc, kStallMs)) {
        return false;
      }
    }
    return true;
  }

  static bool write_all_fd(int fd, const char* p, size_t n) {
    while (n > 0) {
      const ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) return false;
      p += w;
      n -= static_cast<size_t>(w);
    }
    return true;
  }

  // Moves bytes both ways until either side ends; then shuts our end down (hiredis reads the end at once).
  void relay() {
    std::array<char, 16384> buf{};
    for (bool open = true; open;) {
      if (SSL_pending(ssl.get()) == 0) {
        pollfd p[2] = {{relay_end, POLLIN, 0}, {tcp, POLLIN, 0}};
        if (::poll(p, 2, 1000) < 0 && errno != EINTR) break;
        if (p[0].revents != 0) {
          const ssize_t n = ::recv(relay_end, buf.data(), buf.size(), 0);
          if (n <= 0 || !write_all_tls(buf.data(), static_cast<size_t>(n))) break;
        }
        if (p[1].revents == 0) continue;
      }
      for (;;) {  // everything the TLS stream has now
        const int rc = SSL_read(ssl.get(), buf.data(), static_cast<int>(buf.size()));
        if (rc > 0) {
          if (!write_all_fd(relay_end, buf.data(), static_cast<size_t>(rc))) open = false;
          if (!open || SSL_pending(ssl.get()) == 0) break;
          continue;
        }
        const int e = SSL_get_error(ssl.get(), rc);
        if (e == SSL_ERROR_WANT_READ) break;
        if (e == SSL_ERROR_WANT_WRITE && wait_fd(tcp, POLLOUT, kStallMs)) continue;
        open = false;  // closed by the server, or a TLS error
        break;
      }
    }
    ERR_clear_error();
    ::shutdown(relay_end, SHUT_RDWR);
  }

  static constexpr int kStallMs = 30000;  // a TLS write that cannot progress this long ends the connection
};

RedisTlsLink::RedisTlsLink(std::unique_ptr<State> state) : state_(std::move(state)) {
  relay_ = std::thread([s = state_.get()] { s->relay(); });
}

RedisTlsLink::~RedisTlsLink() {
  if (state_ && state_->client_end >= 0) {  // never handed to hiredis: closing it ends the relay
    ::close(state_->client_end);
    state_->client_end = -1;
  }
  if (relay_.joinable()) relay_.join();
}

int RedisTlsLink::release_client_fd() {
  const int fd = state_->client_end;
  state_->client_end = -1;
  return fd;
}

std::unique_ptr<RedisTlsLink> RedisTlsLink::open(const std::string& host, int port, const RedisTlsOptions& options,
                                                 int timeout_ms, std::string* why) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  auto s = std::make_unique<State>();
  s->ctx = make_ctx(options, why);
  if (!s->ctx) return nullptr;
  s->tcp = tcp_connect(host, port, deadline, why);
  if (s->tcp < 0) return nullptr;
  s->ssl.reset(SSL_new(s->ctx.get()));
  if (!s->ssl || SSL_set_fd(s->ssl.get(), s->tcp) != 1) {
    *why = ssl_error("TLS session");
    return nullptr;
  }
  // The name to verify: an IP address as such, else a DNS name (also sent as SNI).
  X509_VERIFY_PARAM* param = SSL_get0_param(s->ssl.get());
  in6_addr ip{};
  const bool is_ip = ::inet_pton(AF_INET, host.c_str(), &ip) == 1 || ::inet_pton(AF_INET6, host.c_str(), &ip) == 1;
  if (is_ip ? X509_VERIFY_PARAM_set1_ip_asc(param, host.c_str()) != 1
            : (SSL_set_tlsext_host_name(s->ssl.get(), host.c_str()) != 1 || SSL_set1_host(s->ssl.get(), host.c_str()) != 1)) {
    *why = ssl_error("TLS host name");
    return nullptr;
  }
  for (;;) {
    const int rc = SSL_connect(s->ssl.get());
    if (rc == 1) break;
    if (!s->wait(rc, ms_left(deadline))) {
      const long verify = SSL_get_verify_result(s->ssl.get());
      *why = verify != X509_V_OK ? std::string("TLS certificate: ") + X509_verify_cert_error_string(verify)
                                 : ssl_error("TLS handshake");
      if (ms_left(deadline) == 0 && verify == X509_V_OK) *why = "TLS handshake: timed out";
      return nullptr;
    }
  }
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) {
    *why = std::string("socketpair: ") + std::strerror(errno);
    return nullptr;
  }
  s->relay_end = pair[0];
  s->client_end = pair[1];
  return std::unique_ptr<RedisTlsLink>(new RedisTlsLink(std::move(s)));
}

std::string check_redis_tls_options(const RedisTlsOptions& options) {
  std::string why;
  return make_ctx(options, &why) ? "" : why;
}

}  // namespace preface::kv
