// Matrix times a batch of activation rows, split over weight rows across threads.
#pragma once
#include <cstddef>
#include <cstdint>
#include <initializer_list>
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
  bool row_groups = false;  // packed into row groups (repack.h: Q4_0, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS)
};

// y[t * n_rows + r] = dot(W row r, x[t * n_cols ...]) for t < n_tokens, r < W.n_rows.
//   x: [n_tokens][W.n_cols] f32;  y: [n_tokens][W.n_rows] f32.
// For Q8_0/Q4_0 weights (and Q4_1, Q5_0, Q5_1, IQ4_NL, MXFP4) x is first quantized to Q8_0 into `scratch` (grown
// if needed); for the K-quants and IQ4_XS to Q8_K (kernels/quant.h), in a buffer of the calling thread.
// Each y element equals the row dot kernel (dot.h) of its row and token, bit for bit: results are independent
// of n_tokens and thread count.
void matmul(ThreadPool& pool, const Matrix& w, const float* x, int64_t n_tokens, float* y,
            std::vector<uint8_t>& scratch);

// Up to kMaxFused matrices with the same column count applied to the same activations as one job: x is quantized
// once (when any matrix is Q8_0/Q4_0) and the rows of all matrices are split over the threads together.
// ys[i]: [n_tokens][ws[i]->n_rows]. Each output equals what matmul computes for it.
inline constexpr size_t kMaxFused = 4;
void matmul_multi(ThreadPool& pool, std::initializer_list<const Matrix*> ws, const float* x, int64_t n_tokens,
                  std::initializer_list<float*> ys, std::vector<uint8_t>& scratch);

// Copies row `row` of W into out[W.n_cols] as f32 (embedding lookup).
void get_row(const Matrix& w, int64_t row, float* out);

}  // namespace preface::kernels
