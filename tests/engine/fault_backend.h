// A backend that fails on purpose: the CPU backend, except that a forward pass over a batch holding a token at
// position `fault_pos` (only a prompt that long reaches it), or the block copy after copy_fault is set, throws;
// and every forward pass takes at least `forward_delay` (a slow machine, for disconnect tests). For the engine's and server's exception boundary tests.
#pragma once
#include <atomic>
#include <chrono>
#include <thread>
#include <memory>

#include "engine/cpu_backend.h"
#include "engine/engine.h"
#include "util/error.h"

namespace preface::test {

class FaultBackend final : public engine::Backend {
 public:
  FaultBackend(model::Model& model, const engine::EngineConfig& c, int32_t fault_pos)
      : inner_(model, c.kv_format, c.block_size,
               engine::kv_blocks_for_budget(model.memory(), c.kv_format, c.block_size, c.kv_cache_bytes), c.n_threads,
               model.memory().has_state() ? std::max(c.max_running, 1) : 0),
        fault_pos_(fault_pos) {}

  const model::Config& config() const override { return inner_.config(); }
  const model::MemoryLayout& memory() const override { return inner_.memory(); }
  const std::string& fingerprint() const override { return inner_.fingerprint(); }
  int32_t max_batch_tokens() const override { return inner_.max_batch_tokens(); }
  kernels::KvFormat kv_format() const override { return inner_.kv_format(); }
  int32_t block_size() const override { return inner_.block_size(); }
  int32_t n_kv_blocks() const override { return inner_.n_kv_blocks(); }
  size_t kv_bytes() const override { return inner_.kv_bytes(); }
  int32_t n_state_slots() const override { return inner_.n_state_slots(); }

  void forward(const model::ForwardBatch& batch, float* logits) override {
    for (int32_t pos : batch.pos) {
      if (pos == fault_pos_) {
        ++n_faults;
        throw Error("injected fault: position " + std::to_string(pos) + " in the batch");
      }
    }
    if (forward_delay.count() > 0) std::this_thread::sleep_for(forward_delay);
    ++n_forwards;
    inner_.forward(batch, logits);
  }
  void copy_block_rows(int32_t src, int32_t dst, int32_t n_rows) override {
    if (copy_fault.exchange(false)) {
      ++n_faults;
      throw Error("injected fault: block copy");
    }
    inner_.copy_block_rows(src, dst, n_rows);
  }
  size_t block_bytes() const override { return inner_.block_bytes(); }
  void read_block(int32_t block, std::span<uint8_t> out) const override { inner_.read_block(block, out); }
  void write_block(int32_t block, std::span<const uint8_t> in) override { inner_.write_block(block, in); }

  std::atomic<int> n_faults{0};
  std::atomic<bool> copy_fault{false};  // the next block copy throws
  std::chrono::milliseconds forward_delay{0};
  std::atomic<int> n_forwards{0};

 private:
  engine::CpuBackend inner_;
  int32_t fault_pos_;
};

}  // namespace preface::test
