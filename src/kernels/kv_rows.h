// Writing K/V rows of any KV type (kernels/kv_type.h) and reading single values back, the scalar definition every
// attention path's widening equals.
//
// Quantizers are ggml's reference ones (quantize_row_*_ref in ggml-quants.c), the functions its CPU backend stores
// cache rows with: q8_0 d = absmax / 127; q4_0 / q5_0 d = (signed value of largest magnitude) / -8 or / -16,
// q = min(levels - 1, (int)(x / d + 8.5 or 16.5)); q4_1 / q5_1 d = (max - min) / levels, m = min,
// q = (int)((x - m) / d + 0.5); iq4_nl: d from the value of largest magnitude over level -127, every value to its
// nearest level, then d refitted by least squares weighted by x^2 (ggml's pass with ntry = -1; a block whose values
// are all below 1e-15 in magnitude stores d = 0 and nibbles 0). A row's bytes depend on its f32 values only.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/kv_type.h"

namespace preface::kernels {

// Writes n values (a multiple of kv_type_block_values(t)) of x as type t to dst (kv_row_bytes(t, n) bytes). Not for
// the per-channel key types (kernels/kv_channels.h writes a group of rows at once): throws std::logic_error.
void kv_write_row(KvType t, const float* x, uint8_t* dst, size_t n);

// Value i of a stored row of type t, widened to f32 exactly as every attention path widens it (NaN for a
// per-channel type, whose rows are no unit: kernels/kv_channels.h).
float kv_value(KvType t, const uint8_t* row, size_t i);

}  // namespace preface::kernels
