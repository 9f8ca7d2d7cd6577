#include "server/http/http_listener.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "server/api/api_error.h"

namespace preface::server {
namespace {

using Clock = std::chrono::steady_clock;

// Milliseconds until `t`, rounded up (a wait of this long does not return before `t`).
int ms_until(Clock::time_point t) {
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(t - Clock::now()).count();
  return static_cast<int>(std::clamp<int64_t>(ms, 0, 1 << 30));
}

// poll() for `events` up to `timeout_ms`, restarted on EINTR; the revents, 0 on timeout, -1 on error.
int wait_for(int fd, short events, int timeout_ms) {
  pollfd p{fd, events, 0};
  for (;;) {
    const int n = ::poll(&p, 1, timeout_ms);
    if (n < 0 && errno == EINTR) continue;
    return n <= 0 ? n : p.revents;
  }
}

void endpoint_of(const sockaddr_storage& ss, std::string& ip, int& port) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (ss.ss_family == AF_INET) {
    const auto& a = reinterpret_cast<const sockaddr_in&>(ss);
    ::inet_ntop(AF_INET, &a.sin_addr, buf, sizeof buf);
    port = ntohs(a.sin_port);
  } else if (ss.ss_family == AF_INET6) {
    const auto& a = reinterpret_cast<const sockaddr_in6&>(ss);
    ::inet_ntop(AF_INET6, &a.sin6_addr, buf, sizeof buf);
    port = ntohs(a.sin6_port);
  }
  ip = buf;
}

// One connection's socket as an httplib::Stream, reading through a buffer (httplib reads request lines a byte
// at a time) under the current request's deadline.
class ConnectionStream final : public httplib::Stream {
 public:
  ConnectionStream(int fd, const ListenerConfig& c) : fd_(fd), config_(c) {
    sockaddr_storage ss{};
    socklen_t n = sizeof ss;
    if (::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &n) == 0) endpoint_of(ss, remote_ip_, remote_port_);
    n = sizeof ss;
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &n) == 0) endpoint_of(ss, local_ip_, local_port_);
  }

  // A new request: it must arrive within `timeout_s` of `start`.
  void begin_request(Clock::time_point start, int32_t timeout_s) {
    start_ = start;
    timeout_s_ = timeout_s;
    deadline_ = start + std::chrono::seconds(timeout_s);
    expired_ = false;
  }
  bool expired() const { return expired_; }
  int32_t timeout_s() const { return timeout_s_; }
  Clock::time_point start() const { return start_; }
  const std::string& remote_ip() const { return remote_ip_; }

  bool is_readable() const override {
    return pos_ < len_ || (!expired_ && wait_for(fd_, POLLIN, read_wait_ms()) > 0);
  }
  bool is_writable() const override {
    return !expired_ && wait_for(fd_, POLLOUT, config_.write_timeout_s * 1000) > 0;
  }

  ssize_t read(char* ptr, size_t size) override {
    if (pos_ < len_) {
      const size_t n = std::min(size, len_ - pos_);
      std::memcpy(ptr, buf_ + pos_, n);
      pos_ += n;
      return static_cast<ssize_t>(n);
    }
    if (expired_ || Clock::now() >= deadline_) {
      expired_ = true;
      return -1;
    }
    const int to_deadline = ms_until(deadline_);
    if (wait_for(fd_, POLLIN, std::min(config_.read_timeout_s * 1000, to_deadline)) <= 0) {
      if (to_deadline <= config_.read_timeout_s * 1000) expired_ = true;  // the deadline, not the read timeout
      return -1;
    }
    const bool direct = size >= sizeof buf_;
    ssize_t n;
    do {
      n = ::recv(fd_, direct ? ptr : buf_, direct ? size : sizeof buf_, 0);
    } while (n < 0 && errno == EINTR);
    if (n <= 0) return n;
    // Bytes received buy time at the minimum rate (a large body on a slow link), never by the line.
    deadline_ += std::chrono::microseconds(static_cast<int64_t>(n) * 1'000'000 /
                                           static_cast<int64_t>(HttpListener::kMinRateBytesPerSecond));
    if (direct) return n;
    pos_ = 0;
    len_ = static_cast<size_t>(n);
    return read(ptr, size);
  }

  ssize_t write(const char* ptr, size_t size) override {
    if (expired_) return -1;  // the 408 is written by the listener instead
    size_t done = 0;
    while (done < size) {
      if (wait_for(fd_, POLLOUT, config_.write_timeout_s * 1000) <= 0) return done > 0 ? static_cast<ssize_t>(done) : -1;
      const ssize_t n = ::send(fd_, ptr + done, size - done, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return done > 0 ? static_cast<ssize_t>(done) : -1;
      done += static_cast<size_t>(n);
    }
    return static_cast<ssize_t>(done);
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    ip = remote_ip_;
    port = remote_port_;
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    ip = local_ip_;
    port = local_port_;
  }
  socket_t socket() const override { return fd_; }

 private:
  int read_wait_ms() const { return std::min(config_.read_timeout_s * 1000, ms_until(deadline_)); }

  int fd_;
  const ListenerConfig& config_;
  std::string remote_ip_, local_ip_;
  int remote_port_ = -1, local_port_ = -1;
  Clock::time_point start_{}, deadline_{};
  int32_t timeout_s_ = 0;
  bool expired_ = false;
  char buf_[4096];
  size_t pos_ = 0, len_ = 0;  // unread bytes: buf_[pos_, len_)
};

