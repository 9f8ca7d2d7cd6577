// AVX2 GEMM (gemm.h) and the row dots, which are 1 x 1 tiles of it, so that matmul equals the row dots bit
// for bit. The arithmetic each output follows: gemm_quant_avx2.h (Q8_0, Q4_0), gemm_float_avx2.h (F32, F16,
// BF16). Each output's sequence is the same in every tile shape.
#include "kernels/gemm_tiles_avx2.h"

namespace preface::kernels::avx2 {

void gemm(const GemmArgs& args, int64_t row_begin, int64_t row_end) {
  gemm_any_type<MaddIsa>(args, row_begin, row_end);
}

float dot_q8_0(const BlockQ8_0* w, const BlockQ8_0* x, size_t n) {
  float y;
  quant_tile<BlockQ8_0, MaddIsa, false, 1>(reinterpret_cast<const uint8_t*>(w), x, nullptr, nullptr, nullptr, 0,
                                           n / kQuantBlock, &y, 0, nullptr);
  return y;
}

float dot_q4_0(const BlockQ4_0* w, const BlockQ8_0* x, size_t n) {
  float y;
  quant_tile<BlockQ4_0, MaddIsa, false, 1>(reinterpret_cast<const uint8_t*>(w), x, nullptr, nullptr, nullptr, 0,
                                           n / kQuantBlock, &y, 0, nullptr);
  return y;
}

float dot_f32(const float* w, const float* x, size_t n) {
  float y;
  float_tile<F32Row, 1, 1>(reinterpret_cast<const uint8_t*>(w), 0, x, 0, n, &y, 0, nullptr);
  return y;
}

float dot_f16(const uint16_t* w, const float* x, size_t n) {
  float y;
  float_tile<F16Row, 1, 1>(reinterpret_cast<const uint8_t*>(w), 0, x, 0, n, &y, 0, nullptr);
  return y;
}

float dot_bf16(const uint16_t* w, const float* x, size_t n) {
  float y;
  float_tile<BF16Row, 1, 1>(reinterpret_cast<const uint8_t*>(w), 0, x, 0, n, &y, 0, nullptr);
  return y;
}

}  // namespace preface::kernels::avx2
