// The types of kernels/quant.h against ggml: every tensor of the shared quantized files dequantizes to ggml's own
// bits (SHA-256 of the whole tensor as f32, ../shared/oracle/dequant), and each row dot with 8-bit activations
// equals the float dot of the dequantized rows to rounding.
#include <gtest/gtest.h>
#include <openssl/sha.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "gguf/reader.h"
#include "kernels/dot.h"
#include "kernels/matmul.h"
#include "kernels/quant.h"
#include "kernels/kernel_test_util.h"
#include "support/shared_data.h"
#include "util/fp16.h"

namespace preface::kernels {
namespace {

const char* const kFiles[] = {"synth-llama-d256-q4_k_m", "synth-llama-d256-q5_k_m", "synth-llama-d256-q6_k",
                              "synth-llama-d256-q3_k_m", "synth-llama-d256-q2_k",   "synth-llama-d256-iq4_xs",
                              "synth-llama-d256-q4_1",   "synth-llama-d256-q5_0",
                              "2026/synth-gpt-oss-d128-mxfp4"};  // under models/; its oracle by file name

std::string base_name(const std::string& path) { return path.substr(path.rfind('/') + 1); }

std::string hex(const unsigned char* d, size_t n) {
  std::string s;
  char buf[3];
  for (size_t i = 0; i < n; ++i) {
    std::snprintf(buf, sizeof buf, "%02x", d[i]);
    s += buf;
  }
  return s;
}

std::vector<float> dequantize_tensor(const QuantTraits& t, const gguf::TensorInfo& info) {
  const size_t n_cols = info.dims[0];
  const size_t row_bytes = gguf::row_bytes(info.type, n_cols);
  std::vector<float> out(info.n_values);
  for (uint64_t r = 0; r < info.n_rows(); ++r) t.dequantize(info.data + r * row_bytes, out.data() + r * n_cols, n_cols);
  return out;
}

TEST(QuantDequant, EveryTensorMatchesGgmlBitForBit) {
  std::set<std::string> types_seen;
  for (const char* name : kFiles) {
    const auto gguf_path = preface::test::shared_file(std::string("models/") + name + ".gguf");
    const auto oracle_path = preface::test::shared_file("oracle/dequant/" + base_name(name) + ".jsonl");
    ASSERT_FALSE(gguf_path.empty() || oracle_path.empty());
    const gguf::File file = gguf::File::open(gguf_path.string());
    std::ifstream in(oracle_path);
    std::string line;
    int n_checked = 0;
    while (std::getline(in, line)) {
      const auto j = nlohmann::json::parse(line);
      const gguf::TensorInfo& info = file.tensor(j.at("name").get<std::string>());
      const QuantTraits* t = quant_traits(info.type);
      if (t == nullptr) continue;  // F32 and the types dot.h already covers
      const std::vector<float> values = dequantize_tensor(*t, info);
      unsigned char md[SHA256_DIGEST_LENGTH];
      SHA256(reinterpret_cast<const unsigned char*>(values.data()), values.size() * sizeof(float), md);
      EXPECT_EQ(hex(md, sizeof md), j.at("f32_sha256").get<std::string>())
          << name << " " << info.name << " (" << gguf::tensor_type_name(info.type) << "), first value "
          << values[0] << " vs " << j.at("first")[0];
      types_seen.insert(std::string(gguf::tensor_type_name(info.type)));
      ++n_checked;
    }
    EXPECT_GT(n_checked, 0) << name;
  }
  for (const char* type : {"Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "IQ4_XS", "Q4_1", "Q5_0", "MXFP4"}) {
    EXPECT_TRUE(types_seen.count(type)) << type << " not in any shared file";
  }
}

// Each type's dot with quantized activations equals sum(dequant(w) * dequant(x)) up to float rounding, for real
// rows of the shared files and random activations.
TEST(QuantDot, EqualsTheDotOfTheDequantizedRows) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (const char* name : kFiles) {
    const auto gguf_path = preface::test::shared_file(std::string("models/") + name + ".gguf");
    ASSERT_FALSE(gguf_path.empty());
    const gguf::File file = gguf::File::open(gguf_path.string());
    for (const gguf::TensorInfo& info : file.tensors()) {
      const QuantTraits* t = quant_traits(info.type);
      if (t == nullptr || info.n_rows() < 4) continue;
      const size_t n = info.dims[0];
      std::vector<float> x(n);
      for (float& v : x) v = normal(rng);
      std::vector<float> xd(n);  // the activations as the dot sees them
      std::vector<uint8_t> xq;
      if (t->act == ActFormat::Q8_K) {
        xq.resize(n / kQK * sizeof(BlockQ8_K));
        auto* blocks = reinterpret_cast<BlockQ8_K*>(xq.data());
        quantize_row_q8_k(x.data(), blocks, n);
        for (size_t i = 0; i < n; ++i) xd[i] = blocks[i / kQK].d * blocks[i / kQK].qs[i % kQK];
        for (size_t b = 0; b < n / kQK; ++b) {
          for (int g = 0; g < 16; ++g) {
            int s = 0;
            for (int i = 0; i < 16; ++i) s += blocks[b].qs[16 * g + i];
            ASSERT_EQ(s, blocks[b].bsums[g]);
          }
        }
      } else {
        xq.resize(n / 32 * sizeof(gguf::BlockQ8_0));
        auto* blocks = reinterpret_cast<gguf::BlockQ8_0*>(xq.data());
        quantize_row_q8_0(x.data(), blocks, n);
        dequantize_row_q8_0(blocks, xd.data(), n);
      }
      const size_t row_bytes = gguf::row_bytes(info.type, n);
      std::vector<float> w(n);
      for (uint64_t r = 0; r < 4; ++r) {
        t->dequantize(info.data + r * row_bytes, w.data(), n);
        double want = 0, mag = 0;
        for (size_t i = 0; i < n; ++i) {
          want += static_cast<double>(w[i]) * xd[i];
          mag += std::fabs(static_cast<double>(w[i]) * xd[i]);
        }
        const float got = t->dot(info.data + r * row_bytes, xq.data(), n);
        EXPECT_NEAR(got, want, 1e-5 * mag + 1e-30) << name << " " << info.name << " row " << r;
      }
    }
  }
}

TEST(QuantQ8K, ScaleIsTheSignedMaxOver127) {
  std::vector<float> x(512, 0.0f);
  x[3] = -2.54f;
  x[10] = 1.0f;
  x[300] = 0.5f;
  std::vector<BlockQ8_K> b(2);
  quantize_row_q8_k(x.data(), b.data(), x.size());
  EXPECT_EQ(b[0].qs[3], -127);  // the value of largest magnitude maps to -127: d = max / -127
  EXPECT_FLOAT_EQ(b[0].d, 2.54f / 127.0f);
  EXPECT_EQ(b[0].qs[10], 50);
  EXPECT_EQ(b[1].qs[300 - 256], -127);
  EXPECT_FLOAT_EQ(b[1].d, -0.5f / 127.0f);
  const std::vector<float> zeros(256, 0.0f);
  quantize_row_q8_k(zeros.data(), b.data(), 256);
  EXPECT_EQ(b[0].d, 0.0f);
  EXPECT_EQ(b[0].bsums[0], 0);
}

// The dispatched (SIMD) quantizer writes the scalar reference's bytes: random rows with ties for the largest
// magnitude (the first wins), NaN and infinite values, -0, denormals, all-zero and all-NaN blocks.
TEST(QuantQ8K, EveryPathWritesTheScalarBytes) {
  std::mt19937 rng(8);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::uniform_int_distribution<int> pick(0, 255);
  const float inf = std::numeric_limits<float>::infinity(), nan = std::nanf("");
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<float> x(3 * 256);
    for (float& v : x) v = trial % 4 == 0 ? std::round(normal(rng)) : normal(rng);
    const size_t at = static_cast<size_t>(pick(rng));
    switch (trial % 10) {
      case 1: x[at] = -9.0f, x[(at + 100) % 256] = 9.0f; break;  // equal magnitudes: the first wins
      case 2: x[at] = nan; break;
      case 3: x[at] = trial % 20 == 3 ? inf : -inf; break;
      case 4: std::fill(x.begin(), x.begin() + 256, 0.0f); x[at] = -0.0f; break;
      case 5: std::fill(x.begin() + 256, x.begin() + 512, nan); break;
      case 6: for (float& v : x) v *= 1e-40f; break;  // denormals
      case 7: x[at] = -nan; x[(at + 1) % 256] = 1e30f; break;
      default: break;
    }
    std::vector<BlockQ8_K> want(3), got(3);
    scalar::quantize_row_q8_k(x.data(), want.data(), x.size());
    quantize_row_q8_k(x.data(), got.data(), x.size());
    ASSERT_EQ(std::memcmp(want.data(), got.data(), 3 * sizeof(BlockQ8_K)), 0) << "trial " << trial;
    if (avx2::available()) {
      avx2::quantize_row_q8_k(x.data(), got.data(), x.size());
      ASSERT_EQ(std::memcmp(want.data(), got.data(), 3 * sizeof(BlockQ8_K)), 0) << "avx2, trial " << trial;
    }
  }
}

TEST(QuantTraits, OneRowPerComputedType) {
  for (uint32_t raw = 0; raw < 40; ++raw) {
    const auto type = gguf::tensor_type_from_raw(raw);
    if (!type) continue;
    const QuantTraits* t = quant_traits(*type);
    if (t != nullptr) {
      EXPECT_EQ(t->type, *type);
    }
    // gguf's "computed" flag is exactly: a dot.h type or a row of this table.
    const bool dot_h = *type == gguf::TensorType::F32 || *type == gguf::TensorType::F16 ||
                       *type == gguf::TensorType::BF16 || *type == gguf::TensorType::Q8_0 ||
                       *type == gguf::TensorType::Q4_0;
    EXPECT_EQ(gguf::type_is_computed(*type), dot_h || t != nullptr) << gguf::tensor_type_name(*type);
  }
  EXPECT_EQ(quant_traits(gguf::TensorType::Q4_K)->act, ActFormat::Q8_K);
  EXPECT_EQ(quant_traits(gguf::TensorType::Q5_0)->act, ActFormat::Q8_0);
  EXPECT_EQ(quant_traits(gguf::TensorType::F16), nullptr);
}

}  // namespace
}  // namespace preface::kernels

