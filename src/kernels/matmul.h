// Matrix times a batch of activation rows, split over weight rows across threads.
#pragma once
#include <cstdint>
#include <vector>

#include "gguf/types.h"
#include "util/thread_pool.h"

namespace preface::kernels {

// A weight matrix in GGUF layout: n_rows rows of n_cols values each, row-major, encoded as `type`.
struct Matrix {
  gguf::TensorType type = gguf::TensorType::F32;
  const uint8_t* data = nullptr;
  int64_t n_rows = 0;
  int64_t n_cols = 0;
};

// y[t * n_rows + r] = dot(W row r, x[t * n_cols ...]) for t < n_tokens, r < W.n_rows.
//   x: [n_tokens][W.n_cols] f32;  y: [n_tokens][W.n_rows] f32.
// For Q8_0/Q4_0 weights x is first quantized to Q8_0 into `scratch` (grown if needed).
// Each y element is one call of the row dot kernel: results are independent of n_tokens and thread count.
void matmul(ThreadPool& pool, const Matrix& w, const float* x, int64_t n_tokens, float* y,
            std::vector<uint8_t>& scratch);

// Copies row `row` of W into out[W.n_cols] as f32 (embedding lookup).
void get_row(const Matrix& w, int64_t row, float* out);

}  // namespace preface::kernels
