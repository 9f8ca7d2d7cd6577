// The model's view of paged KV storage: where the K and V rows of a (block, slot) live. The storage itself is
// owned by kv/ (which hands out views); the model only reads and writes rows through this view.
//
// Per layer, K and V are each [n_blocks][block_size][row_bytes], one token's row = n_kv_heads head rows of
// head_dim values of `type`, head after head. A token at position p of a sequence lives in block
// block_table[p / block_size], slot p % block_size.
//
// Q8_0 rows are GGUF Q8_0 blocks of 32 values (f16 scale d, then 32 int8 q; value = f32(d) * q, 34 bytes per 32
// values), quantized per KV head; so Q8_0 needs head_dim % 32 == 0 (a block never spans two heads).
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace preface::model {

enum class KvType { F32, F16, BF16, Q8_0 };

const char* kv_type_name(KvType t);  // "f32" | "f16" | "bf16" | "q8_0"
// Values per storage block of the type: 1, or 32 for Q8_0. A row of n values needs n % this == 0.
size_t kv_type_block_values(KvType t);
// Bytes of n_values of the type stored consecutively (n_values a multiple of kv_type_block_values(t)):
// 4n, 2n, 2n, n / 32 * 34 ({f16 d; int8 q[32]} per 32 values).
inline size_t kv_row_bytes(KvType t, size_t n_values) {
  switch (t) {
    case KvType::F32: return 4 * n_values;
    case KvType::F16: return 2 * n_values;
    case KvType::BF16: return 2 * n_values;
    case KvType::Q8_0: return n_values / 32 * 34;
  }
  return 0;
}
// Throws preface::Error when the type cannot store heads of head_dim values (Q8_0 with head_dim % 32 != 0), with
// a message naming the type, the head size and the types that work.
void check_kv_type_fits(KvType t, int32_t head_dim);

struct KvView {
  KvType type = KvType::F16;
  int32_t block_size = 16;                // tokens per block
  int32_t n_blocks = 0;
  int32_t row_values = 0;                 // n_kv_heads * head_dim
  std::vector<uint8_t*> k_layers;         // [n_layers] base of [n_blocks][block_size][row_bytes()]
  std::vector<uint8_t*> v_layers;         // [n_layers] same shape as k_layers

  size_t row_bytes() const { return kv_row_bytes(type, static_cast<size_t>(row_values)); }
  uint8_t* k_row(int layer, int32_t block_id, int32_t slot) const {
    return k_layers[layer] + (static_cast<size_t>(block_id) * block_size + slot) * row_bytes();
  }
  uint8_t* v_row(int layer, int32_t block_id, int32_t slot) const {
    return v_layers[layer] + (static_cast<size_t>(block_id) * block_size + slot) * row_bytes();
  }
};

}  // namespace preface::model
