// Where each layer's memory lives: the layout kv/ allocates (kv::KvStorage hands out a view, sized from
// model::MemoryLayout) and model/'s layer kinds read and write through.
//
// A layer with paged rows has K and V regions, each [n_blocks][block_size][row bytes], one token's row = the
// layer's KV heads of head-size values, head after head, of format.k (K) or format.v (V) (kernels/kv_type.h; rotated
// per head when format says so, kernels/hadamard.h); K and V rows may differ in width and type, and layers may
// differ from one another. A token at position p of a sequence lives in block
// block_table[p / block_size], slot p % block_size. A layer with a recurrent state has n_state_slots slots of
// state_bytes each; a layer without memory of its own has neither.
//
// A layer marked window_pool (sliding-window layers when n_window_blocks > 0) keeps its rows in a second block id
// space of n_window_blocks blocks, addressed by the sequence's window table (model::ForwardBatch::window_tables)
// instead of its block table.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/kv_type.h"

namespace preface::kernels {

struct KvLayerView {
  uint8_t* k = nullptr;     // [n_blocks][block_size][k row bytes]; nullptr: no paged rows
  uint8_t* v = nullptr;     // [n_blocks][block_size][v row bytes]
  int32_t k_values = 0;     // values per K row (n_kv_heads * K head size)
  int32_t v_values = 0;     // values per V row
  uint8_t* state = nullptr; // [n_state_slots][state_bytes]; nullptr: no state
  size_t state_bytes = 0;
  bool window_pool = false; // rows addressed by window tables: [n_window_blocks][block_size][row bytes]
};

struct KvView {
  KvFormat format;
  int32_t block_size = 16;  // tokens per block
  int32_t n_blocks = 0;
  int32_t n_state_slots = 0;
  int32_t n_window_blocks = 0;  // > 0: the window_pool layers' block count
  std::vector<KvLayerView> layers;  // [n_layers]

  size_t k_row_bytes(int layer) const { return kv_row_bytes(format.k, static_cast<size_t>(at(layer).k_values)); }
  size_t v_row_bytes(int layer) const { return kv_row_bytes(format.v, static_cast<size_t>(at(layer).v_values)); }
  uint8_t* k_row(int layer, int32_t block_id, int32_t slot) const {
    return at(layer).k + (static_cast<size_t>(block_id) * block_size + slot) * k_row_bytes(layer);
  }
  uint8_t* v_row(int layer, int32_t block_id, int32_t slot) const {
    return at(layer).v + (static_cast<size_t>(block_id) * block_size + slot) * v_row_bytes(layer);
  }
  // Per-channel keys (kv_type_is_per_channel(format.k)): a running sequence's open keys, the f32 K rows of the
  // positions of its last group not yet sealed (kernels/kv_channels.h), are kept outside the pool, as
  // [n_layers][kKvChannelGroup][open_key_stride()] floats (model::ForwardBatch::open_keys); 0 floats otherwise.
  size_t open_key_stride() const {
    size_t widest = 0;
    for (const KvLayerView& l : layers) widest = std::max(widest, static_cast<size_t>(l.k_values));
    return widest;
  }
  size_t open_key_floats() const {
    return kv_type_is_per_channel(format.k) ? layers.size() * static_cast<size_t>(kKvChannelGroup) * open_key_stride()
                                            : 0;
  }
  uint8_t* state(int layer, int32_t state_slot) const {
    return at(layer).state + static_cast<size_t>(state_slot) * at(layer).state_bytes;
  }

 private:
  const KvLayerView& at(int layer) const { return layers[static_cast<size_t>(layer)]; }
};

}  // namespace preface::kernels
