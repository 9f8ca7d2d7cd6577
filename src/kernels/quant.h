// The weight types beyond F32/F16/BF16/Q8_0/Q4_0: one traits row each (the activation format its dot product
// wants, dequantize, row dot), scalar reference kernels. llama.cpp pairs these types with 8-bit activations:
// Q8_K super-blocks (256 values) for the K-quants and IQ4_XS, Q8_0 blocks (32) for Q4_1, Q5_0, Q5_1, IQ4_NL and
// MXFP4.
//
// Exactness: a row dot forms each (sub-)block's product in exact integer arithmetic and accumulates one float per
// 32-value block (Q8_0 formats) or per super-block (Q8_K) in block order, so a result depends on the row and the
// activation row alone (never on batch, tiling or threads). Dequantization reproduces ggml's to_float bit for bit.
#pragma once
#include <cstddef>
#include <cstdint>

#include "gguf/types.h"
#include "kernels/quant_blocks.h"

namespace preface::kernels {

enum class ActFormat : uint8_t {
  F32,   // activations stay f32
  Q8_0,  // BlockQ8_0 per 32 values (dot.h quantize_row_q8_0)
  Q8_K,  // BlockQ8_K per 256 values (quantize_row_q8_k)
};

struct QuantTraits {
  gguf::TensorType type;
  ActFormat act;
  // n values (a multiple of the type's block values) of a row to f32.
  void (*dequantize)(const void* row, float* out, size_t n);
  // Dot of a weight row of n values with one activation row of format `act`.
  float (*dot)(const void* w, const void* x, size_t n);
  // n f32 values (a multiple of the block values) to blocks; nullptr where preface has no quantizer. These are
  // plain min/max fits for synthetic files (model/synth.h), not llama-quantize's error-minimising searches.
  void (*quantize)(const float* x, void* out, size_t n);
};

// Packs 32 levels (0..31) of a 32-value block: value j's low 4 bits in the low nibble of qs[j] (j < 16) or the high
// one of qs[j - 16], its fifth bit at bit j of qh (little-endian; nothing written when qh is null).
void pack_levels_32(const uint8_t q[32], uint8_t qs[16], uint8_t* qh);

// The row of a type computed through this table (Q4_1, Q5_0, Q5_1, IQ4_NL, MXFP4, Q2_K..Q6_K, IQ4_XS), else
// nullptr.
const QuantTraits* quant_traits(gguf::TensorType type);

// ggml's quantize_row_q8_K_ref: per 256 values, d = max / -127 where max is the value of largest magnitude (the
// first of equals; NaN never), so it maps to -127, q = min(127, nearest(x * -127 / max)) (ties to even), bsums the
// sums of each 16 q; a block without a nonzero magnitude has d = 0. n % 256 == 0. Dispatched: every path writes
// the same bytes.
void quantize_row_q8_k(const float* x, BlockQ8_K* out, size_t n);

namespace scalar {
void quantize_row_q8_k(const float* x, BlockQ8_K* out, size_t n);
void dequantize_row_q4_1(const BlockQ4_1* x, float* y, size_t n);
void dequantize_row_q5_0(const BlockQ5_0* x, float* y, size_t n);
void dequantize_row_q5_1(const BlockQ5_1* x, float* y, size_t n);
void dequantize_row_iq4_nl(const BlockIQ4_NL* x, float* y, size_t n);
void dequantize_row_mxfp4(const BlockMXFP4* x, float* y, size_t n);
void dequantize_row_q2_k(const BlockQ2_K* x, float* y, size_t n);
void dequantize_row_q3_k(const BlockQ3_K* x, float* y, size_t n);
void dequantize_row_q4_k(const BlockQ4_K* x, float* y, size_t n);
void dequantize_row_q5_k(const BlockQ5_K* x, float* y, size_t n);
void dequantize_row_q6_k(const BlockQ6_K* x, float* y, size_t n);
void dequantize_row_iq4_xs(const BlockIQ4_XS* x, float* y, size_t n);

float dot_q4_1(const BlockQ4_1* w, const gguf::BlockQ8_0* x, size_t n);
float dot_q5_0(const BlockQ5_0* w, const gguf::BlockQ8_0* x, size_t n);
float dot_q5_1(const BlockQ5_1* w, const gguf::BlockQ8_0* x, size_t n);
float dot_iq4_nl(const BlockIQ4_NL* w, const gguf::BlockQ8_0* x, size_t n);
float dot_mxfp4(const BlockMXFP4* w, const gguf::BlockQ8_0* x, size_t n);
float dot_q2_k(const BlockQ2_K* w, const BlockQ8_K* x, size_t n);
float dot_q3_k(const BlockQ3_K* w, const BlockQ8_K* x, size_t n);
float dot_q4_k(const BlockQ4_K* w, const BlockQ8_K* x, size_t n);
float dot_q5_k(const BlockQ5_K* w, const BlockQ8_K* x, size_t n);
float dot_q6_k(const BlockQ6_K* w, const BlockQ8_K* x, size_t n);
float dot_iq4_xs(const BlockIQ4_XS* w, const BlockQ8_K* x, size_t n);

void quantize_row_q4_1(const float* x, void* out, size_t n);   // out: BlockQ4_1[n / 32]
void quantize_row_q5_0(const float* x, void* out, size_t n);   // out: BlockQ5_0[n / 32]
void quantize_row_q5_1(const float* x, void* out, size_t n);   // out: BlockQ5_1[n / 32]
void quantize_row_iq4_nl(const float* x, void* out, size_t n); // out: BlockIQ4_NL[n / 32]
void quantize_row_q4_k(const float* x, void* out, size_t n);   // out: BlockQ4_K[n / 256]
void quantize_row_q5_k(const float* x, void* out, size_t n);   // out: BlockQ5_K[n / 256]
void quantize_row_q6_k(const float* x, void* out, size_t n);   // out: BlockQ6_K[n / 256]
void quantize_row_iq4_xs(const float* x, void* out, size_t n); // out: BlockIQ4_XS[n / 256]
}  // namespace scalar

namespace avx2 {
void quantize_row_q8_k(const float* x, BlockQ8_K* out, size_t n);  // the same bytes as scalar::
// The same bits as the scalar dots (exact integer sums, then the same float operations per super-block).
float dot_q4_k(const BlockQ4_K* w, const BlockQ8_K* x, size_t n);
float dot_q5_k(const BlockQ5_K* w, const BlockQ8_K* x, size_t n);
float dot_q6_k(const BlockQ6_K* w, const BlockQ8_K* x, size_t n);
float dot_iq4_xs(const BlockIQ4_XS* w, const BlockQ8_K* x, size_t n);
}  // namespace avx2

}  // namespace preface::kernels
