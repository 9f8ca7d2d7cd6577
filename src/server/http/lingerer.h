// Closes answered connections gracefully off the serving threads.
//
// A connection refused before its request was read (429 per client, 408 past its deadline) is answered with
// Connection: close and its sending side shut down; it must then stay open a little, reading and discarding what
// the client still sends, so that the close sends a FIN and not a reset that could destroy the answer in flight.
// Waiting for that on the thread that answered costs the thread up to the linger time per refusal, which lets a
// flood of refused connections (slowloris from one address) hold every thread and every admission slot. The
// Lingerer does the waiting for all of them on one thread: adopt() takes the socket and returns at once; the
// socket is closed when the client closes its side, after `linger` at the latest, or at destruction.
//
// Bounded: at most kMaxSockets sockets linger at once; adopt() beyond that closes the socket at once (the answer
// may then be lost to a reset, the server stays responsive). Each socket's discarded input is capped at
// kMaxDrainBytes. Thread-safe.
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <thread>
#include <vector>

namespace preface::server {

class Lingerer {
 public:
  static constexpr size_t kMaxSockets = 4096;
  static constexpr size_t kMaxDrainBytes = 1 << 20;

  explicit Lingerer(std::chrono::milliseconds linger);
  ~Lingerer();  // closes every socket still lingering
  Lingerer(const Lingerer&) = delete;
  Lingerer& operator=(const Lingerer&) = delete;

  // Takes ownership of `fd` (already answered, its sending side shut down).
  void adopt(int fd);
  size_t n_lingering() const;

 private:
  struct Entry {
    int fd;
    std::chrono::steady_clock::time_point until;
    size_t drained;
  };
  void loop();

  const std::chrono::milliseconds linger_;
  mutable std::mutex mu_;
  std::condition_variable cv_;  // the loop: a first socket or stop
  std::vector<Entry> incoming_;  // adopted, not yet polled by the loop
  size_t n_ = 0;                 // incoming_ + the loop's own
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace preface::server
