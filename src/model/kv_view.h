// The model's view of paged KV storage: where the K and V rows of a (block, slot) live. The storage itself is
// owned by kv/ (which hands out views); the model only reads and writes rows through this view.
//
// Per layer, K and V are each [n_blocks][block_size][row_values] of `type`, row_values = n_kv_heads * head_dim.
// A token at position p of a sequence lives in block block_table[p / block_size], slot p % block_size.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace preface::model {

enum class KvType { F32, F16, BF16 };

size_t kv_type_bytes(KvType t);           // bytes per value
const char* kv_type_name(KvType t);       // "f32" | "f16" | "bf16"

struct KvView {
  KvType type = KvType::F16;
  int32_t block_size = 16;                // tokens per block
  int32_t n_blocks = 0;
  int32_t row_values = 0;                 // n_kv_heads * head_dim
  std::vector<uint8_t*> k_layers;         // [n_layers] base of [n_blocks][block_size][row_values]
  std::vector<uint8_t*> v_layers;         // [n_layers] same shape as k_layers

  size_t row_bytes() const { return static_cast<size_t>(row_values) * kv_type_bytes(type); }
  uint8_t* k_row(int layer, int32_t block_id, int32_t slot) const {
    return k_layers[layer] + (static_cast<size_t>(block_id) * block_size + slot) * row_bytes();
  }
  uint8_t* v_row(int layer, int32_t block_id, int32_t slot) const {
    return v_layers[layer] + (static_cast<size_t>(block_id) * block_size + slot) * row_bytes();
  }
};

}  // namespace preface::model
