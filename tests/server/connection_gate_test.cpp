// ConnectionGate (the HTTP server's task queue) on its own: at most max_connections tasks admitted (running or
// waiting for a worker), the rest run on refuser threads, every task runs exactly once, shutdown drains.
#include "server/http/connection_gate.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace preface::server {
namespace {

// A latch the test opens to let blocked tasks finish.
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;
  void wait() {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return open; });
  }
  void release() {
    {
      std::lock_guard lock(mu);
      open = true;
    }
    cv.notify_all();
  }
};

TEST(ConnectionGate, AdmitsUpToTheCapAndRefusesTheRestOnRefuserThreads) {
  constexpr int kThreads = 2, kCap = 3, kExtra = 5;
  ConnectionGate gate(kThreads, kCap);
  Gate hold;
  std::atomic<int> n_admitted_ran{0}, n_refused_ran{0}, n_wrong_thread{0};
  for (int i = 0; i < kCap; ++i) {
    gate.enqueue([&] {
      if (gate.is_refuser_thread()) ++n_wrong_thread;
      hold.wait();  // a connection being served
      ++n_admitted_ran;
    });
  }
  EXPECT_EQ(gate.n_admitted(), kCap);  // 2 running, 1 waiting for a worker
  for (int i = 0; i < kExtra; ++i) {
    gate.enqueue([&] {
      if (!gate.is_refuser_thread()) ++n_wrong_thread;
      ++n_refused_ran;
    });
  }
  EXPECT_EQ(gate.n_refused(), kExtra);
  // Refused tasks run at once although every admitted slot is still busy.
  for (int i = 0; i < 2000 && n_refused_ran.load() < kExtra; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(n_refused_ran.load(), kExtra);
  EXPECT_EQ(n_admitted_ran.load(), 0);
  EXPECT_FALSE(gate.is_refuser_thread());  // the test's own thread

  hold.release();
  for (int i = 0; i < 2000 && gate.n_admitted() > 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(gate.n_admitted(), 0);
  EXPECT_EQ(n_admitted_ran.load(), kCap);
  // Slots freed: the next task is admitted again.
  std::atomic<bool> ran_admitted{false};
  gate.enqueue([&] { ran_admitted = !gate.is_refuser_thread(); });
  gate.shutdown();  // runs what is queued, then joins
  EXPECT_TRUE(ran_admitted.load());
  EXPECT_EQ(gate.n_refused(), kExtra);
  EXPECT_EQ(n_wrong_thread.load(), 0);
  gate.shutdown();  // idempotent
}

TEST(ConnectionGate, ShutdownRunsEveryQueuedTask) {
  std::atomic<int> n_ran{0};
  {
    ConnectionGate gate(1, 4);
    for (int i = 0; i < 20; ++i) gate.enqueue([&] { ++n_ran; });  // 4 admitted at a time, the rest refused
  }  // the destructor shuts down
  EXPECT_EQ(n_ran.load(), 20);
}

}  // namespace
}  // namespace preface::server
