// Row dot products between a weight row (F32/F16/BF16/Q8_0/Q4_0) and activations, plus the helpers attention
// needs. Each function exists as a scalar reference (namespace scalar) and, where the CPU has AVX2+FMA+F16C, a
// SIMD version (namespace avx2); the unqualified functions dispatch once per process to the best available
// (the environment variable PREFACE_KERNELS=scalar forces the scalar ones).
// Reduction order is fixed by the code path alone (never by thread count or batch), so a given build on a given
// CPU always produces the same bits for the same inputs.
//
// Quantized weights are multiplied with activations quantized to Q8_0 (per 32-value block, as ggml does), using
// exact integer dot products per block: sum_b d_w[b] * d_x[b] * isum[b].
#pragma once
#include <cstddef>
#include <cstdint>

#include "gguf/types.h"

namespace preface::kernels {

using gguf::BlockQ4_0;
using gguf::BlockQ8_0;
using gguf::kQuantBlock;

// Quantizes n values (n % 32 == 0) to n/32 Q8_0 blocks as ggml's quantize_row_q8_0_ref does: d = absmax/127
// (stored as f16), id = d ? 1/d : 0, q = roundf(x * id) (ties away from zero), so |q| <= 127. The scalar,
// AVX2 and AVX-512 versions produce identical bytes.
void quantize_row_q8_0(const float* x, BlockQ8_0* out, size_t n);

// n = number of values (multiple of 32 for the quantized forms). For dot_q8_0/dot_q4_0 the activation blocks x
// must hold |q| <= 127 (true of quantize_row_q8_0's output; the AVX2 sign trick relies on it); weights may hold
// any int8.
float dot_f32(const float* w, const float* x, size_t n);
float dot_f16(const uint16_t* w, const float* x, size_t n);
float dot_bf16(const uint16_t* w, const float* x, size_t n);
float dot_q8_0(const BlockQ8_0* w, const BlockQ8_0* x, size_t n);
float dot_q4_0(const BlockQ4_0* w, const BlockQ8_0* x, size_t n);

// y[i] += a * v[i] for a row v of f32/f16/bf16 (attention's weighted sum of V rows).
void axpy_f32(float a, const float* v, float* y, size_t n);
void axpy_f16(float a, const uint16_t* v, float* y, size_t n);
void axpy_bf16(float a, const uint16_t* v, float* y, size_t n);

// Row conversions used to store K/V; bit-identical to preface::f32_to_f16 / f32_to_bf16 (util/fp16.h) for
// every input, NaNs included.
void f32_to_f16_row(const float* x, uint16_t* out, size_t n);
void f32_to_bf16_row(const float* x, uint16_t* out, size_t n);

// Decodes n values (n % 32 == 0) of n/32 blocks to f32: value = f32(d) * q (Q4_0: q = nibble - 8).
void dequantize_row_q8_0(const BlockQ8_0* x, float* out, size_t n);
void dequantize_row_q4_0(const BlockQ4_0* x, float* out, size_t n);

namespace scalar {
void quantize_row_q8_0(const float* x, BlockQ8_0* out, size_t n);
float dot_f32(const float* w, const float* x, size_t n);
float dot_f16(const uint16_t* w, const float* x, size_t n);
float dot_bf16(const uint16_t* w, const float* x, size_t n);
float dot_q8_0(const BlockQ8_0* w, const BlockQ8_0* x, size_t n);
float dot_q4_0(const BlockQ4_0* w, const BlockQ8_0* x, size_t n);
void axpy_f32(float a, const float* v, float* y, size_t n);
void axpy_f16(float a, const uint16_t* v, float* y, size_t n);
void axpy_bf16(float a, const uint16_t* v, float* y, size_t n);
void f32_to_f16_row(const float* x, uint16_t* out, size_t n);
void f32_to_bf16_row(const float* x, uint16_t* out, size_t n);
}  // namespace scalar

namespace avx2 {
bool available();  // CPU supports AVX2, FMA and F16C
void quantize_row_q8_0(const float* x, BlockQ8_0* out, size_t n);
float dot_f32(const float* w, const float* x, size_t n);
float dot_f16(const uint16_t* w, const float* x, size_t n);
float dot_bf16(const uint16_t* w, const float* x, size_t n);
float dot_q8_0(const BlockQ8_0* w, const BlockQ8_0* x, size_t n);
float dot_q4_0(const BlockQ4_0* w, const BlockQ8_0* x, size_t n);
void axpy_f32(float a, const float* v, float* y, size_t n);
void axpy_f16(float a, const uint16_t* v, float* y, size_t n);
void axpy_bf16(float a, const uint16_t* v, float* y, size_t n);
void f32_to_f16_row(const float* x, uint16_t* out, size_t n);
void f32_to_bf16_row(const float* x, uint16_t* out, size_t n);
}  // namespace avx2

namespace avx512 {
// The same bytes as scalar::quantize_row_q8_0, 16 blocks at a time; only where avx512::available()
// (attention.h).
void quantize_row_q8_0(const float* x, BlockQ8_0* out, size_t n);
}  // namespace avx512

}  // namespace preface::kernels
