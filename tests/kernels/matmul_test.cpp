// matmul / get_row: bit-identical results for any batch size and thread count, agreement with the row dot
// kernels and with a double-precision reference, and errors for bad matrices.
#include "kernels/matmul.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>

#include "kernels/dot.h"
#include "kernels/kernel_test_util.h"
#include "util/error.h"

namespace preface::kernels {
namespace {

using gguf::TensorType;
using test::random_floats;

const TensorType kAllTypes[] = {TensorType::F32, TensorType::F16, TensorType::BF16, TensorType::Q8_0,
                                TensorType::Q4_0};

// A random weight matrix owning its bytes.
struct OwnedMatrix {
  std::vector<uint8_t> bytes;  // [n_rows][row_bytes]
  Matrix m;
};

OwnedMatrix random_matrix(TensorType type, int64_t n_rows, int64_t n_cols, uint32_t seed) {
  OwnedMatrix o;
  const size_t n = static_cast<size_t>(n_rows * n_cols);
  const auto values = random_floats(n, seed);
  o.bytes.resize(gguf::row_bytes(type, static_cast<size_t>(n_cols)) * static_cast<size_t>(n_rows));
  switch (type) {
    case TensorType::F32: std::memcpy(o.bytes.data(), values.data(), n * sizeof(float)); break;
    case TensorType::F16: f32_to_f16_row(values.data(), reinterpret_cast<uint16_t*>(o.bytes.data()), n); break;
    case TensorType::BF16: f32_to_bf16_row(values.data(), reinterpret_cast<uint16_t*>(o.bytes.data()), n); break;
    case TensorType::Q8_0:
      quantize_row_q8_0(values.data(), reinterpret_cast<BlockQ8_0*>(o.bytes.data()), n);
      break;
    case TensorType::Q4_0: {
      const auto blocks = test::random_q4_0(n, seed);
      std::memcpy(o.bytes.data(), blocks.data(), o.bytes.size());
      break;
    }
    default: ADD_FAILURE() << "no case for " << gguf::tensor_type_name(type); break;
  }
  o.m = Matrix{type, o.bytes.data(), n_rows, n_cols};
  return o;
}

std::vector<float> run(int n_threads, const Matrix& w, const std::vector<float>& x, int64_t n_tokens) {
  ThreadPool pool(n_threads);
  std::vector<float> y(static_cast<size_t>(n_tokens * w.n_rows), -1.0f);  // [n_tokens][n_rows]
  std::vector<uint8_t> scratch;
  matmul(pool, w, x.data(), n_tokens, y.data(), scratch);
  return y;
}

bool same_bits(const float* a, const float* b, size_t n) { return std::memcmp(a, b, n * sizeof(float)) == 0; }

TEST(Matmul, BitIdenticalForAnyBatchAndThreadCount) {
  const int64_t n_rows = 77;  // not a multiple of the 16-row grain: chunks and tiles end mid-grain
  const int64_t n_tokens = 19;
  for (TensorType type : kAllTypes) {
    for (int64_t n_cols : {32, 160}) {
      SCOPED_TRACE(std::string(gguf::tensor_type_name(type)) + " cols " + std::to_string(n_cols));
      const auto w = random_matrix(type, n_rows, n_cols, 5);
      const auto x = random_floats(static_cast<size_t>(n_tokens * n_cols), 6, 2.0f);
      const auto y1 = run(1, w.m, x, n_tokens);
      for (int threads : {2, 3}) {
        const auto yt = run(threads, w.m, x, n_tokens);
        EXPECT_TRUE(same_bits(y1.data(), yt.data(), y1.size())) << threads << " threads";
      }
      for (int64_t t = 0; t < n_tokens; ++t) {
        const std::vector<float> xt(x.begin() + t * n_cols, x.begin() + (t + 1) * n_cols);
        const auto alone = run(t % 3 + 1, w.m, xt, 1);
        ASSERT_TRUE(same_bits(alone.data(), y1.data() + t * n_rows, static_cast<size_t>(n_rows))) << "token " << t;
      }
    }
  }
}

TEST(Matmul, FloatTypesWithOddColumnCounts) {
  for (TensorType type : {TensorType::F32, TensorType::F16, TensorType::BF16}) {
    for (int64_t n_cols : {1, 7, 33, 100}) {
      const auto w = random_matrix(type, 21, n_cols, 8);
      const auto x = random_floats(static_cast<size_t>(3 * n_cols), 9);
      const auto y1 = run(1, w.m, x, 3);
      const auto y2 = run(2, w.m, x, 3);
      EXPECT_TRUE(same_bits(y1.data(), y2.data(), y1.size()));
      std::vector<float> row(static_cast<size_t>(n_cols));
      get_row(w.m, 20, row.data());
      const float expected = dot_f32(row.data(), x.data() + 2 * n_cols, static_cast<size_t>(n_cols));
      EXPECT_NEAR(y1[2 * 21 + 20], expected, 1e-5f * static_cast<float>(n_cols));
    }
  }
}

// Each output equals the dispatching row dot on the same inputs (activations quantized for Q8_0/Q4_0), and is
// close to the double-precision product of the decoded weights with the float activations.
TEST(Matmul, AgreesWithRowDotsAndReference) {
  const int64_t n_rows = 40, n_cols = 256, n_tokens = 4;
  for (TensorType type : kAllTypes) {
    SCOPED_TRACE(std::string(gguf::tensor_type_name(type)));
    const auto w = random_matrix(type, n_rows, n_cols, 10);
    const auto x = random_floats(static_cast<size_t>(n_tokens * n_cols), 11);
    const auto y = run(2, w.m, x, n_tokens);
    const size_t row_bytes = gguf::row_bytes(type, n_cols);
    std::vector<float> wr(n_cols);
    for (int64_t t = 0; t < n_tokens; ++t) {
      const float* xt = x.data() + t * n_cols;
      std::vector<BlockQ8_0> xq(n_cols / 32);
      quantize_row_q8_0(xt, xq.data(), n_cols);
      for (int64_t r = 0; r < n_rows; ++r) {
        const uint8_t* row = w.bytes.data() + r * row_bytes;
        float expected = 0;
        switch (type) {
          case TensorType::F32: expected = dot_f32(reinterpret_cast<const float*>(row), xt, n_cols); break;
          case TensorType::F16: expected = dot_f16(reinterpret_cast<const uint16_t*>(row), xt, n_cols); break;
          case TensorType::BF16: expected = dot_bf16(reinterpret_cast<const uint16_t*>(row), xt, n_cols); break;
          case TensorType::Q8_0:
            expected = dot_q8_0(reinterpret_cast<const BlockQ8_0*>(row), xq.data(), n_cols);
            break;
          case TensorType::Q4_0:
            expected = dot_q4_0(reinterpret_cast<const BlockQ4_0*>(row), xq.data(), n_cols);
            break;
          default: ADD_FAILURE() << "no case for " << gguf::tensor_type_name(type); break;
        }
        const float got = y[t * n_rows + r];
        ASSERT_EQ(got, expected) << "token " << t << " row " << r;
        get_row(w.m, r, wr.data());
        double ref = 0, magnitude = 0;
        for (int64_t i = 0; i < n_cols; ++i) {
          ref += double{wr[i]} * xt[i];
          magnitude += std::fabs(double{wr[i]} * xt[i]);
        }
        const bool quantized = type == TensorType::Q8_0 || type == TensorType::Q4_0;
        EXPECT_NEAR(got, ref, quantized ? 0.02 * magnitude : test::sum_tolerance(n_cols, magnitude));
      }
    }
  }
}

TEST(Matmul, ScratchIsReusedAcrossSizes) {
  const auto w = random_matrix(TensorType::Q8_0, 16, 64, 12);
  const auto x = random_floats(8 * 64, 13);
  ThreadPool pool(2);
  std::vector<uint8_t> scratch;
  std::vector<float> big(8 * 16), small(16);
  matmul(pool, w.m, x.data(), 8, big.data(), scratch);
  const size_t grown = scratch.size();
  EXPECT_GE(grown, 8 * 2 * sizeof(BlockQ8_0));
  matmul(pool, w.m, x.data() + 3 * 64, 1, small.data(), scratch);
  EXPECT_EQ(scratch.size(), grown);
  EXPECT_TRUE(same_bits(small.data(), big.data() + 3 * 16, 16));
}

TEST(Matmul, EmptyShapesDoNothing) {
  ThreadPool pool(2);
  std::vector<uint8_t> scratch;
  std::vector<float> y(4, 7.0f);
  const auto w = random_matrix(TensorType::Q4_0, 2, 32, 14);
  matmul(pool, w.m, nullptr, 0, y.data(), scratch);
  matmul(pool, Matrix{TensorType::F32, nullptr, 0, 8}, nullptr, 3, y.data(), scratch);
  EXPECT_EQ(y, std::vector<float>(4, 7.0f));
}

TEST(Matmul, RejectsBadMatrices) {
  ThreadPool pool(1);
  std::vector<uint8_t> scratch;
  std::vector<float> x(64, 1.0f), y(64);
  std::vector<uint8_t> bytes(64 * 64 * 4 + 4);
  // Quantized rows must be whole blocks.
  EXPECT_THROW(matmul(pool, Matrix{TensorType::Q8_0, bytes.data(), 2, 48}, x.data(), 1, y.data(), scratch), Error);
  EXPECT_THROW(matmul(pool, Matrix{TensorType::F32, nullptr, 2, 8}, x.data(), 1, y.data(), scratch), Error);
  EXPECT_THROW(matmul(pool, Matrix{TensorType::F32, bytes.data() + 1, 2, 8}, x.data(), 1, y.data(), scratch), Error);
  EXPECT_THROW(matmul(pool, Matrix{TensorType::F32, bytes.data(), -1, 8}, x.data(), 1, y.data(), scratch), Error);
  EXPECT_THROW(matmul(pool, Matrix{static_cast<TensorType>(99), bytes.data(), 2, 8}, x.data(), 1, y.data(), scratch),
               Error);
  EXPECT_THROW(matmul(pool, Matrix{TensorType::F32, bytes.data(), 2, 8}, x.data(), -1, y.data(), scratch), Error);
}

TEST(GetRow, DecodesEveryType) {
  const int64_t n_rows = 5, n_cols = 64;
  for (TensorType type : kAllTypes) {
    const auto w = random_matrix(type, n_rows, n_cols, 15);
    const size_t row_bytes = gguf::row_bytes(type, n_cols);
    std::vector<float> out(n_cols);
    get_row(w.m, 3, out.data());
    const uint8_t* src = w.bytes.data() + 3 * row_bytes;
    for (int64_t i = 0; i < n_cols; ++i) {
      float expected = 0;
      uint16_t h;
      switch (type) {
        case TensorType::F32: std::memcpy(&expected, src + 4 * i, 4); break;
        case TensorType::F16: std::memcpy(&h, src + 2 * i, 2), expected = f16_to_f32(h); break;
        case TensorType::BF16: std::memcpy(&h, src + 2 * i, 2), expected = bf16_to_f32(h); break;
        case TensorType::Q8_0: {
          const auto* b = reinterpret_cast<const BlockQ8_0*>(src) + i / 32;
          expected = f16_to_f32(b->d) * b->qs[i % 32];
          break;
        }
        case TensorType::Q4_0: {
          const auto* b = reinterpret_cast<const BlockQ4_0*>(src) + i / 32;
          expected = f16_to_f32(b->d) * static_cast<float>(test::q4_value(*b, i % 32));
          break;
        }
        default: ADD_FAILURE() << "no case for " << gguf::tensor_type_name(type); break;
      }
      ASSERT_EQ(out[i], expected) << gguf::tensor_type_name(type) << " col " << i;
    }
    EXPECT_THROW(get_row(w.m, n_rows, out.data()), Error);
    EXPECT_THROW(get_row(w.m, -1, out.data()), Error);
  }
}

}  // namespace
}  // namespace preface::kernels
