// attention_tile with a sliding window (AttnQuery::first_pos) and score soft-capping (AttnTile::softcap), as
// gemma2/gemma3 and Mistral use them: agreement with a double-precision reference on every path, rows outside the
// window never reaching an output (poisoned with NaN), a query's bits independent of its tile, AVX-512 bit-identical
// to AVX2, the decode path refusing what it does not compute, and softcap_tanh's one implementation (scalar and
// 8-lane) giving the same bits.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/attention.h"
#include "kernels/dispatch.h"
#include "kernels/kernel_test_util.h"
#include "kernels/ops.h"
#include "kernels/paged_kv.h"

namespace preface::kernels {
namespace {

using namespace test_attention;  // NOLINT: the shared fixtures of paged_kv.h

void run(AttnFn fn, const KvPages& pages, size_t head_dim, float scale, float cap, std::vector<AttnQuery>& queries) {
  AttnTile tile;
  tile.kv = pages;
  tile.head_dim = head_dim;
  tile.scale = scale;
  tile.softcap = cap;
  tile.queries = queries.data();
  tile.n_queries = queries.size();
  std::vector<float> scratch(attention_scratch_floats(head_dim, queries.size()));
  fn(tile, scratch.data());
}

// (first_pos, n_pos) pairs: windows of 16 starting inside a chunk, on a chunk boundary, crossing one, a window of
// one position, and no window.
const std::vector<std::pair<int32_t, int32_t>> kWindows = {{25, 41}, {32, 48}, {0, 77}, {61, 77}, {76, 77},
                                                          {3, 19},  {40, 41}, {20, 70}};

TEST(AttentionWindow, MatchesDoubleReferenceOnEveryPath) {
  for (const Path& path : paths()) {
    for (KvType type : kAllKvTypes) {
      for (size_t head_dim : {20u, 64u}) {
        if (!row_fits(type, head_dim, 2)) continue;
        for (float cap : {0.0f, 2.0f}) {
          SCOPED_TRACE(std::string(path.name) + " type " + elem_name(type) + " head_dim " + std::to_string(head_dim) +
                       " softcap " + std::to_string(cap));
          const PagedKv kv(type, head_dim, 2, 5, 77, 17);
          const size_t n_q = kWindows.size();
          const auto q = test::random_floats(head_dim * n_q, 18, 3.0f);
          const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
          std::vector<float> out(head_dim * n_q);
          std::vector<AttnQuery> queries;
          for (size_t j = 0; j < n_q; ++j) {
            queries.push_back({q.data() + j * head_dim, out.data() + j * head_dim, kWindows[j].second,
                               kWindows[j].first});
          }
          run(path.fn, kv.pages(1), head_dim, scale, cap, queries);
          for (const AttnQuery& aq : queries) {
            const auto ref = reference_attention(kv, 1, aq.q, aq.first_pos, aq.n_pos, scale, cap);
            for (size_t i = 0; i < head_dim; ++i) {
              ASSERT_NEAR(aq.out[i], ref[i], 3e-5 + 3e-5 * std::fabs(ref[i]))
                  << "window [" << aq.first_pos << ", " << aq.n_pos << ") dim " << i;
            }
          }
        }
      }
    }
  }
}

// A query's bits are the same alone and tiled with queries of other windows; rows before its window and after its
// last position (NaN here) never reach its output.
TEST(AttentionWindow, QueryIndependentOfTileAndRowsOutsideWindow) {
  for (const Path& path : paths()) {
    for (KvType type : {KvType::F16, KvType::Q8_0, KvType::Q4_1}) {
      SCOPED_TRACE(std::string(path.name) + " type " + elem_name(type));
      const size_t head_dim = 64, n_q = kWindows.size();
      const auto q = test::random_floats(head_dim * n_q, 28, 3.0f);
      PagedKv kv(type, head_dim, 1, 4, 77, 27);
      std::vector<float> tiled(head_dim * n_q);
      std::vector<AttnQuery> all;
      for (size_t j = 0; j < n_q; ++j) {
        all.push_back({q.data() + j * head_dim, tiled.data() + j * head_dim, kWindows[j].second, kWindows[j].first});
      }
      run(path.fn, kv.pages(0), head_dim, 0.125f, 2.0f, all);
      for (size_t j = 0; j < n_q; ++j) {
        const auto [first, n_pos] = kWindows[j];
        PagedKv poisoned(type, head_dim, 1, 4, 77, 27);
        for (int32_t p = 0; p < 77; ++p) {
          if (p < first || p >= n_pos) poisoned.poison(p);
        }
        std::vector<float> alone(head_dim);
        std::vector<AttnQuery> one = {{q.data() + j * head_dim, alone.data(), n_pos, first}};
        run(path.fn, poisoned.pages(0), head_dim, 0.125f, 2.0f, one);
        EXPECT_EQ(std::memcmp(alone.data(), tiled.data() + j * head_dim, head_dim * sizeof(float)), 0)
            << "window [" << first << ", " << n_pos << ")";
      }
    }
  }
}

TEST(AttentionWindow, Avx512BitIdenticalToAvx2) {
  if (!avx512::available()) GTEST_SKIP() << "CPU lacks AVX-512";
  for (KvType type : kAllKvTypes) {
    for (size_t head_dim : {24u, 64u, 80u, 128u}) {
      if (!row_fits(type, head_dim, 2)) continue;
      for (float cap : {0.0f, 2.0f, 50.0f}) {
        SCOPED_TRACE(std::string("type ") + elem_name(type) + " head_dim " + std::to_string(head_dim));
        const PagedKv kv(type, head_dim, 2, 7, 77, 37);
        const size_t n_q = kWindows.size();
        const auto q = test::random_floats(head_dim * n_q, 38, 3.0f);
        std::vector<float> a(head_dim * n_q), z(head_dim * n_q);
        std::vector<AttnQuery> qa, qz;
        for (size_t j = 0; j < n_q; ++j) {
          qa.push_back({q.data() + j * head_dim, a.data() + j * head_dim, kWindows[j].second, kWindows[j].first});
          qz.push_back({q.data() + j * head_dim, z.data() + j * head_dim, kWindows[j].second, kWindows[j].first});
        }
        run(avx2::attention_tile, kv.pages(1), head_dim, 0.2f, cap, qa);
        run(avx512::attention_tile, kv.pages(1), head_dim, 0.2f, cap, qz);
        EXPECT_EQ(std::memcmp(a.data(), z.data(), a.size() * sizeof(float)), 0);
      }
    }
  }
}

// The decode path reads rows in place from position 0 without soft-capping: it refuses such tiles (the caller then
// runs attention_tile, which computes them).
TEST(AttentionWindow, SharedDecodePathRefusesWindowAndSoftcap) {
  if (!avx512::available()) GTEST_SKIP() << "CPU lacks AVX-512";
  const PagedKv kv(KvType::F16, 64, 1, 16, 40, 47);
  const auto q = test::random_floats(64, 48);
  std::vector<float> out(64);
  for (const auto& [first, cap] : std::vector<std::pair<int32_t, float>>{{0, 0.0f}, {24, 0.0f}, {0, 2.0f}}) {
    std::vector<AttnQuery> one = {{q.data(), out.data(), 40, first}};
    AttnTile tile;
    tile.kv = kv.pages(0);
    tile.head_dim = 64;
    tile.softcap = cap;
    tile.queries = one.data();
    tile.n_queries = 1;
    std::vector<float> scratch(attention_scratch_floats(64, 1));
    EXPECT_EQ(avx512::attention_tiles_shared(&tile, 1, scratch.data(), 0), first == 0 && cap == 0.0f);
  }
}

// softcap_tanh: close to tanh, odd, saturating, NaN-preserving; softcap() is it scaled (its 8-lane twin is checked in
// tanh_x8_test.cpp).
TEST(SoftcapTanh, AccurateAndDeterministic) {
  for (int i = -20000; i <= 20000; ++i) {
    const float x = static_cast<float>(i) * 1e-3f;
    ASSERT_NEAR(softcap_tanh(x), std::tanh(static_cast<double>(x)), 1.5e-7) << x;
    ASSERT_EQ(softcap_tanh(-x), -softcap_tanh(x)) << x;
  }
  EXPECT_EQ(softcap_tanh(100.0f), 1.0f);
  EXPECT_EQ(softcap_tanh(-INFINITY), -1.0f);
  EXPECT_TRUE(std::isnan(softcap_tanh(NAN)));
  std::vector<float> x = test::random_floats(1000, 57, 30.0f), y = x;
  softcap(y.data(), y.size(), 30.0f);
  for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(y[i], 30.0f * softcap_tanh(x[i] * (1.0f / 30.0f))) << i;
}

// GELU (tanh form) against the double-precision formula; the scalar and AVX2 geglu and softcap give the same bits,
// tails (n % 8 != 0) included.
TEST(Geglu, MatchesTanhFormulaAndPathsAgreeBitForBit) {
  std::vector<float> gate = test::random_floats(4099, 67, 6.0f), up = test::random_floats(4099, 68, 2.0f);
  std::vector<float> got = gate;
  scalar::geglu(got.data(), up.data(), got.size());
  if (avx2::available()) {
    std::vector<float> vec = gate, cap_s = gate, cap_v = gate;
    avx2::geglu(vec.data(), up.data(), vec.size());
    EXPECT_EQ(std::memcmp(vec.data(), got.data(), got.size() * sizeof(float)), 0);
    scalar::softcap(cap_s.data(), cap_s.size(), 2.5f);
    avx2::softcap(cap_v.data(), cap_v.size(), 2.5f);
    EXPECT_EQ(std::memcmp(cap_s.data(), cap_v.data(), cap_s.size() * sizeof(float)), 0);
  }
  for (size_t i = 0; i < gate.size(); ++i) {
    const double v = gate[i];
    const double want = 0.5 * v * (1.0 + std::tanh(0.7978845608028654 * v * (1.0 + 0.044715 * v * v))) * up[i];
    ASSERT_NEAR(got[i], want, 1e-6 + 1e-6 * std::fabs(want)) << v;
  }
}

}  // namespace
}  // namespace preface::kernels
