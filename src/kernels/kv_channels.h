// Per-channel key groups (kernels/kv_type.h: q8_pc, q4_pc): kKvChannelGroup positions' K rows of n values (n even),
// quantized together once the group's last position is stored, and widened back to f32.
//
// A group occupies the bytes of its 32 rows in the pool (32 x kv_row_bytes(t, n)), laid out as
//   d[n]      f16 scale of each channel
//   m[n]      f16 minimum of each channel
//   levels    q8_pc: [32][n] uint8, value (r, c) at r * n + c
//             q4_pc: [32][n / 2] bytes, value (r, c) in byte r * n / 2 + c / 2, low nibble for even c
// and value (r, c) = f32(d[c]) * level + f32(m[c]): the product is exact (an 11-bit by at most 8-bit significand)
// and adding m rounds once, so the widening is the same bits however it is computed.
//
// Sealing channel c (L = 255 for q8_pc, 15 for q4_pc): lo and hi are the least and greatest finite values of the
// channel over the 32 rows (0 and 0 when none is finite); m = f16(lo) (0 when that is not finite), d = f16((hi - lo)
// / L) (the largest finite f16 when that overflows); level = round-half-even((x - f32(m)) / f32(d)) clamped to
// [0, L], and 0 for a non-finite x or where d is 0. The bytes are a function of the 32 rows' values only.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/kv_type.h"

namespace preface::kernels {

// Seals one group of a per-channel type t: row r's value c is rows[r * stride + c] (r < 32, c < n) -> out
// (32 * kv_row_bytes(t, n) bytes).
void kv_seal_group(KvType t, const float* rows, size_t stride, size_t n, uint8_t* out);

// Widens channels [first, first + count) of rows [0, n_rows) of a sealed group of n-value rows of type t:
// out[r * out_stride + j] = value (r, first + j).
void kv_widen_group(KvType t, const uint8_t* group, size_t n, size_t first, size_t count, size_t n_rows, float* out,
                    size_t out_stride);

}  // namespace preface::kernels
