// The integer levels of a 32-value block of a KV block type (kernels/kv_type.h), shared by the scalar and SIMD
// widenings (internal to src/kernels). A value is then f32(d) * f32(level) (+ f32(m) where kv_type_has_offset), d
// and m the block's f16 fields, computed the same way on every path. Internal linkage, so an AVX translation unit's copy is never
// picked for baseline code.
#pragma once
#include <cstdint>
#include <cstring>

#include "kernels/kv_type.h"
#include "kernels/quant_blocks.h"

namespace preface::kernels {
namespace {

inline uint16_t kv_load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// nibble j of 16 packed bytes: value j < 16 in the low nibble of qs[j], j >= 16 in the high one of qs[j - 16].
inline int kv_nibble(const uint8_t* qs, int j) { return j < 16 ? qs[j] & 0xF : qs[j - 16] >> 4; }

inline int kv_fifth_bit(const uint8_t* qh, int j) {
  uint32_t h;
  std::memcpy(&h, qh, sizeof(h));
  return static_cast<int>((h >> j) & 1u) << 4;
}

// The level of value j (0..31) of a block of type t (a block type).
inline int kv_block_level(KvType t, const uint8_t* block, int j) {
  switch (t) {
    case KvType::Q8_0: return static_cast<int8_t>(block[2 + j]);
    case KvType::Q4_0: return kv_nibble(block + 2, j) - 8;
    case KvType::Q4_1: return kv_nibble(block + 4, j);
    case KvType::IQ4_NL: return kIq4nlValues[kv_nibble(block + 2, j)];
    case KvType::Q5_0: return (kv_nibble(block + 6, j) | kv_fifth_bit(block + 2, j)) - 16;
    case KvType::Q5_1: return kv_nibble(block + 8, j) | kv_fifth_bit(block + 4, j);
    default: return 0;  // not a block type
  }
}

// The 32 levels of a block of type t (a block type) into q.
inline void kv_block_levels(KvType t, const uint8_t* block, int8_t q[32]) {
  for (int j = 0; j < 32; ++j) q[j] = static_cast<int8_t>(kv_block_level(t, block, j));
}

}  // namespace
}  // namespace preface::kernels
