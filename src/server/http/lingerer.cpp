#include "server/http/lingerer.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

namespace preface::server {

using Clock = std::chrono::steady_clock;

// New sockets are picked up at least this often while others linger (the loop polls in slices this long).
constexpr int kSliceMs = 10;

Lingerer::Lingerer(std::chrono::milliseconds linger) : linger_(linger), thread_([this] { loop(); }) {}

Lingerer::~Lingerer() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_one();
  thread_.join();
}

void Lingerer::adopt(int fd) {
  {
    std::lock_guard lock(mu_);
    if (!stop_ && n_ < kMaxSockets) {
      incoming_.push_back({fd, Clock::now() + linger_, 0});
      ++n_;
      cv_.notify_one();
      return;
    }
  }
  ::close(fd);
}

size_t Lingerer::n_lingering() const {
  std::lock_guard lock(mu_);
  return n_;
}

void Lingerer::loop() {
  std::vector<Entry> own;
  std::vector<pollfd> fds;
  for (;;) {
    size_t n_closed = 0;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !incoming_.empty() || !own.empty(); });
      own.insert(own.end(), incoming_.begin(), incoming_.end());
      incoming_.clear();
      if (stop_) {
        for (const Entry& e : own) ::close(e.fd);
        n_ = 0;
        return;
      }
    }
    fds.clear();
    for (const Entry& e : own) fds.push_back({e.fd, POLLIN, 0});
    // On a failed poll (EINTR) no revents are set: the slice passes and deadlines still close sockets.
    (void)::poll(fds.data(), fds.size(), kSliceMs);
    const auto now = Clock::now();
    size_t kept = 0;
    for (size_t i = 0; i < own.size(); ++i) {
      Entry& e = own[i];
      bool done = now >= e.until;
      if (!done && (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
        char sink[4096];
        const ssize_t got = ::recv(e.fd, sink, sizeof sink, MSG_DONTWAIT);
        if (got > 0) e.drained += static_cast<size_t>(got);
        done = got == 0 || (got < 0 && errno != EAGAIN && errno != EINTR) || e.drained >= kMaxDrainBytes;
      }
      if (done) {
        ::close(e.fd);
        ++n_closed;
      } else {
        own[kept++] = e;
      }
    }
    own.resize(kept);
    if (n_closed > 0) {
      std::lock_guard lock(mu_);
      n_ -= n_closed;
    }
  }
}

}  // namespace preface::server
