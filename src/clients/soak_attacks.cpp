#include "clients/soak_attacks.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <thread>

namespace preface::cli::soak {
namespace {

using Clock = std::chrono::steady_clock;

// A connected socket to target's host and port, or -1 with *error set.
int connect_to(const loadgen::Target& t, std::string* error) {
  std::string hp = t.scheme_host_port;
  if (const size_t s = hp.find("://"); s != std::string::npos) hp = hp.substr(s + 3);
  const size_t colon = hp.rfind(':');
  const std::string host = colon == std::string::npos ? hp : hp.substr(0, colon);
  const std::string port = colon == std::string::npos ? "80" : hp.substr(colon + 1);
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (::getaddrinfo(host.c_str(), port.c_str(), &hints, &res) != 0 || res == nullptr) {
    *error = "cannot resolve " + hp;
    return -1;
  }
  const int fd = ::socket(res->ai_family, SOCK_STREAM, 0);
  const bool ok = fd >= 0 && ::connect(fd, res->ai_addr, res->ai_addrlen) == 0;
  ::freeaddrinfo(res);
  if (!ok) {
    if (fd >= 0) ::close(fd);
    *error = "cannot connect to " + hp;
    return -1;
  }
  return fd;
}

// The status of the first non-1xx response line in `text`, or 0.
int final_status(const std::string& text) {
  size_t pos = 0;
  while (text.compare(pos, 5, "HTTP/") == 0 && text.size() >= pos + 12) {
    const int status = std::atoi(text.substr(pos + 9, 3).c_str());
    if (status >= 200) return status;
    const size_t end = text.find("\r\n\r\n", pos);
    if (end == std::string::npos) return 0;
    pos = end + 4;
  }
  return 0;
}

}  // namespace

RawResult slowloris(const loadgen::Target& target, const std::string& path, double give_up_s) {
  RawResult r;
  const int fd = connect_to(target, &r.error);
  if (fd < 0) return r;
  const std::string start = "POST " + target.path_prefix + path + " HTTP/1.1\r\nHost: soak\r\n";
  (void)::send(fd, start.data(), start.size(), MSG_NOSIGNAL);
  const auto until = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(give_up_s));
  std::string got;
  while (Clock::now() < until) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 250) > 0) {
      char buf[2048];
      const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) break;
      got.append(buf, static_cast<size_t>(n));
      if (final_status(got) != 0 && got.find("\r\n\r\n") != std::string::npos) break;
      continue;
    }
    (void)::send(fd, "X-Slow: 1\r\n", 11, MSG_NOSIGNAL);
  }
  ::close(fd);
  r.http_status = final_status(got);
  if (r.http_status == 0) r.error = got.empty() ? "no answer to a slowloris request" : "unreadable answer";
  return r;
}

RawResult send_and_vanish(const loadgen::Target& target, const std::string& path, const std::string& body,
                          int close_after_ms) {
  RawResult r;
  const int fd = connect_to(target, &r.error);
  if (fd < 0) return r;
  std::string req = "POST " + target.path_prefix + path + " HTTP/1.1\r\nHost: soak\r\nContent-Type: application/json\r\n";
  if (!target.api_key.empty()) req += "Authorization: Bearer " + target.api_key + "\r\n";
  req += "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  const bool sent = ::send(fd, req.data(), req.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(req.size());
  std::this_thread::sleep_for(std::chrono::milliseconds(close_after_ms));
  ::close(fd);
  if (!sent) r.error = "the request could not be sent";
  return r;
}

}  // namespace preface::cli::soak
