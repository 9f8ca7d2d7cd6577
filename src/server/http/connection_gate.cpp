#include "server/http/connection_gate.h"

#include <algorithm>

namespace preface::server {

ConnectionGate::ConnectionGate(int32_t n_threads, int32_t max_connections)
    : max_connections_(std::max<int32_t>(max_connections, 1)) {
  const int32_t n_workers = std::max<int32_t>(n_threads, 1);
  try {
    workers_.reserve(static_cast<size_t>(n_workers));
    for (int32_t i = 0; i < n_workers; ++i) workers_.emplace_back([this] { worker_loop(); });
    refusers_.reserve(kRefuserThreads);
    for (int i = 0; i < kRefuserThreads; ++i) {
      refusers_.emplace_back([this] { refuser_loop(); });
      refuser_ids_.push_back(refusers_.back().get_id());
    }
  } catch (...) {  // thread creation failed: stop the ones already running
    shutdown();
    throw;
  }
}

ConnectionGate::~ConnectionGate() { shutdown(); }

void ConnectionGate::enqueue(std::function<void()> fn) {
  std::unique_lock lock(mu_);
  if (n_admitted_ < max_connections_) {
    ++n_admitted_;
    jobs_.push_back(std::move(fn));
    lock.unlock();
    work_cv_.notify_one();
    return;
  }
  // Over the cap. The closure owns the socket, so it must run (to close it) even after shutdown.
  space_cv_.wait(lock, [&] { return refusals_.size() < kMaxPendingRefusals || shutdown_; });
  ++n_refused_;
  refusals_.push_back(std::move(fn));
  lock.unlock();
  refuse_cv_.notify_one();
}

void ConnectionGate::worker_loop() {
  for (;;) {
    std::function<void()> fn;
    {
      std::unique_lock lock(mu_);
      work_cv_.wait(lock, [&] { return !jobs_.empty() || shutdown_; });
      if (jobs_.empty()) return;  // shutdown, nothing left
      fn = std::move(jobs_.front());
      jobs_.pop_front();
    }
    fn();  // serves the connection until it closes
    std::lock_guard lock(mu_);
    --n_admitted_;
  }
}

void ConnectionGate::refuser_loop() {
  for (;;) {
    std::function<void()> fn;
    {
      std::unique_lock lock(mu_);
      refuse_cv_.wait(lock, [&] { return !refusals_.empty() || shutdown_; });
      if (refusals_.empty()) return;
      fn = std::move(refusals_.front());
      refusals_.pop_front();
    }
    space_cv_.notify_one();
    fn();  // the pre-routing handler answers 503 on this thread
  }
}

void ConnectionGate::shutdown() {
  {
    std::lock_guard lock(mu_);
    shutdown_ = true;
  }
  work_cv_.notify_all();
  refuse_cv_.notify_all();
  space_cv_.notify_all();
  for (std::thread& t : workers_) {
    if (t.joinable()) t.join();
  }
  for (std::thread& t : refusers_) {
    if (t.joinable()) t.join();
  }
}

bool ConnectionGate::is_refuser_thread() const {
  const std::thread::id self = std::this_thread::get_id();
  return std::find(refuser_ids_.begin(), refuser_ids_.end(), self) != refuser_ids_.end();
}

int32_t ConnectionGate::n_admitted() const {
  std::lock_guard lock(mu_);
  return n_admitted_;
}

int64_t ConnectionGate::n_refused() const {
  std::lock_guard lock(mu_);
  return n_refused_;
}

}  // namespace preface::server
