// The HTTP server's task queue (httplib::TaskQueue): caps the connections it serves at once (--max-connections).
//
// httplib 0.11 (Debian 12) accepts on one thread and hands every connection, as an opaque closure that owns the
// socket, to Server::new_task_queue's queue; its own ThreadPool queues them without bound. The closure hides the
// socket, so a connection cannot be closed unserved; instead:
//
//   admitted  fewer than max_connections connections are admitted (being served or waiting for one of the
//             n_threads workers): the connection is admitted and served normally.
//   refused   otherwise it goes to one of kRefuserThreads refuser threads, where the server's pre-routing handler
//             (is_refuser_thread() is true there) answers every request with 503 + Retry-After + Connection:
//             close without running a route or reading a body. At most kMaxPendingRefusals refused connections
//             wait for a refuser; beyond that enqueue() blocks the accept thread, so further connections wait in
//             the kernel's listen backlog (bounded) instead of in memory.
//
// Thread-safe; shutdown() serves (or refuses) what is queued and joins every thread.
#pragma once
#include <httplib.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace preface::server {

class ConnectionGate : public httplib::TaskQueue {
 public:
  static constexpr int kRefuserThreads = 2;
  static constexpr size_t kMaxPendingRefusals = 256;

  // n_threads >= 1 workers; max_connections >= 1 admitted at once.
  ConnectionGate(int32_t n_threads, int32_t max_connections);
  ~ConnectionGate() override;
  ConnectionGate(const ConnectionGate&) = delete;
  ConnectionGate& operator=(const ConnectionGate&) = delete;

  void enqueue(std::function<void()> fn) override;
  void shutdown() override;

  // True on a refuser thread: the connection being processed here was refused.
  bool is_refuser_thread() const;
  int32_t n_admitted() const;
  int64_t n_refused() const;  // connections refused so far

 private:
  void worker_loop();
  void refuser_loop();

  const int32_t max_connections_;
  mutable std::mutex mu_;
  std::condition_variable work_cv_;     // workers: a job or shutdown
  std::condition_variable refuse_cv_;   // refusers: a refusal or shutdown
  std::condition_variable space_cv_;    // the accept thread: room among pending refusals
  std::deque<std::function<void()>> jobs_;      // admitted, waiting for a worker
  std::deque<std::function<void()>> refusals_;  // refused, waiting for a refuser (<= kMaxPendingRefusals)
  int32_t n_admitted_ = 0;                      // jobs_ + being served
  int64_t n_refused_ = 0;
  bool shutdown_ = false;
  std::vector<std::thread> workers_;
  std::vector<std::thread> refusers_;
  std::vector<std::thread::id> refuser_ids_;  // fixed after construction (read by is_refuser_thread)
};

}  // namespace preface::server