// Writes a complete response with Connection: close and shuts down the sending side; the caller hands the socket
// to the Lingerer, which reads what the client still sends and then closes it (see lingerer.h).
void answer(int fd, int status, const char* phrase, const std::string& message, int32_t retry_after_s) {
  const std::string body = error_body(ApiFlavor::OpenAI, status, message).dump();
  std::string head = "HTTP/1.1 " + std::to_string(status) + " " + phrase +
                     "\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: " +
                     std::to_string(body.size()) + "\r\n";
  if (retry_after_s > 0) head += "Retry-After: " + std::to_string(retry_after_s) + "\r\n";
  const std::string response = head + "\r\n" + body;
  if (wait_for(fd, POLLOUT, 1000) > 0) (void)::send(fd, response.data(), response.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  ::shutdown(fd, SHUT_WR);
}

}  // namespace

bool HttpListener::widen_backlog(int n_backlog) { return ::listen(svr_sock_, n_backlog) == 0; }

void HttpListener::stop_accepting() {
  const socket_t s = svr_sock_;
  if (s != INVALID_SOCKET) ::shutdown(s, SHUT_RDWR);  // a blocked accept() returns EINVAL
}

int32_t HttpListener::n_connections_of(const std::string& client) const {
  std::lock_guard lock(mu_);
  const auto it = per_client_.find(client);
  return it == per_client_.end() ? 0 : it->second;
}

int32_t HttpListener::n_connections() const {
  std::lock_guard lock(mu_);
  int32_t n = 0;
  for (const auto& [client, count] : per_client_) n += count;
  return n + n_proxied_.load();
}

namespace {

// The connection this thread serves: from a trusted proxy? And the forwarded client its current request counts
// against ("" when none).
thread_local bool t_proxied = false;
thread_local std::string t_forwarded;

}  // namespace

bool HttpListener::admit_forwarded(const httplib::Request& req) {
  if (!t_proxied || !t_forwarded.empty()) return true;
  t_forwarded = client_of(req);
  return enter(t_forwarded);
}

void HttpListener::leave_forwarded() {
  if (t_forwarded.empty()) return;
  leave(t_forwarded);
  t_forwarded.clear();
}

std::string HttpListener::client_of(const httplib::Request& req) const {
  return config_.trusted_proxies.client(req.remote_addr, req.get_header_value("X-Forwarded-For"));
}

bool HttpListener::enter(const std::string& client) {
  std::lock_guard lock(mu_);
  return ++per_client_[client] <= max_per_client();
}

void HttpListener::leave(const std::string& client) {
  std::lock_guard lock(mu_);
  const auto it = per_client_.find(client);
  if (it != per_client_.end() && --it->second <= 0) per_client_.erase(it);
}

bool HttpListener::process_and_close_socket(socket_t sock) {
  ConnectionStream strm(sock, config_);
  const std::string client = strm.remote_ip();
  const auto t0 = Clock::now();
  bool ret = false;
  bool answered = false;  // answered here: the socket goes to the lingerer
  t_proxied = !config_.trusted_proxies.empty() && config_.trusted_proxies.trusted(client);
  if (t_proxied) n_proxied_.fetch_add(1);
  if (!t_proxied && !enter(client)) {
    answered = true;
    answer(sock, 429, "Too Many Requests",
           "too many connections from " + client + " (limit " + std::to_string(config_.max_per_client) +
               "); retry later",
           config_.retry_after_s);
    if (on_refused) {
      on_refused({429, client, "per-client connection limit",
                  std::chrono::duration<double, std::milli>(Clock::now() - t0).count()});
    }
  } else {
    const bool overflow = on_overflow_thread && on_overflow_thread();
    const int32_t timeout_s = overflow ? std::min(config_.header_timeout_s, kOverflowTimeoutS) : config_.header_timeout_s;
    for (size_t count = overflow ? 1 : keep_alive_max_count_; count > 0; --count) {
      // Wait for the next request in short slices, so that a drain or a stop ends an idle connection at once.
      const auto idle_until = Clock::now() + std::chrono::seconds(config_.keep_alive_timeout_s);
      int ready = wait_for(sock, POLLIN, 0);  // a request already here is served, even while draining
      while (ready == 0 && !draining_.load() && svr_sock_ != INVALID_SOCKET && Clock::now() < idle_until) {
        ready = wait_for(sock, POLLIN, std::min(100, ms_until(idle_until)));
      }
      if (ready <= 0) break;
      strm.begin_request(Clock::now(), timeout_s);
      if (on_request_start) on_request_start(strm.start());
      bool connection_closed = false;
      const bool close_after = count == 1 || draining_.load() || svr_sock_ == INVALID_SOCKET;
      ret = process_request(strm, close_after, connection_closed, nullptr);
      leave_forwarded();
      if (strm.expired()) {
        answered = true;
        answer(sock, 408, "Request Timeout",
               "the request did not arrive within " + std::to_string(strm.timeout_s()) + " s (--header-timeout)", 0);
        if (on_refused) {
          on_refused({408, client, "request not received within --header-timeout",
                      std::chrono::duration<double, std::milli>(Clock::now() - strm.start()).count()});
        }
        ret = false;
        break;
      }
      if (!ret || connection_closed) break;
    }
  }
  if (t_proxied) {
    n_proxied_.fetch_sub(1);
    t_proxied = false;
  } else {
    leave(client);
  }
  if (answered) {
    lingerer_.adopt(sock);
  } else {
    ::shutdown(sock, SHUT_RDWR);
    ::close(sock);
  }
  return ret;
}

}  // namespace preface::server
