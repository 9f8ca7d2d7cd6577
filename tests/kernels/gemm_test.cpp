// GEMM tiles: every output equals the row dot of its path bit for bit whatever the tile shape, the AVX-VNNI path
// gives the AVX2 path's bits, and matmul_multi equals separate matmuls.
#include "kernels/gemm.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/attention.h"  // avx512::available
#include "kernels/dot.h"
#include "kernels/kernel_test_util.h"
#include "kernels/matmul.h"
#include "kernels/repack.h"
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
      default: ADD_FAILURE() << "no case for " << gguf::tensor_type_name(type); break;
    }
    xf = test::random_floats(static_cast<size_t>(n_tokens * n_cols), seed + 1, 3.0f);
    if (is_quantized(type)) {
      xq = test::random_q8_0(xf.size(), seed + 2, -127, 127);
      for (size_t b = 0; b < xq.size(); b += 3) std::memset(xq[b].qs, b % 2 ? 127 : -127, 32);  // extremes
      for (const BlockQ8_0& b : xq) xs.push_back(f16_to_f32(b.d));
      for (const BlockQ8_0& b : xq) {
        int32_t s = 0;
        for (const int8_t q : b.qs) s += q;
        xsum.push_back(s);
      }
      // The paired layout (GemmArgs::x_pairs) of whole groups of 4 blocks; other blocks stay 0 (unused).
      const size_t n_blocks = static_cast<size_t>(n_cols) / 32;
      xpairs.assign(xq.size() * 32, 0);
      for (size_t t = 0; t < static_cast<size_t>(n_tokens); ++t) {
        for (size_t b = 0; b < n_blocks / 4 * 4; b += 2) {
          const BlockQ8_0* q = &xq[t * n_blocks + b];
          int8_t* o = &xpairs[(t * n_blocks + b) * 32];
          for (int i = 0; i < 16; ++i) {
            o[i] = q[0].qs[i];
            o[16 + i] = q[1].qs[i];
            o[32 + i] = q[0].qs[16 + i];
            o[48 + i] = q[1].qs[16 + i];
          }
        }
      }
    }
  }

  // with_sums: pass the activation block sums (GemmArgs::x_sums) and the paired activations (x_pairs), as
  // matmul does; otherwise kernels work from x alone.
  GemmArgs args(float* y, bool with_sums = true) const {
    GemmArgs a;
    a.type = type;
    a.w = w.data();
    a.w_row_bytes = w_row_bytes;
    a.x = is_quantized(type) ? static_cast<const void*>(xq.data()) : static_cast<const void*>(xf.data());
    a.x_scales = is_quantized(type) ? xs.data() : nullptr;
    a.x_sums = is_quantized(type) && with_sums ? xsum.data() : nullptr;
    a.x_pairs = is_quantized(type) && with_sums ? xpairs.data() : nullptr;
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
      default: ADD_FAILURE() << "no case for " << gguf::tensor_type_name(type); break;
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
  std::vector<int32_t> xsum;  // [n_tokens][n_cols / 32]
  std::vector<int8_t> xpairs;  // [n_tokens][n_cols]
};

const TensorType kAllTypes[] = {TensorType::F32, TensorType::F16, TensorType::BF16, TensorType::Q8_0,
                                TensorType::Q4_0};

