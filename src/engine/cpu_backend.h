// The host backend: model::Model's forward pass on a thread pool, over KV storage in host memory.
#pragma once
#include <cstdint>
#include <memory>

#include "engine/backend.h"
#include "kv/kv_storage.h"
#include "model/model.h"
#include "util/thread_pool.h"

namespace preface::engine {

class CpuBackend final : public Backend {
 public:
  // The model must outlive the backend. Allocates n_blocks KV blocks of block_size tokens now, and n_state_slots
  // recurrent states per State layer (>= 1 when the model has such layers); throws preface::Error when the type
  // cannot store the model's heads or the allocation fails. n_threads <= 0: hardware.
  // n_window_blocks > 0: the sliding-window layers get a pool of their own of that many blocks (the layout must
  // can_split_windows; kv::KvStorage).
  CpuBackend(model::Model& model, const kernels::KvFormat& kv_type, int32_t block_size, int32_t n_blocks, int32_t n_threads,
             int32_t n_state_slots = 0, int32_t n_window_blocks = 0);

  const model::Config& config() const override { return model_.config(); }
  const model::MemoryLayout& memory() const override { return model_.memory(); }
  const std::string& fingerprint() const override { return model_.fingerprint(); }
  int32_t max_batch_tokens() const override { return model_.max_batch_tokens(); }
  kernels::KvFormat kv_format() const override { return storage_.format(); }
  int32_t block_size() const override { return storage_.block_size(); }
  int32_t n_kv_blocks() const override { return storage_.n_blocks(); }
  size_t kv_bytes() const override { return storage_.size_bytes(); }
  int32_t n_state_slots() const override { return storage_.n_state_slots(); }
  size_t open_key_floats() const override { return storage_.view().open_key_floats(); }
  int32_t n_window_blocks() const override { return storage_.n_window_blocks(); }

  void forward(const model::ForwardBatch& batch, float* logits) override;
  void copy_block_rows(int32_t src_block, int32_t dst_block, int32_t n_rows) override;
  size_t block_bytes() const override { return storage_.block_bytes(); }
  void read_block(int32_t block, std::span<uint8_t> out) const override { storage_.read_block(block, out); }
  void write_block(int32_t block, std::span<const uint8_t> in) override { storage_.write_block(block, in); }
  size_t state_bytes() const override { return storage_.state_bytes(); }
  void read_state(int32_t slot, std::span<uint8_t> out) const override { storage_.read_state(slot, out); }
  void write_state(int32_t slot, std::span<const uint8_t> in) override { storage_.write_state(slot, in); }

 private:
  model::Model& model_;
  ThreadPool threads_;
  kv::KvStorage storage_;
};

// K and V bytes of one token over all paged layers (model::MemoryLayout::paged_bytes_per_token). Throws
// preface::Error when the type cannot store the model's heads.
uint64_t kv_bytes_per_token(const model::MemoryLayout& memory, const kernels::KvFormat& type);

// KV blocks of block_size tokens that fit in budget_bytes for this layout and type. Throws preface::Error when the
// type cannot store the model's heads or not even one block fits.
int32_t kv_blocks_for_budget(const model::MemoryLayout& memory, const kernels::KvFormat& type, int32_t block_size,
                             uint64_t budget_bytes);

// The split of a budget between the main pool and the sliding-window layers' own pool (kv/window_pool.h). Each
// running sequence needs at most model::window_reserve_blocks window blocks at once, plus the step's prefill chunk; the window pool gets twice what max_running sequences need
// (the second half keeps given-back blocks cached for hits), unless that is no less than an equal split, which is
// then taken (the bytes of today's single pool). The main pool gets the rest of the budget.
struct KvPools {
  int32_t n_blocks = 0;         // main pool
  int32_t n_window_blocks = 0;  // 0: no window pool
};
// The window pool's blocks when it is not an equal split: twice what max_running sequences and one step's chunk
// hold at once.
uint64_t window_pool_blocks(const model::MemoryLayout& memory, int32_t block_size, int32_t max_running,
                            int32_t max_batch_tokens);
KvPools kv_pools_for_budget(const model::MemoryLayout& memory, const kernels::KvFormat& type, int32_t block_size,
                            uint64_t budget_bytes, int32_t max_running, int32_t max_batch_tokens);

}  // namespace preface::engine
