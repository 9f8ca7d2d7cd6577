#include "util/thread_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

#include "util/error.h"

namespace preface {
namespace {

// Runs one parallel_for and checks: every index in [0, n) visited exactly once, at most n_threads ranges, each
// non-empty, starting on a grain boundary and ending on one (or at n).
void check_cover(ThreadPool& pool, int64_t n, int64_t grain) {
  std::vector<std::atomic<int>> hits(static_cast<size_t>(n));  // [n]
  std::mutex mutex;
  std::vector<std::pair<int64_t, int64_t>> ranges;
  pool.parallel_for(
      n,
      [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
        std::lock_guard<std::mutex> lock(mutex);
        ranges.emplace_back(begin, end);
      },
      grain);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << "index " << i;
  EXPECT_LE(ranges.size(), static_cast<size_t>(pool.n_threads()));
  for (const auto& [begin, end] : ranges) {
    EXPECT_LT(begin, end);
    EXPECT_EQ(begin % grain, 0) << "n " << n << " grain " << grain;
    EXPECT_TRUE(end % grain == 0 || end == n) << "n " << n << " grain " << grain;
  }
}

TEST(ThreadPool, CoversEveryIndexOnce) {
  for (int n_threads : {1, 2, 3, 4, 7}) {
    ThreadPool pool(n_threads);
    EXPECT_EQ(pool.n_threads(), n_threads);
    for (int64_t n : {0, 1, 2, 3, 5, 15, 16, 17, 31, 100, 1000, 1023}) {
      for (int64_t grain : {1, 2, 3, 16, 64}) {
        SCOPED_TRACE("threads " + std::to_string(n_threads) + " n " + std::to_string(n) + " grain " +
                     std::to_string(grain));
        check_cover(pool, n, grain);
      }
    }
  }
}

TEST(ThreadPool, SplitsIntoOneBalancedRangePerThread) {
  ThreadPool pool(3);
  std::mutex mutex;
  std::vector<std::pair<int64_t, int64_t>> ranges;
  pool.parallel_for(
      300,
      [&](int64_t b, int64_t e) {
        std::lock_guard<std::mutex> lock(mutex);
        ranges.emplace_back(b, e);
      },
      10);
  std::sort(ranges.begin(), ranges.end());
  // 30 grain units over 3 chunks: 10 units (100 items) each.
  EXPECT_EQ(ranges, (std::vector<std::pair<int64_t, int64_t>>{{0, 100}, {100, 200}, {200, 300}}));
}

TEST(ThreadPool, RunsRangesConcurrently) {
  // Each range waits until the other has started: completes only if two threads run them at the same time.
  ThreadPool pool(2);
  std::atomic<int> started{0};
  pool.parallel_for(2, [&](int64_t, int64_t) {
    started.fetch_add(1);
    while (started.load() < 2) std::this_thread::yield();
  });
  EXPECT_EQ(started.load(), 2);
}

TEST(ThreadPool, NonPositiveGrainActsAsOne) {
  ThreadPool pool(2);
  check_cover(pool, 10, 1);
  std::atomic<int64_t> total{0};
  pool.parallel_for(10, [&](int64_t b, int64_t e) { total += e - b; }, 0);
  pool.parallel_for(10, [&](int64_t b, int64_t e) { total += e - b; }, -5);
  EXPECT_EQ(total.load(), 20);
}

TEST(ThreadPool, StressManySmallCalls) {
  ThreadPool pool(3);
  std::vector<int64_t> data(64, 0);  // [64]; each call adds 1 to every element
  for (int call = 0; call < 10000; ++call) {
    pool.parallel_for(
        64,
        [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) data[static_cast<size_t>(i)] += 1;
        },
        4);
  }
  for (int64_t v : data) ASSERT_EQ(v, 10000);
}

TEST(ThreadPool, WakesSleepingWorkers) {
  // Pauses longer than the spin budget make the workers block; each call must still complete and cover all.
  ThreadPool pool(3);
  for (int round = 0; round < 30; ++round) {
    std::this_thread::sleep_for(std::chrono::microseconds(round % 3 == 0 ? 2000 : 20 * round));
    check_cover(pool, 99, 3);
  }
}

TEST(ThreadPool, SlowChunkMakesCallerBlock) {
  // A worker chunk longer than the caller's spin budget: the caller waits on the condition variable.
  ThreadPool pool(2);
  const std::thread::id caller = std::this_thread::get_id();
  for (int round = 0; round < 5; ++round) {
    std::atomic<int64_t> total{0};
    pool.parallel_for(2, [&](int64_t b, int64_t e) {
      if (std::this_thread::get_id() != caller) std::this_thread::sleep_for(std::chrono::milliseconds(3));
      total += e - b;
    });
    EXPECT_EQ(total.load(), 2);
  }
}

TEST(ThreadPool, PropagatesExceptionsAndStaysUsable) {
  ThreadPool pool(3);
  for (int64_t bad : {0, 50, 99}) {  // the caller's chunk and workers' chunks
    EXPECT_THROW(pool.parallel_for(100,
                                   [&](int64_t b, int64_t e) {
                                     if (b <= bad && bad < e) throw std::runtime_error("chunk failed");
                                   }),
                 std::runtime_error);
    check_cover(pool, 100, 1);
  }
}

TEST(ThreadPool, NestedCallRunsInline) {
  ThreadPool pool(2);
  std::vector<std::atomic<int>> hits(100 * 10);  // [100][10]
  pool.parallel_for(100, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      pool.parallel_for(10, [&](int64_t jb, int64_t je) {
        for (int64_t j = jb; j < je; ++j) hits[static_cast<size_t>(i * 10 + j)].fetch_add(1);
      });
    }
  });
  for (const auto& h : hits) ASSERT_EQ(h.load(), 1);
}

TEST(ThreadPool, ConcurrentCallersBothComplete) {
  ThreadPool pool(2);
  auto hammer = [&pool] {
    for (int call = 0; call < 500; ++call) check_cover(pool, 37, 2);
  };
  std::thread other(hammer);
  hammer();
  other.join();
}

TEST(ThreadPool, RejectsNonPositiveThreadCount) {
  EXPECT_THROW(ThreadPool(0), Error);
  EXPECT_THROW(ThreadPool(-3), Error);
}

TEST(ThreadPool, HardwareThreadsIsPositive) { EXPECT_GE(ThreadPool::hardware_threads(), 1); }

}  // namespace
}  // namespace preface
