#include "engine/cpu_backend.h"

#include <algorithm>
#include <string>

#include "util/error.h"

namespace preface::engine {

uint64_t kv_bytes_per_token(const model::MemoryLayout& memory, kernels::KvType type) {
  memory.check_type_fits(type);  // before sizing: a refused type's row size means nothing
  return memory.paged_bytes_per_token(type);
}

int32_t kv_blocks_for_budget(const model::MemoryLayout& memory, kernels::KvType type, int32_t block_size,
                             uint64_t budget) {
  const uint64_t per_block = kv_bytes_per_token(memory, type) * static_cast<uint64_t>(block_size);
  const uint64_t n = budget / per_block;
  if (n < 1) {
    throw Error("KV cache budget of " + std::to_string(budget) + " bytes holds no block (one block of " +
                std::to_string(block_size) + " tokens needs " + std::to_string(per_block) + " bytes)");
  }
  return static_cast<int32_t>(std::min<uint64_t>(n, 1u << 24));
}

CpuBackend::CpuBackend(model::Model& model, kernels::KvType kv_type, int32_t block_size, int32_t n_blocks,
                       int32_t n_threads, int32_t n_state_slots)
    : model_(model),
      threads_(n_threads > 0 ? n_threads : ThreadPool::hardware_threads()),
      storage_(model.memory(), kv_type, block_size, n_blocks, n_state_slots) {}

void CpuBackend::forward(const model::ForwardBatch& batch, float* logits) {
  model_.forward(batch, storage_.view(), threads_, logits);
}

void CpuBackend::copy_block_rows(int32_t src_block, int32_t dst_block, int32_t n_rows) {
  storage_.copy_rows(src_block, dst_block, n_rows);
}

}  // namespace preface::engine
