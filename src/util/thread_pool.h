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

  // Calls fn(begin, end) over disjoint contiguous ranges covering [0, n), one range per thread (ranges aligned
  // to `grain` items), and returns when all are done. Must not be called re-entrantly from inside fn.
  void parallel_for(int64_t n, const std::function<void(int64_t begin, int64_t end)>& fn, int64_t grain = 1);

  // The number of hardware threads (>= 1).
  static int hardware_threads();

 private:
  struct Impl;
  Impl* impl_;
  int n_threads_;
};

}  // namespace preface
