#include "engine/cpu_backend.h"

#include <algorithm>
#include <string>

#include "model/capacity.h"
#include "util/error.h"

namespace preface::engine {

uint64_t kv_bytes_per_token(const model::MemoryLayout& memory, const kernels::KvFormat& type) {
  memory.check_type_fits(type);  // before sizing: a refused type's row size means nothing
  return memory.paged_bytes_per_token(type);
}

int32_t kv_blocks_for_budget(const model::MemoryLayout& memory, const kernels::KvFormat& type, int32_t block_size,
                             uint64_t budget) {
  const uint64_t per_block = kv_bytes_per_token(memory, type) * static_cast<uint64_t>(block_size);
  const uint64_t n = budget / per_block;
  if (n < 1) {
    throw Error("KV cache budget of " + std::to_string(budget) + " bytes holds no block (one block of " +
                std::to_string(block_size) + " tokens needs " + std::to_string(per_block) + " bytes)");
  }
  return static_cast<int32_t>(std::min<uint64_t>(n, 1u << 24));
}

uint64_t window_pool_blocks(const model::MemoryLayout& memory, int32_t block_size, int32_t max_running,
                            int32_t max_batch_tokens) {
  const uint64_t needed = static_cast<uint64_t>(std::max(max_running, 1)) *
                              static_cast<uint64_t>(model::window_reserve_blocks(memory.max_window(), block_size)) +
                          static_cast<uint64_t>((std::max(max_batch_tokens, 1) + block_size - 1) / block_size);
  return 2 * needed;
}

KvPools kv_pools_for_budget(const model::MemoryLayout& memory, const kernels::KvFormat& type, int32_t block_size,
                            uint64_t budget, int32_t max_running, int32_t max_batch_tokens) {
  const int32_t n_equal = kv_blocks_for_budget(memory, type, block_size, budget);
  if (!memory.can_split_windows()) return {n_equal, 0};
  const uint64_t window_block = memory.windowed_bytes_per_token(type) * static_cast<uint64_t>(block_size);
  const uint64_t main_block = kv_bytes_per_token(memory, type) * static_cast<uint64_t>(block_size) - window_block;
  const uint64_t n_window = window_pool_blocks(memory, block_size, max_running, max_batch_tokens);
  if (n_window >= static_cast<uint64_t>(n_equal)) return {n_equal, n_equal};
  const uint64_t n_main = (budget - n_window * window_block) / main_block;
  return {static_cast<int32_t>(std::min<uint64_t>(n_main, 1u << 24)), static_cast<int32_t>(n_window)};
}

CpuBackend::CpuBackend(model::Model& model, const kernels::KvFormat& kv_type, int32_t block_size, int32_t n_blocks,
                       int32_t n_threads, int32_t n_state_slots, int32_t n_window_blocks)
    : model_(model),
      threads_(n_threads > 0 ? n_threads : ThreadPool::hardware_threads()),
      storage_(model.memory(), kv_type, block_size, n_blocks, n_state_slots, n_window_blocks) {}

void CpuBackend::forward(const model::ForwardBatch& batch, float* logits) {
  model_.forward(batch, storage_.view(), threads_, logits);
}

void CpuBackend::copy_block_rows(int32_t src_block, int32_t dst_block, int32_t n_rows) {
  storage_.copy_rows(src_block, dst_block, n_rows);
}

}  // namespace preface::engine
