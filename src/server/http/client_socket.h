// The connection of the request a handler is serving, to notice a client that went away while a non-streamed
// generation runs (a streamed one notices at its next write). httplib 0.11 gives handlers no socket, so the
// descriptor is found among the process's open files by its two endpoints (local and remote address and port,
// unique for a TCP connection); it stays valid while the handler runs on the connection's thread.
#pragma once
#include <httplib.h>

namespace preface::server {

class ClientSocket {
 public:
  // The request's socket, or an empty one (gone() is then always false) when it cannot be found.
  static ClientSocket of(const httplib::Request& req);

  // True once the client closed or reset the connection: a non-blocking poll that never reads request bytes.
  // A client that only shut down its sending side counts as gone, as in uvicorn and nginx.
  bool gone() const;
  bool found() const { return fd_ >= 0; }

 private:
  explicit ClientSocket(int fd) : fd_(fd) {}
  int fd_ = -1;
};

}  // namespace preface::server
