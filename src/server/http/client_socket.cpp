#include "server/http/client_socket.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <cstdlib>
#include <string>

namespace preface::server {
namespace {

struct Endpoint {
  std::string addr;
  int port = -1;
};

Endpoint endpoint(const sockaddr_storage& ss) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (ss.ss_family == AF_INET) {
    const auto& a = reinterpret_cast<const sockaddr_in&>(ss);
    ::inet_ntop(AF_INET, &a.sin_addr, buf, sizeof buf);
    return {buf, ntohs(a.sin_port)};
  }
  if (ss.ss_family == AF_INET6) {
    const auto& a = reinterpret_cast<const sockaddr_in6&>(ss);
    ::inet_ntop(AF_INET6, &a.sin6_addr, buf, sizeof buf);
    return {buf, ntohs(a.sin6_port)};
  }
  return {};
}

}  // namespace

ClientSocket ClientSocket::of(const httplib::Request& req) {
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return ClientSocket(-1, false);
  int found = -1;
  while (const dirent* e = ::readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0') continue;
    sockaddr_storage local{}, peer{};
    socklen_t n_local = sizeof local, n_peer = sizeof peer;
    if (::getsockname(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&local), &n_local) != 0) continue;
    if (::getpeername(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&peer), &n_peer) != 0) continue;
    const Endpoint l = endpoint(local), p = endpoint(peer);
    if (l.port == req.local_port && p.port == req.remote_port && p.addr == req.remote_addr &&
        (req.local_addr.empty() || l.addr == req.local_addr)) {
      found = static_cast<int>(fd);
      break;
    }
  }
  ::closedir(dir);
  return ClientSocket(found, req.version == "HTTP/1.1");
}

bool ClientSocket::gone() {
  if (fd_ < 0) return false;
  pollfd p{fd_, POLLIN | POLLRDHUP, 0};
  if (::poll(&p, 1, 0) <= 0) return false;
  if ((p.revents & (POLLERR | POLLHUP)) != 0) return true;  // reset, or both directions closed
  char c;
  const bool fin = (p.revents & POLLRDHUP) != 0 ||
                   ((p.revents & POLLIN) != 0 && ::recv(fd_, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0);
  if (!fin) return false;
  if (!may_probe_) return true;
  if (!probed_) {
    probed_ = true;
    static constexpr char kContinue[] = "HTTP/1.1 100 Continue\r\n\r\n";
    if (::send(fd_, kContinue, sizeof kContinue - 1, MSG_NOSIGNAL | MSG_DONTWAIT) < 0) return true;
  }
  return false;
}

}  // namespace preface::server
