#include "util/thread_pool.h"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "util/error.h"

namespace preface {

namespace {

// How long an idle worker (or the waiting caller) polls before blocking on a condition variable. Decode issues
// a parallel_for every few microseconds, so a short poll avoids a futex sleep/wake pair per call; past this
// budget the thread blocks so that idle pools cost no CPU on a machine shared with other processes.
constexpr auto kSpinBudget = std::chrono::microseconds(50);
constexpr int kPausesPerClockCheck = 32;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#else
  std::this_thread::yield();
#endif
}

// Polls `done` until it returns true or kSpinBudget has elapsed; returns the last result.
template <typename Pred>
bool spin_until(Pred done) {
  if (done()) return true;
  const auto deadline = std::chrono::steady_clock::now() + kSpinBudget;
  for (;;) {
    for (int i = 0; i < kPausesPerClockCheck; ++i) {
      cpu_relax();
      if (done()) return true;
    }
    if (std::chrono::steady_clock::now() >= deadline) return done();
  }
}

}  // namespace

// Protocol. A job is split into n_chunks fixed ranges (see run_chunk). The caller publishes the job fields, resets
// n_done and stores `ticket` = (generation + 1) << 32 | 0. Every thread, the caller included, then claims chunk
// indices by CAS on `ticket` (the low 32 bits count claimed chunks) and runs them; the caller returns once
// n_done == n_chunks. Claiming rather than assigning chunks means a worker that is descheduled or asleep never
// stalls the caller: whoever is running takes the remaining chunks. Chunk boundaries do not depend on who runs
// them, so results do not either.
//
// A worker only reads the job fields after claiming a chunk of the current generation, and the caller does not
// return (and so cannot overwrite them) until that chunk is done. A worker holding a stale generation fails its
// CAS because the generation bits differ.
//
// Blocking: idle workers spin for kSpinBudget, then sleep on work_cv, announced through n_sleeping (seq_cst,
// Dekker-style against `ticket`), so the caller only locks and notifies when someone sleeps; the caller's wait
// for n_done works the same way with caller_sleeping / done_cv.
struct ThreadPool::Impl {
  explicit Impl(int n_threads) : n_chunks(n_threads) {}

  void worker_loop();
  // Claims and runs chunks of generation `gen` until none are left.
  void run_chunks(uint64_t gen);
  void run_chunk(int64_t chunk_id);
  void shutdown();  // stops and joins all workers
  void publish_and_wait(int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t grain);

  static uint64_t generation_of(uint64_t ticket) { return ticket >> 32; }
  static int64_t claimed_of(uint64_t ticket) { return static_cast<int64_t>(ticket & 0xffffffffu); }

  const int64_t n_chunks;  // workers + the caller
  std::vector<std::thread> workers;

  std::mutex mutex;
  std::condition_variable work_cv;  // workers wait here for a new generation (or stop)
  std::condition_variable done_cv;  // the caller waits here for n_done == n_chunks

  std::atomic<uint64_t> ticket{0};  // generation << 32 | chunks claimed
  std::atomic<int64_t> n_done{0};   // chunks finished in the current generation
  std::atomic<int> n_sleeping{0};
  std::atomic<bool> caller_sleeping{false};
  std::atomic<bool> stop{false};
  std::atomic<bool> busy{false};  // a parallel_for is in flight (guards against re-entrant/concurrent use)

  // The current job; written by the caller before `ticket` is published, read after claiming a chunk.
  const std::function<void(int64_t, int64_t)>* fn = nullptr;
  int64_t n = 0;
  int64_t grain = 1;

  // First exception thrown by a chunk of the current job; rethrown by the caller.
  std::mutex error_mutex;
  std::exception_ptr error;
};

void ThreadPool::Impl::run_chunk(int64_t chunk_id) {
  // Chunks split the ceil(n / grain) grain-units as evenly as possible, in order: the first `extra` chunks
  // take one unit more than the rest.
  const int64_t units = n / grain + (n % grain != 0);
  const int64_t per_chunk = units / n_chunks;
  const int64_t extra = units % n_chunks;
  const int64_t u0 = chunk_id * per_chunk + std::min<int64_t>(chunk_id, extra);
  const int64_t u1 = u0 + per_chunk + (chunk_id < extra);
  if (u0 >= u1) return;
  const int64_t begin = u0 * grain;                     // u0 < units, so begin < n
  const int64_t end = u1 > n / grain ? n : u1 * grain;  // no overflow near INT64_MAX
  try {
    (*fn)(begin, end);
  } catch (...) {
    std::lock_guard<std::mutex> lock(error_mutex);
    if (!error) error = std::current_exception();
  }
}

