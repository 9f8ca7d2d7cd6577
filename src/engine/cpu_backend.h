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
  CpuBackend(model::Model& model, kernels::KvType kv_type, int32_t block_size, int32_t n_blocks, int32_t n_threads,
             int32_t n_state_slots = 0);

  const model::Config& config() const override { return model_.config(); }
  const model::MemoryLayout& memory() const override { return model_.memory(); }
  const std::string& fingerprint() const override { return model_.fingerprint(); }
  int32_t max_batch_tokens() const override { return model_.max_batch_tokens(); }
  kernels::KvType kv_type() const override { return storage_.type(); }
  int32_t block_size() const override { return storage_.block_size(); }
  int32_t n_kv_blocks() const override { return storage_.n_blocks(); }
  size_t kv_bytes() const override { return storage_.size_bytes(); }
  int32_t n_state_slots() const override { return storage_.n_state_slots(); }

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
uint64_t kv_bytes_per_token(const model::MemoryLayout& memory, kernels::KvType type);

// KV blocks of block_size tokens that fit in budget_bytes for this layout and type. Throws preface::Error when the
// type cannot store the model's heads or not even one block fits.
int32_t kv_blocks_for_budget(const model::MemoryLayout& memory, kernels::KvType type, int32_t block_size,
                             uint64_t budget_bytes);

}  // namespace preface::engine
