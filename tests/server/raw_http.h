// Raw-socket HTTP/1.1 for tests that need what a client library hides: the source address, a request sent in
// parts, the bytes of the answer.
#pragma once
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <string>

namespace preface::test {

// A TCP connection from `source` (any 127.x address) to 127.0.0.1:port; -1 when it fails.
inline int connect_from(const char* source, int port, int timeout_s = 10) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  timeval tv{timeout_s, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  sockaddr_in src{};
  src.sin_family = AF_INET;
  ::inet_pton(AF_INET, source, &src.sin_addr);
  sockaddr_in dst{};
  dst.sin_family = AF_INET;
  dst.sin_port = htons(static_cast<uint16_t>(port));
  dst.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&src), sizeof src) != 0 ||
      ::connect(fd, reinterpret_cast<sockaddr*>(&dst), sizeof dst) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

inline bool send_all(int fd, const std::string& s) {
  return ::send(fd, s.data(), s.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(s.size());
}

// Everything the server sends until it closes the connection (or the receive timeout passes).
inline std::string read_to_close(int fd) {
  std::string out;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return out;
    out.append(buf, static_cast<size_t>(n));
  }
}

// The status of the final response (1xx interim responses skipped), or -1.
inline int final_status(const std::string& response) {
  size_t pos = 0;
  while (response.compare(pos, 5, "HTTP/") == 0 && response.size() >= pos + 12) {
    const int status = std::stoi(response.substr(pos + 9, 3));
    if (status >= 200) return status;
    const size_t end = response.find("\r\n\r\n", pos);
    if (end == std::string::npos) return -1;
    pos = end + 4;
  }
  return -1;
}

inline std::string request(const std::string& method, const std::string& path, const std::string& body = "") {
  std::string r = method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n";
  if (!body.empty()) r += "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  return r + "\r\n" + body;
}

}  // namespace preface::test
