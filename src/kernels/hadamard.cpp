#include "kernels/hadamard.h"

#include <cmath>

namespace preface::kernels {

void hadamard_rotate(float* x, size_t n, size_t block) {
  const auto scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(block)));
  for (size_t b0 = 0; b0 < n; b0 += block) {
    float* v = x + b0;
    for (size_t len = 1; len < block; len *= 2) {
      for (size_t i = 0; i < block; i += 2 * len) {
        for (size_t j = i; j < i + len; ++j) {
          const float a = v[j], c = v[j + len];
          v[j] = a + c;
          v[j + len] = a - c;
        }
      }
    }
    for (size_t j = 0; j < block; ++j) v[j] *= scale;
  }
}

size_t hadamard_k_block(size_t head_dim) { return head_dim == 0 ? 0 : head_dim & (~head_dim + 1); }

}  // namespace preface::kernels
