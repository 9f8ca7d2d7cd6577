// Every weight type through the AVX2 tiles (gemm.h's contract): F32/F16/BF16 by gemm_float_avx2.h, Q8_0/Q4_0 by
// gemm_quant_avx2.h with QuantIsa's exact integer dot (gemm_avx2.cpp: maddubs + madd; gemm_vnni_avx2.cpp and
// gemm_vnni_avx512.cpp: vpdpbusd). Internal linkage (see gemm_tile_avx2.h); include only where AVX2 is enabled.
#pragma once
#include "kernels/gemm_float_avx2.h"
#include "kernels/gemm_quant_avx2.h"

namespace preface::kernels::avx2 {
namespace {

template <typename QuantIsa>
void gemm_any_type(const GemmArgs& args, int64_t row_begin, int64_t row_end) {
  switch (args.type) {
    case gguf::TensorType::F32: gemm_float<F32Row>(args, row_begin, row_end); return;
    case gguf::TensorType::F16: gemm_float<F16Row>(args, row_begin, row_end); return;
    case gguf::TensorType::BF16: gemm_float<BF16Row>(args, row_begin, row_end); return;
    case gguf::TensorType::Q8_0: gemm_quant<BlockQ8_0, QuantIsa>(args, row_begin, row_end); return;
    case gguf::TensorType::Q4_0: gemm_quant<BlockQ4_0, QuantIsa>(args, row_begin, row_end); return;    default: return;  // matmul refuses every other type before dispatching (kernels/matmul.cpp)
  }
}

}  // namespace
}  // namespace preface::kernels::avx2
