// Scalar GEMM: every output is one call of the scalar row dot (dot_scalar.cpp), rows outer, tokens inner.
#include "kernels/dot.h"
#include "kernels/gemm.h"

namespace preface::kernels::scalar {
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
    case gguf::TensorType::Q4_0: gemm_rows<BlockQ4_0, BlockQ8_0>(a, row_begin, row_end, n_blocks, dot_q4_0); return;
  }
}

}  // namespace preface::kernels::scalar