void ThreadPool::Impl::run_chunks(uint64_t gen) {
  uint64_t t = ticket.load(std::memory_order_acquire);
  for (;;) {
    if (generation_of(t) != gen || claimed_of(t) >= n_chunks) return;
    if (!ticket.compare_exchange_weak(t, t + 1, std::memory_order_acq_rel, std::memory_order_acquire)) continue;
    run_chunk(claimed_of(t));
    if (n_done.fetch_add(1, std::memory_order_seq_cst) + 1 == n_chunks &&
        caller_sleeping.load(std::memory_order_seq_cst)) {
      std::lock_guard<std::mutex> lock(mutex);
      done_cv.notify_one();
    }
    t = ticket.load(std::memory_order_acquire);
  }
}

void ThreadPool::Impl::worker_loop() {
  uint64_t seen = 0;
  for (;;) {
    const auto has_news = [&] {
      return generation_of(ticket.load(std::memory_order_seq_cst)) != seen || stop.load(std::memory_order_seq_cst);
    };
    if (!spin_until(has_news)) {
      std::unique_lock<std::mutex> lock(mutex);
      n_sleeping.fetch_add(1, std::memory_order_seq_cst);
      work_cv.wait(lock, has_news);
      n_sleeping.fetch_sub(1, std::memory_order_seq_cst);
    }
    if (stop.load(std::memory_order_seq_cst)) return;
    seen = generation_of(ticket.load(std::memory_order_acquire));
    run_chunks(seen);
  }
}

void ThreadPool::Impl::publish_and_wait(int64_t n_items, const std::function<void(int64_t, int64_t)>& job,
                                        int64_t job_grain) {
  fn = &job;
  n = n_items;
  grain = job_grain;
  error = nullptr;
  n_done.store(0, std::memory_order_relaxed);
  const uint64_t gen = generation_of(ticket.load(std::memory_order_relaxed)) + 1;
  ticket.store(gen << 32, std::memory_order_seq_cst);
  if (n_sleeping.load(std::memory_order_seq_cst) > 0) {
    std::lock_guard<std::mutex> lock(mutex);
    work_cv.notify_all();
  }

  run_chunks(gen);

  const auto all_done = [&] { return n_done.load(std::memory_order_seq_cst) == n_chunks; };
  if (!spin_until(all_done)) {
    std::unique_lock<std::mutex> lock(mutex);
    caller_sleeping.store(true, std::memory_order_seq_cst);
    done_cv.wait(lock, all_done);
    caller_sleeping.store(false, std::memory_order_seq_cst);
  }
  fn = nullptr;
}

void ThreadPool::Impl::shutdown() {
  {
    std::lock_guard<std::mutex> lock(mutex);
    stop.store(true, std::memory_order_seq_cst);
  }
  work_cv.notify_all();
  for (std::thread& t : workers) t.join();
  workers.clear();
}

ThreadPool::ThreadPool(int n_threads) : impl_(nullptr), n_threads_(n_threads) {
  if (n_threads < 1) throw Error("thread count must be >= 1, got " + std::to_string(n_threads));
  impl_ = new Impl(n_threads);
  try {
    impl_->workers.reserve(static_cast<size_t>(n_threads - 1));
    for (int i = 1; i < n_threads; ++i) impl_->workers.emplace_back([impl = impl_] { impl->worker_loop(); });
  } catch (...) {  // thread creation failed: stop the ones already running
    impl_->shutdown();
    delete impl_;
    throw;
  }
}

ThreadPool::~ThreadPool() {
  impl_->shutdown();
  delete impl_;
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t grain) {
  if (n <= 0) return;
  if (grain < 1) grain = 1;
  // One chunk's worth of work (or no workers): no point waking anyone.
  if (impl_->workers.empty() || n <= grain) {
    fn(0, n);
    return;
  }
  // Re-entrant or concurrent use would corrupt the shared job slot; run such a call on its own thread instead.
  // The chunking never changes what is computed per item, so the result is the same.
  if (impl_->busy.exchange(true, std::memory_order_acquire)) {
    fn(0, n);
    return;
  }
  struct BusyReset {
    std::atomic<bool>& busy;
    ~BusyReset() { busy.store(false, std::memory_order_release); }
  } reset{impl_->busy};
  impl_->publish_and_wait(n, fn, grain);
  if (impl_->error) std::rethrow_exception(impl_->error);
}

int ThreadPool::hardware_threads() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    const int count = CPU_COUNT(&set);
    if (count > 0) return count;
  }
  const unsigned hw = std::thread::hardware_concurrency();
  return hw > 0 ? static_cast<int>(hw) : 1;
}

}  // namespace preface
