// Scalar reference kernels (row dots, and the GEMM built on them): plain left-to-right loops, one float
// accumulator. They define what the SIMD kernels must agree with (within rounding for the float sums, exactly for
// the integer block sums and conversions).
#include <cmath>

#include "kernels/dot.h"
#include "kernels/gemm.h"
#include "util/fp16.h"

namespace preface::kernels::scalar {

void quantize_row_q8_0(const float* x, BlockQ8_0* out, size_t n) {
  const size_t n_blocks = n / kQuantBlock;
  for (size_t b = 0; b < n_blocks; ++b) {
    const float* xb = x + b * kQuantBlock;  // [32]
    float amax = 0.0f;
    for (size_t j = 0; j < kQuantBlock; ++j) amax = std::fmax(amax, std::fabs(xb[j]));  // ignores NaN
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    out[b].d = f32_to_f16(d);
    for (size_t j = 0; j < kQuantBlock; ++j) {
      // |x * id| <= 127 up to rounding for finite x; NaN (a NaN input, or inf * 0 when amax is inf) maps to 0.
      const float q = std::roundf(xb[j] * id);
      out[b].qs[j] = q >= -127.0f && q <= 127.0f ? static_cast<int8_t>(q) : int8_t{0};
    }
  }
}

float dot_f32(const float* w, const float* x, size_t n) {
  float sum = 0.0f;
  for (size_t i = 0; i < n; ++i) sum += w[i] * x[i];
  return sum;
}

float dot_f16(const uint16_t* w, const float* x, size_t n) {
  float sum = 0.0f;
  for (size_t i = 0; i < n; ++i) sum += f16_to_f32(w[i]) * x[i];
  return sum;
}

float dot_bf16(const uint16_t* w, const float* x, size_t n) {
  float sum = 0.0f;
  for (size_t i = 0; i < n; ++i) sum += bf16_to_f32(w[i]) * x[i];
  return sum;
}

float dot_q8_0(const BlockQ8_0* w, const BlockQ8_0* x, size_t n) {
  const size_t n_blocks = n / kQuantBlock;
  float sum = 0.0f;
  for (size_t b = 0; b < n_blocks; ++b) {
    int32_t isum = 0;
    for (size_t j = 0; j < kQuantBlock; ++j) isum += int32_t{w[b].qs[j]} * int32_t{x[b].qs[j]};
    sum += (f16_to_f32(w[b].d) * f16_to_f32(x[b].d)) * static_cast<float>(isum);
  }
  return sum;
}

float dot_q4_0(const BlockQ4_0* w, const BlockQ8_0* x, size_t n) {
  constexpr size_t kHalf = kQuantBlock / 2;
  const size_t n_blocks = n / kQuantBlock;
  float sum = 0.0f;
  for (size_t b = 0; b < n_blocks; ++b) {
    int32_t isum = 0;
    for (size_t j = 0; j < kHalf; ++j) {
      const int32_t lo = (w[b].qs[j] & 0x0f) - 8;  // value j
      const int32_t hi = (w[b].qs[j] >> 4) - 8;    // value j + 16
      isum += lo * x[b].qs[j] + hi * x[b].qs[j + kHalf];
    }
    sum += (f16_to_f32(w[b].d) * f16_to_f32(x[b].d)) * static_cast<float>(isum);
  }
  return sum;
}

void axpy_f32(float a, const float* v, float* y, size_t n) {
  for (size_t i = 0; i < n; ++i) y[i] += a * v[i];
}

void axpy_f16(float a, const uint16_t* v, float* y, size_t n) {
  for (size_t i = 0; i < n; ++i) y[i] += a * f16_to_f32(v[i]);
}

void axpy_bf16(float a, const uint16_t* v, float* y, size_t n) {
  for (size_t i = 0; i < n; ++i) y[i] += a * bf16_to_f32(v[i]);
}

void f32_to_f16_row(const float* x, uint16_t* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = f32_to_f16(x[i]);
}

void f32_to_bf16_row(const float* x, uint16_t* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = f32_to_bf16(x[i]);
}

// GEMM: every output is one call of the row dot above, rows outer, tokens inner.
namespace {

template <typename WRow, typename XRow, typename Dot>
void gemm_rows(const GemmArgs& a, int64_t row_begin, int64_t row_end, size_t x_row_elems, Dot dot) {
  const auto* x = static_cast<const XRow*>(a.x);
  for (int64_t r = row_begin; r < row_end; ++r) {
    const auto* w = reinterpret_cast<const WRow*>(a.w + static_cast<size_t>(r) * a.w_row_bytes);
    for (int64_t t = 0; t < a.n_tokens; ++t) {
      a.y[static_cast<size_t>(t) * a.y_stride + static_cast<size_t>(r)] =
          dot(w, x + static_cast<size_t>(t) * x_row_elems, a.n_cols);
    }
  }
}

}  // namespace

void gemm(const GemmArgs& a, int64_t row_begin, int64_t row_end) {
  const size_t n_blocks = a.n_cols / kQuantBlock;
  switch (a.type) {
    case gguf::TensorType::F32: gemm_rows<float, float>(a, row_begin, row_end, a.n_cols, dot_f32); return;
    case gguf::TensorType::F16: gemm_rows<uint16_t, float>(a, row_begin, row_end, a.n_cols, dot_f16); return;
    case gguf::TensorType::BF16: gemm_rows<uint16_t, float>(a, row_begin, row_end, a.n_cols, dot_bf16); return;
    case gguf::TensorType::Q8_0: gemm_rows<BlockQ8_0, BlockQ8_0>(a, row_begin, row_end, n_blocks, dot_q8_0); return;
    case gguf::TensorType::Q4_0: gemm_rows<BlockQ4_0, BlockQ8_0>(a, row_begin, row_end, n_blocks, dot_q4_0); return;    default: return;  // matmul refuses every other type before dispatching (kernels/matmul.cpp)
  }
}

}  // namespace preface::kernels::scalar
