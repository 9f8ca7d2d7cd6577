// AVX2 GEMM tiles and the row dots defined by them.
//
// Quantized weights (Q8_0, Q4_0) against Q8_0 activations, per output:
//   acc (8 f32 lanes) = 0;  for each block b in order:
//     isum (8 i32 lanes) = lane j holds the exact sum of products 4j..4j+3 of the block's 32 int8 products
//     acc = fma(f32(isum), broadcast(f32(d_w[b]) * f32(d_x[b])), acc)
//   result = hsum(acc)
// Float weights (F32, F16, BF16) against f32 activations, per output:
//   acc (8 lanes) = fma(w[i..i+8), x[i..i+8), acc) over the whole 8-value steps in order; sum = hsum(acc);
//   then sum = fma(w[i], x[i], sum) for the < 8 tail values in order.
// A tile computes R rows x T tokens with the weight loads of a block shared by the T tokens and the activation
// loads shared by the R rows; each output's sequence above is the same in every tile shape, and the row dots
// (dot_q8_0, ..., dot_f32) are 1 x 1 tiles, so matmul equals the row dots bit for bit.
//
// Must not call inline functions shared with baseline code (see dot_avx2.cpp); no standard-library templates.
#include "kernels/gemm_tile_avx2.h"

namespace preface::kernels::avx2 {

void gemm(const GemmArgs& args, int64_t row_begin, int64_t row_end) {
  switch (args.type) {
    case gguf::TensorType::F32: gemm_float<F32Row>(args, row_begin, row_end); return;
    case gguf::TensorType::F16: gemm_float<F16Row>(args, row_begin, row_end); return;
    case gguf::TensorType::BF16: gemm_float<BF16Row>(args, row_begin, row_end); return;
    case gguf::TensorType::Q8_0: gemm_quant<Q8Ops<MaddIsa>>(args, row_begin, row_end); return;
    case gguf::TensorType::Q4_0: gemm_quant<Q4Ops<MaddIsa>>(args, row_begin, row_end); return;
  }
}

float dot_q8_0(const BlockQ8_0* w, const BlockQ8_0* x, size_t n) {
  float y;
  quant_tile<Q8Ops<MaddIsa>, 1, 1>(reinterpret_cast<const uint8_t*>(w), 0, x, nullptr, 0, n / kQuantBlock, &y, 0, nullptr);
  return y;
}

float dot_q4_0(const BlockQ4_0* w, const BlockQ8_0* x, size_t n) {
  float y;
  quant_tile<Q4Ops<MaddIsa>, 1, 1>(reinterpret_cast<const uint8_t*>(w), 0, x, nullptr, 0, n / kQuantBlock, &y, 0, nullptr);
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