namespace preface::kernels {
namespace {

// matmul over the traits types: every output equals the row's traits dot, bit for bit, for any batch size and
// thread count, also when matrices of different types (Q4_K beside Q6_K, Q8_0-format beside Q8_K-format rows)
// are fused; get_row is the traits dequantization.
TEST(QuantMatmul, EqualsTheRowDotsForAnyBatchAndThreads) {
  const auto path = preface::test::shared_file("models/synth-llama-d256-q4_k_m.gguf");
  const auto path_q5_0 = preface::test::shared_file("models/synth-llama-d256-q5_0.gguf");
  ASSERT_FALSE(path.empty() || path_q5_0.empty());
  const gguf::File file = gguf::File::open(path.string());
  const gguf::File file_q5_0 = gguf::File::open(path_q5_0.string());
  auto matrix = [](const gguf::TensorInfo& t) {
    return Matrix{t.type, t.data, static_cast<int64_t>(t.n_rows()), static_cast<int64_t>(t.dims[0])};
  };
  const Matrix wq = matrix(file.tensor("blk.0.attn_q.weight"));
  const Matrix wv = matrix(file.tensor("blk.1.attn_v.weight"));      // Q6_K in Q4_K_M
  const Matrix wk = matrix(file_q5_0.tensor("blk.0.attn_k.weight"));  // Q5_0: Q8_0 activations
  ASSERT_EQ(wq.type, gguf::TensorType::Q4_K);
  ASSERT_EQ(wv.type, gguf::TensorType::Q6_K);
  ASSERT_EQ(wk.type, gguf::TensorType::Q5_0);
  const size_t n = static_cast<size_t>(wq.n_cols);
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  constexpr int64_t kTokens = 11;
  std::vector<float> x(kTokens * n);
  for (float& v : x) v = normal(rng);

  // The reference: each token alone, one thread, one matrix at a time.
  ThreadPool one(1), three(3);
  std::vector<uint8_t> scratch;
  std::vector<float> want_q(kTokens * wq.n_rows), want_v(kTokens * wv.n_rows), want_k(kTokens * wk.n_rows);
  for (int64_t t = 0; t < kTokens; ++t) {
    matmul(one, wq, x.data() + t * n, 1, want_q.data() + t * wq.n_rows, scratch);
    matmul(one, wv, x.data() + t * n, 1, want_v.data() + t * wv.n_rows, scratch);
    matmul(one, wk, x.data() + t * n, 1, want_k.data() + t * wk.n_rows, scratch);
  }
  std::vector<BlockQ8_K> xk(n / kQK);
  quantize_row_q8_k(x.data(), xk.data(), n);
  EXPECT_EQ(want_q[5], quant_traits(wq.type)->dot(wq.data + 5 * gguf::row_bytes(wq.type, n), xk.data(), n));

  std::vector<float> q(want_q.size()), v(want_v.size()), k(want_k.size());
  matmul_multi(three, {&wq, &wv, &wk}, x.data(), kTokens, {q.data(), v.data(), k.data()}, scratch);
  EXPECT_EQ(std::memcmp(q.data(), want_q.data(), q.size() * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(v.data(), want_v.data(), v.size() * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(k.data(), want_k.data(), k.size() * sizeof(float)), 0);

  std::vector<float> row(n), want_row(n);
  get_row(wv, 3, row.data());
  quant_traits(wv.type)->dequantize(wv.data + 3 * gguf::row_bytes(wv.type, n), want_row.data(), n);
  EXPECT_EQ(row, want_row);
}

}  // namespace
}  // namespace preface::kernels

namespace preface::kernels {
namespace {

TEST(QuantDotAvx2, SameBitsAsScalar) {
  if (!avx2::available()) GTEST_SKIP() << "no AVX2 on this CPU";
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  for (int trial = 0; trial < 200; ++trial) {
    const size_t n = kQK * (1 + trial % 7);
    std::vector<float> x(n);
    for (float& v : x) v = trial % 5 == 0 ? std::round(normal(rng)) : normal(rng);  // ties and outliers
    std::vector<BlockQ8_K> xq(n / kQK);
    quantize_row_q8_k(x.data(), xq.data(), n);
    const auto q4 = test::random_blocks<BlockQ4_K>(n / kQK, rng);
    const auto q6 = test::random_blocks<BlockQ6_K>(n / kQK, rng);
    const auto q5 = test::random_blocks<BlockQ5_K>(n / kQK, rng);
    const auto iq = test::random_blocks<BlockIQ4_XS>(n / kQK, rng);
    const float s5 = scalar::dot_q5_k(q5.data(), xq.data(), n), v5 = avx2::dot_q5_k(q5.data(), xq.data(), n);
    const float si = scalar::dot_iq4_xs(iq.data(), xq.data(), n), vi = avx2::dot_iq4_xs(iq.data(), xq.data(), n);
    ASSERT_EQ(std::memcmp(&s5, &v5, sizeof(float)), 0) << "Q5_K trial " << trial << ": " << s5 << " vs " << v5;
    ASSERT_EQ(std::memcmp(&si, &vi, sizeof(float)), 0) << "IQ4_XS trial " << trial << ": " << si << " vs " << vi;
    const float s4 = scalar::dot_q4_k(q4.data(), xq.data(), n), v4 = avx2::dot_q4_k(q4.data(), xq.data(), n);
    const float s6 = scalar::dot_q6_k(q6.data(), xq.data(), n), v6 = avx2::dot_q6_k(q6.data(), xq.data(), n);
    ASSERT_EQ(std::memcmp(&s4, &v4, sizeof(float)), 0) << "Q4_K trial " << trial << ": " << s4 << " vs " << v4;
    ASSERT_EQ(std::memcmp(&s6, &v6, sizeof(float)), 0) << "Q6_K trial " << trial << ": " << s6 << " vs " << v6;
  }
}

}  // namespace
}  // namespace preface::kernels
