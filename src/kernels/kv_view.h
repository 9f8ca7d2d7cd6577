// Where the K and V rows of paged KV storage live: the layout kv/ allocates (kv::KvStorage hands out a view) and
// model/ reads and writes through, so neither module includes the other.
//
// Per layer, K and V are each [n_blocks][block_size][row_bytes], one token's row = n_kv_heads head rows of
// head_dim values of `type` (kernels/kv_type.h), head after head. A token at position p of a sequence lives in
// block block_table[p / block_size], slot p % block_size.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/kv_type.h"

namespace preface::kernels {

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

}  // namespace preface::kernels
