#include "model/attention.h"

#include <cmath>
#include <cstring>

#include "kernels/dot.h"
#include "kernels/ops.h"
#include "util/fp16.h"

namespace preface::model::detail {
namespace {

float dot_row(KvType type, const uint8_t* row, const float* x, size_t n) {
  switch (type) {
    case KvType::F32: return kernels::dot_f32(reinterpret_cast<const float*>(row), x, n);
    case KvType::F16: return kernels::dot_f16(reinterpret_cast<const uint16_t*>(row), x, n);
    case KvType::BF16: return kernels::dot_bf16(reinterpret_cast<const uint16_t*>(row), x, n);
  }
  return 0.0f;
}

void axpy_row(KvType type, float a, const uint8_t* row, float* y, size_t n) {
  switch (type) {
    case KvType::F32: kernels::axpy_f32(a, reinterpret_cast<const float*>(row), y, n); return;
    case KvType::F16: kernels::axpy_f16(a, reinterpret_cast<const uint16_t*>(row), y, n); return;
    case KvType::BF16: kernels::axpy_bf16(a, reinterpret_cast<const uint16_t*>(row), y, n); return;
  }
}

// x rounded to the precision of `type` (ggml converts the vector it multiplies with an F16/BF16 row to that
// type first; doing the same keeps the logits close to llama.cpp's).
float round_to(KvType type, float x) {
  switch (type) {
    case KvType::F32: return x;
    case KvType::F16: return f16_to_f32(f32_to_f16(x));
    case KvType::BF16: return bf16_to_f32(f32_to_bf16(x));
  }
  return x;
}

void write_row(KvType type, const float* x, uint8_t* dst, size_t n) {
  switch (type) {
    case KvType::F32: std::memcpy(dst, x, n * sizeof(float)); return;
    case KvType::F16: kernels::f32_to_f16_row(x, reinterpret_cast<uint16_t*>(dst), n); return;
    case KvType::BF16: kernels::f32_to_bf16_row(x, reinterpret_cast<uint16_t*>(dst), n); return;
  }
}

}  // namespace

void store_kv(const ForwardBatch& batch, const KvView& kv, int layer, const float* k, const float* v) {
  const size_t row = static_cast<size_t>(kv.row_values);
  for (size_t t = 0; t < batch.size(); ++t) {
    const int32_t pos = batch.pos[t];
    const std::vector<int32_t>& table = *batch.block_tables[static_cast<size_t>(batch.seq[t])];
    const int32_t block_id = table[static_cast<size_t>(pos / kv.block_size)];
    const int32_t slot = pos % kv.block_size;
    write_row(kv.type, k + t * row, kv.k_row(layer, block_id, slot), row);
    write_row(kv.type, v + t * row, kv.v_row(layer, block_id, slot), row);
  }
}

void attention(ThreadPool& pool, const Config& config, const ForwardBatch& batch, const KvView& kv, int layer,
               const float* q, float* out, float* scores, size_t scores_stride, int n_slots) {
  const size_t head_dim = static_cast<size_t>(config.head_dim);
  const int32_t n_heads = config.n_heads;
  const int32_t group = config.n_heads / config.n_kv_heads;
  const size_t kv_head_bytes = head_dim * kv_type_bytes(kv.type);
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  const int64_t n_pairs = static_cast<int64_t>(batch.size()) * n_heads;

  auto run_pair = [&](int64_t pair, float* att) {
    const size_t t = static_cast<size_t>(pair / n_heads);
    const int32_t h = static_cast<int32_t>(pair % n_heads);
    const size_t kv_offset = static_cast<size_t>(h / group) * kv_head_bytes;
    float* qh = att + scores_stride - head_dim;  // the slot's last head_dim floats: q rounded to the KV type
    for (size_t i = 0; i < head_dim; ++i) qh[i] = round_to(kv.type, q[(t * n_heads + h) * head_dim + i]);
    float* oh = out + (t * n_heads + h) * head_dim;
    const std::vector<int32_t>& table = *batch.block_tables[static_cast<size_t>(batch.seq[t])];
    const int32_t n_pos = batch.pos[t] + 1;
    for (int32_t p = 0; p < n_pos; ++p) {
      const int32_t block_id = table[static_cast<size_t>(p / kv.block_size)];
      att[p] = dot_row(kv.type, kv.k_row(layer, block_id, p % kv.block_size) + kv_offset, qh, head_dim) * scale;
    }
    kernels::softmax(att, static_cast<size_t>(n_pos));
    std::memset(oh, 0, head_dim * sizeof(float));
    for (int32_t p = 0; p < n_pos; ++p) {
      const int32_t block_id = table[static_cast<size_t>(p / kv.block_size)];
      const uint8_t* v_head = kv.v_row(layer, block_id, p % kv.block_size) + kv_offset;
      axpy_row(kv.type, round_to(kv.type, att[p]), v_head, oh, head_dim);
    }
  };
  // Pairs are dealt round-robin to slots: with a prompt in the batch, later tokens attend over more positions,
  // and interleaving spreads that cost evenly.
  pool.parallel_for(n_slots, [&](int64_t slot_begin, int64_t slot_end) {
    for (int64_t slot = slot_begin; slot < slot_end; ++slot) {
      float* att = scores + static_cast<size_t>(slot) * scores_stride;
      for (int64_t pair = slot; pair < n_pairs; pair += n_slots) run_pair(pair, att);
    }
  });
}

}  // namespace preface::model::detail
