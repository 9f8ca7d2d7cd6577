// Row-range GEMM over the traits dots of kernels/quant.h (scalar): tokens in tiles of kTokenTile so that a weight
// row is read once per tile; each output is exactly the traits dot of its row and token.
#include <algorithm>

#include "kernels/gemm.h"
#include "kernels/quant.h"
#include "util/error.h"

namespace preface::kernels::scalar {

namespace {
constexpr int64_t kTokenTile = 8;
}

void gemm_traits(const GemmArgs& a, int64_t row_begin, int64_t row_end) {
  const QuantTraits* t = quant_traits(a.type);
  if (t == nullptr) throw Error("gemm_traits: type " + std::string(gguf::tensor_type_name(a.type)) + " has no row");
  const auto* x = static_cast<const uint8_t*>(a.x);
  for (int64_t t0 = 0; t0 < a.n_tokens; t0 += kTokenTile) {
    const int64_t t1 = std::min(a.n_tokens, t0 + kTokenTile);
    for (int64_t r = row_begin; r < row_end; ++r) {
      const uint8_t* w = a.w + static_cast<size_t>(r) * a.w_row_bytes;
      for (int64_t tk = t0; tk < t1; ++tk) {
        a.y[static_cast<size_t>(tk) * a.y_stride + static_cast<size_t>(r)] =
            t->dot(w, x + static_cast<size_t>(tk) * a.x_row_bytes, a.n_cols);
      }
    }
  }
}

}  // namespace preface::kernels::scalar
