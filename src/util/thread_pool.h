// A fixed pool of worker threads for data-parallel loops. Work is split over output rows only, in contiguous
// chunks, so every output element is computed by one thread with the same code whatever the thread count.
#pragma once
#include <cstdint>
#include <functional>

namespace preface {

class ThreadPool {
 public:
  // n_threads >= 1 counts the calling thread: ThreadPool(1) runs everything on the caller.
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int n_threads() const { return n_threads_; }

  // Calls fn(begin, end) over n_threads() disjoint contiguous ranges covering [0, n) (ranges aligned to `grain`
  // items; empty ones are skipped), concurrently, and returns when all are done. Range boundaries depend only
  // on n, grain and n_threads(); which thread runs which range does not matter (the caller takes ranges a late
  // worker has not started). An exception thrown by fn is rethrown here after all ranges finish. Must not be
  // called re-entrantly from inside fn (such a call, or one racing from another thread, runs fn(0, n) inline).
  void parallel_for(int64_t n, const std::function<void(int64_t begin, int64_t end)>& fn, int64_t grain = 1);

  // The number of hardware threads (>= 1).
  static int hardware_threads();

 private:
  struct Impl;
  Impl* impl_;
  int n_threads_;
};

}  // namespace preface
