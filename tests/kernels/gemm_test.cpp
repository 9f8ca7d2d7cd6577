// GEMM tiles: every output equals the row dot of its path bit for bit whatever the tile shape, the AVX-VNNI path
// gives the AVX2 path's bits, and matmul_multi equals separate matmuls.
#include "kernels/gemm.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/attention.h"  // avx512::available
#include "kernels/dot.h"
#include "kernels/kernel_test_util.h"
#include "kernels/matmul.h"
#include "util/error.h"
#include "util/fp16.h"

namespace preface::kernels {
namespace {

using gguf::TensorType;

bool is_quantized(TensorType t) { return t == TensorType::Q8_0 || t == TensorType::Q4_0; }

// Weights of `type` (quantized blocks with extreme values mixed in) and activations for n_tokens rows, in the
// layout GemmArgs expects.
struct Problem {
  Problem(TensorType type, int64_t n_rows, int64_t n_cols, int64_t n_tokens, uint32_t seed)
      : type(type), n_rows(n_rows), n_cols(n_cols), n_tokens(n_tokens) {
    const size_t n = static_cast<size_t>(n_rows * n_cols);
    w_row_bytes = gguf::row_bytes(type, static_cast<size_t>(n_cols));
    w.resize(w_row_bytes * static_cast<size_t>(n_rows));
    const auto values = test::random_floats(n, seed);
    switch (type) {
      case TensorType::F32: std::memcpy(w.data(), values.data(), n * 4); break;
      case TensorType::F16: scalar::f32_to_f16_row(values.data(), reinterpret_cast<uint16_t*>(w.data()), n); break;
      case TensorType::BF16: scalar::f32_to_bf16_row(values.data(), reinterpret_cast<uint16_t*>(w.data()), n); break;
      case TensorType::Q8_0: {
        const auto blocks = test::random_q8_0(n, seed);  // q in [-128, 127], -128 included
        std::memcpy(w.data(), blocks.data(), w.size());
        break;
      }
      case TensorType::Q4_0: {
        const auto blocks = test::random_q4_0(n, seed);
        std::memcpy(w.data(), blocks.data(), w.size());
        break;
      }
    }
    xf = test::random_floats(static_cast<size_t>(n_tokens * n_cols), seed + 1, 3.0f);
    if (is_quantized(type)) {
      xq = test::random_q8_0(xf.size(), seed + 2, -127, 127);
      for (size_t b = 0; b < xq.size(); b += 3) std::memset(xq[b].qs, b % 2 ? 127 : -127, 32);  // extremes
      for (const BlockQ8_0& b : xq) xs.push_back(f16_to_f32(b.d));
    }
  }

  GemmArgs args(float* y) const {
    GemmArgs a;
    a.type = type;
    a.w = w.data();
    a.w_row_bytes = w_row_bytes;
    a.x = is_quantized(type) ? static_cast<const void*>(xq.data()) : static_cast<const void*>(xf.data());
    a.x_scales = is_quantized(type) ? xs.data() : nullptr;
    a.n_cols = static_cast<size_t>(n_cols);
    a.n_rows = n_rows;
    a.n_tokens = n_tokens;
    a.y = y;
    a.y_stride = static_cast<size_t>(n_rows);
    return a;
  }

  // The row dot of `path` for (row, token).
  float dot(bool avx2_path, int64_t r, int64_t t) const {
    const uint8_t* row = w.data() + static_cast<size_t>(r) * w_row_bytes;
    const size_t nc = static_cast<size_t>(n_cols);
    const float* xft = xf.data() + static_cast<size_t>(t) * nc;
    const BlockQ8_0* xt = is_quantized(type) ? xq.data() + static_cast<size_t>(t) * (nc / 32) : nullptr;
    switch (type) {
      case TensorType::F32:
        return (avx2_path ? avx2::dot_f32 : scalar::dot_f32)(reinterpret_cast<const float*>(row), xft, nc);
      case TensorType::F16:
        return (avx2_path ? avx2::dot_f16 : scalar::dot_f16)(reinterpret_cast<const uint16_t*>(row), xft, nc);
      case TensorType::BF16:
        return (avx2_path ? avx2::dot_bf16 : scalar::dot_bf16)(reinterpret_cast<const uint16_t*>(row), xft, nc);
      case TensorType::Q8_0:
        return (avx2_path ? avx2::dot_q8_0 : scalar::dot_q8_0)(reinterpret_cast<const BlockQ8_0*>(row), xt, nc);
      case TensorType::Q4_0:
        return (avx2_path ? avx2::dot_q4_0 : scalar::dot_q4_0)(reinterpret_cast<const BlockQ4_0*>(row), xt, nc);
    }
    return 0;
  }