// Shapes that end tiles (4 x 3 quantized, 3 x 3 float), row blocks (16), token blocks (48; 144 in the AVX-512
// float path's staged tiles) and the AVX-512 float path's 256-column chunks part-way; 5 - 8 tokens take the AVX-512
// float path's direct tiles in more than one token tile, 53 and 150 its staged path.
TEST(Gemm, EveryOutputIsTheRowDotOfItsPath) {
  for (TensorType type : kAllTypes) {
    const std::vector<int64_t> cols = is_quantized(type) ? std::vector<int64_t>{32, 96, 256}
                                                         : std::vector<int64_t>{7, 8, 33, 100, 1100};
    for (int64_t n_cols : cols) {
      for (auto [n_rows, n_tokens] :
           {std::pair<int64_t, int64_t>{1, 1}, {5, 2}, {37, 53}, {16, 4}, {37, 1}, {22, 2}, {9, 150}, {37, 7},
            {16, 8}, {9, 5}}) {
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
        if (avx512::quant_available()) runs.push_back({"avx512 quant", avx512::gemm_quant, true});
        if (avx512::quant_available()) runs.push_back({"avx512 vnni", avx512::gemm_vnni, true});
        for (const Run& run : runs) {
          for (const bool with_sums : {true, false}) {
            std::vector<float> y(static_cast<size_t>(n_rows * n_tokens), -1.0f);
            // Two row ranges, split off the tile grid, as two threads would run them.
            const int64_t mid = n_rows / 2 + 1;
            run.fn(p.args(y.data(), with_sums), 0, std::min(mid, n_rows));
            if (mid < n_rows) run.fn(p.args(y.data(), with_sums), mid, n_rows);
            for (int64_t t = 0; t < n_tokens; ++t) {
              for (int64_t r = 0; r < n_rows; ++r) {
                const float expected = p.dot(run.avx2_dots, r, t);
                const float got = y[static_cast<size_t>(t * n_rows + r)];
                ASSERT_EQ(std::memcmp(&got, &expected, sizeof(float)), 0)
                    << run.name << (with_sums ? " (sums)" : "") << " row " << r << " token " << t << ": " << got
                    << " vs " << expected;
              }
            }
          }
        }
      }
    }
  }
}

// The per-output arithmetic of the SIMD quantized paths (gemm_quant_avx2.h), written out in plain C++: exact
// integer block sums, fma into 4 accumulators by block % 4 over whole groups, a fixed reduction, fma per tail block.
float reference_quant_output(const Problem& p, int64_t r, int64_t t) {
  const size_t n_blocks = static_cast<size_t>(p.n_cols) / 32;
  const uint8_t* row = p.w.data() + static_cast<size_t>(r) * p.w_row_bytes;
  const auto weight = [&](size_t b, int i, float* d) {  // value i of weight block b, and its f32 scale
    if (p.type == TensorType::Q8_0) {
      const auto& blk = reinterpret_cast<const BlockQ8_0*>(row)[b];
      *d = f16_to_f32(blk.d);
      return static_cast<int32_t>(blk.qs[i]);
    }
    const auto& blk = reinterpret_cast<const BlockQ4_0*>(row)[b];
    *d = f16_to_f32(blk.d);
    const int nib = i < 16 ? (blk.qs[i] & 0x0f) : (blk.qs[i - 16] >> 4);
    return static_cast<int32_t>(nib - 8);
  };
  const auto term = [&](size_t b, float* scale) {
    const BlockQ8_0& xb = p.xq[static_cast<size_t>(t) * n_blocks + b];
    int32_t isum = 0;
    float dw = 0;
    for (int i = 0; i < 32; ++i) isum += weight(b, i, &dw) * xb.qs[i];
    *scale = dw * f16_to_f32(xb.d);
    return static_cast<float>(isum);
  };
  float acc[4] = {0, 0, 0, 0};
  const size_t n_full = n_blocks / 4 * 4;
  for (size_t b = 0; b < n_full; ++b) {
    float scale;
    const float v = term(b, &scale);
    acc[b % 4] = std::fma(v, scale, acc[b % 4]);
  }
  float sum = (acc[0] + acc[2]) + (acc[1] + acc[3]);
  for (size_t b = n_full; b < n_blocks; ++b) {
    float scale;
    const float v = term(b, &scale);
    sum = std::fma(v, scale, sum);
  }
  return sum;
}

