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
  // The end of the client's stream (FIN) alone is ambiguous: the client closed the socket, or only shut down
  // its sending side and still reads (a half-close). At the first FIN of an HTTP/1.1 request an interim
  // "100 Continue" is written, which every HTTP/1.1 client must skip: a closed socket answers it with a reset,
  // seen at a later call; a half-closed client reads it and then its answer. (HTTP/1.0 clients may not be
  // sent a 1xx: there a FIN counts as gone.)
  bool gone();
  bool found() const { return fd_ >= 0; }

 private:
  ClientSocket(int fd, bool may_probe) : fd_(fd), may_probe_(may_probe) {}
  int fd_ = -1;
  bool may_probe_ = false;  // HTTP/1.1: an interim response may be written
  bool probed_ = false;
};

}  // namespace preface::server