  TensorType type;
  int64_t n_rows, n_cols, n_tokens;
  size_t w_row_bytes = 0;
  std::vector<uint8_t> w;     // [n_rows][w_row_bytes]
  std::vector<float> xf;      // [n_tokens][n_cols]
  std::vector<BlockQ8_0> xq;  // [n_tokens][n_cols / 32]
  std::vector<float> xs;      // [n_tokens][n_cols / 32]
};

const TensorType kAllTypes[] = {TensorType::F32, TensorType::F16, TensorType::BF16, TensorType::Q8_0,
                                TensorType::Q4_0};

// Shapes that end tiles (4 x 3 quantized, 3 x 3 float), row blocks (16) and token blocks (48) part-way.
TEST(Gemm, EveryOutputIsTheRowDotOfItsPath) {
  for (TensorType type : kAllTypes) {
    const std::vector<int64_t> cols = is_quantized(type) ? std::vector<int64_t>{32, 96, 256}
                                                         : std::vector<int64_t>{7, 8, 33, 100};
    for (int64_t n_cols : cols) {
      for (auto [n_rows, n_tokens] : {std::pair<int64_t, int64_t>{1, 1}, {5, 2}, {37, 53}, {16, 4}}) {
        SCOPED_TRACE(std::string(gguf::tensor_type_name(type)) + " " + std::to_string(n_rows) + "x" +
                     std::to_string(n_cols) + " tokens " + std::to_string(n_tokens));
        const Problem p(type, n_rows, n_cols, n_tokens, 40);
        struct Run {
          const char* name;
          GemmFn fn;
          bool avx2_dots;
        };
        std::vector<Run> runs = {{"scalar", scalar::gemm, false}};
        if (avx2::available()) runs.push_back({"avx2", avx2::gemm, true});
        if (avx2::vnni_available()) runs.push_back({"vnni", avx2::gemm_vnni, true});
        if (amx::amx_available()) runs.push_back({"amx", amx::gemm, true});
        if (avx512::available()) runs.push_back({"avx512", avx512::gemm_float, true});
        for (const Run& run : runs) {
          std::vector<float> y(static_cast<size_t>(n_rows * n_tokens), -1.0f);
          // Two row ranges, split off the tile grid, as two threads would run them.
          const int64_t mid = n_rows / 2 + 1;
          run.fn(p.args(y.data()), 0, std::min(mid, n_rows));
          if (mid < n_rows) run.fn(p.args(y.data()), mid, n_rows);
          for (int64_t t = 0; t < n_tokens; ++t) {
            for (int64_t r = 0; r < n_rows; ++r) {
              const float expected = p.dot(run.avx2_dots, r, t);
              const float got = y[static_cast<size_t>(t * n_rows + r)];
              ASSERT_EQ(std::memcmp(&got, &expected, sizeof(float)), 0)
                  << run.name << " row " << r << " token " << t << ": " << got << " vs " << expected;
            }
          }
        }
      }
    }
  }
}

TEST(Gemm, VnniAndAmxMatchAvx2OnLargeTiles) {
  if (!avx2::vnni_available()) GTEST_SKIP() << "CPU lacks AVX-VNNI";
  for (TensorType type : {TensorType::Q8_0, TensorType::Q4_0}) {
    const Problem p(type, 64, 512, 50, 41);
    std::vector<float> a(64 * 50), v(64 * 50), m(64 * 50);
    avx2::gemm(p.args(a.data()), 0, 64);
    avx2::gemm_vnni(p.args(v.data()), 0, 64);
    EXPECT_EQ(std::memcmp(a.data(), v.data(), a.size() * sizeof(float)), 0) << gguf::tensor_type_name(type);
    if (!amx::amx_available()) continue;
    amx::gemm(p.args(m.data()), 0, 64);
    EXPECT_EQ(std::memcmp(a.data(), m.data(), a.size() * sizeof(float)), 0) << gguf::tensor_type_name(type);
  }
}

TEST(MatmulMulti, EqualsSeparateMatmuls) {
  ThreadPool pool(2);
  const Problem q(TensorType::Q8_0, 48, 64, 5, 50), k(TensorType::Q4_0, 16, 64, 5, 51);
  const Problem f(TensorType::F16, 20, 64, 5, 52);
  const Matrix mq{q.type, q.w.data(), q.n_rows, q.n_cols}, mk{k.type, k.w.data(), k.n_rows, k.n_cols},
      mf{f.type, f.w.data(), f.n_rows, f.n_cols};
  const std::vector<float>& x = q.xf;
  std::vector<uint8_t> scratch;
  std::vector<float> yq(48 * 5), yk(16 * 5), yf(20 * 5), sq(yq.size()), sk(yk.size()), sf(yf.size());
  matmul_multi(pool, {&mq, &mk, &mf}, x.data(), 5, {yq.data(), yk.data(), yf.data()}, scratch);
  matmul(pool, mq, x.data(), 5, sq.data(), scratch);
  matmul(pool, mk, x.data(), 5, sk.data(), scratch);
  matmul(pool, mf, x.data(), 5, sf.data(), scratch);
  EXPECT_EQ(yq, sq);
  EXPECT_EQ(yk, sk);
  EXPECT_EQ(yf, sf);
}

TEST(MatmulMulti, RejectsMismatchedInputs) {
  ThreadPool pool(1);
  std::vector<uint8_t> scratch;
  const Problem a(TensorType::F32, 4, 8, 1, 60), b(TensorType::F32, 4, 16, 1, 61);
  const Matrix ma{a.type, a.w.data(), 4, 8}, mb{b.type, b.w.data(), 4, 16};
  std::vector<float> y1(4), y2(4);
  EXPECT_THROW(matmul_multi(pool, {&ma, &mb}, a.xf.data(), 1, {y1.data(), y2.data()}, scratch), Error);
  EXPECT_THROW(matmul_multi(pool, {&ma, &ma}, a.xf.data(), 1, {y1.data()}, scratch), Error);
  EXPECT_THROW(matmul_multi(pool, {}, a.xf.data(), 1, {}, scratch), Error);
}

}  // namespace
}  // namespace preface::kernels