// Every SIMD quantized path, with and without x_sums, for 1..8 tokens (decode, narrow AMX tiles), wide batches
// (one to five 16-token tiles, a second 64-token pass) and block counts that end groups of 4 part-way (up to 17
// blocks: several groups before the remainder), equals the written-out arithmetic bit for bit.
TEST(Gemm, QuantizedPathsMatchReferenceArithmetic) {
  if (!avx2::available()) GTEST_SKIP() << "CPU lacks AVX2";
  std::vector<std::pair<const char*, GemmFn>> runs = {{"avx2", avx2::gemm}};
  if (avx2::vnni_available()) runs.push_back({"vnni", avx2::gemm_vnni});
  if (amx::amx_available()) runs.push_back({"amx", amx::gemm});
  if (avx512::quant_available()) runs.push_back({"avx512 quant", avx512::gemm_quant});
  if (avx512::quant_available()) runs.push_back({"avx512 vnni", avx512::gemm_vnni});
  for (TensorType type : {TensorType::Q8_0, TensorType::Q4_0}) {
    for (int64_t n_blocks : {1, 3, 4, 5, 7, 8, 12, 13, 17}) {
      for (int64_t n_tokens : {1, 2, 3, 4, 5, 6, 7, 8, 9, 16, 17, 33, 70}) {
        const int64_t n_rows = 19;  // a 16-row AMX group, four 4-row GEMV tiles, and remainders
        const Problem p(type, n_rows, n_blocks * 32, n_tokens, static_cast<uint32_t>(70 + n_blocks + n_tokens));
        for (const auto& [name, fn] : runs) {
          for (const bool with_sums : {true, false}) {
            std::vector<float> y(static_cast<size_t>(n_rows * n_tokens), -1.0f);
            fn(p.args(y.data(), with_sums), 0, n_rows);
            for (int64_t t = 0; t < n_tokens; ++t) {
              for (int64_t r = 0; r < n_rows; ++r) {
                const float expected = reference_quant_output(p, r, t);
                const float got = y[static_cast<size_t>(t * n_rows + r)];
                ASSERT_EQ(std::memcmp(&got, &expected, sizeof(float)), 0)
                    << gguf::tensor_type_name(type) << " " << name << (with_sums ? " (sums)" : "") << " blocks "
                    << n_blocks << " tokens " << n_tokens << " row " << r << " token " << t;
              }
            }
          }
        }
      }
    }
  }
}

// Packed Q4_0 and Q8_0 (repack.h) through the kernels that read them: every output equals the reference
// arithmetic on the GGUF rows, for batches on each side of every path's limits, whole and partial groups, rows
// past the last group and row ranges that start or end inside a group.
TEST(Gemm, PackedMatchesReferenceOnEveryRange) {
  if (!avx512::quant_available()) GTEST_SKIP() << "CPU lacks AVX-512 VNNI: no kernel reads packed weights";
  const std::pair<int64_t, int64_t> ranges[] = {{0, 35}, {0, 16}, {16, 35}, {3, 29}, {16, 32}, {32, 35}, {5, 9}};
  for (TensorType type : {TensorType::Q4_0, TensorType::Q8_0}) {
    for (int64_t n_blocks : {1, 3, 4, 5, 8, 17, 64}) {
      for (int64_t n_tokens : {1, 2, 3, 4, 5, 6, 8, 9, 11, 17, 70}) {
        const int64_t n_rows = 35;  // two whole groups and 3 GGUF rows
        const Problem p(type, n_rows, n_blocks * 32, n_tokens, static_cast<uint32_t>(90 + n_blocks + n_tokens));
        std::vector<uint8_t> storage;
        const Matrix packed = pack_row_groups(Matrix{p.type, p.w.data(), n_rows, p.n_cols}, storage);
        std::vector<std::pair<const char*, GemmFn>> paths = {{"avx512 quant", avx512::gemm_quant}};
        if (amx::amx_available()) paths.push_back({"amx", amx::gemm});
        for (const auto& [name, fn] : paths) {
          for (const bool with_sums : {true, false}) {
            for (const auto& [begin, end] : ranges) {
              std::vector<float> y(static_cast<size_t>(n_rows * n_tokens), -1.0f);
              GemmArgs a = p.args(y.data(), with_sums);
              a.w = packed.data;
              a.row_groups = true;
              fn(a, begin, end);
              for (int64_t t = 0; t < n_tokens; ++t) {
                for (int64_t r = 0; r < n_rows; ++r) {
                  const float got = y[static_cast<size_t>(t * n_rows + r)];
                  const float expected = r >= begin && r < end ? reference_quant_output(p, r, t) : -1.0f;
                  ASSERT_EQ(std::memcmp(&got, &expected, sizeof(float)), 0)
                      << gguf::tensor_type_name(type) << " " << name << (with_sums ? " (sums)" : "") << " blocks "
                      << n_blocks << " tokens " << n_tokens << " rows [" << begin << ", " << end << ") row " << r
                      << " token " << t;
                }
              }
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
