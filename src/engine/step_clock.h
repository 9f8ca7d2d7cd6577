// How long the engine's current step has been running, readable from any thread without a lock (a liveness probe
// reads it while the engine thread may be stuck inside the step). 0 between steps.
#pragma once
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>

namespace preface::engine {

class StepClock {
 public:
  // Marks a step as running while it lives.
  class Scope {
   public:
    explicit Scope(StepClock& clock) : clock_(clock) { clock_.began_ns_.store(std::max<int64_t>(now_ns(), 1)); }
    ~Scope() { clock_.began_ns_.store(0); }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    StepClock& clock_;
  };

  double running_seconds() const {
    const int64_t began = began_ns_.load();
    return began == 0 ? 0.0 : static_cast<double>(std::max<int64_t>(now_ns() - began, 0)) * 1e-9;
  }

 private:
  static int64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  std::atomic<int64_t> began_ns_{0};  // steady_clock ns when the running step began; 0 between steps
};

}  // namespace preface::engine
