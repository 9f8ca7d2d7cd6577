// attention_tile with attention sinks (AttnQuery::sink, gpt-oss): a learned logit per query head that joins the
// softmax's denominator and weighs no row. Agreement with a double-precision reference on every path (sinks below,
// near and far above the scores, with sliding windows), no sink giving exactly the sinkless bits, AVX-512 (both its
// tile and its decode path) bit-identical to AVX2, and a query's bits independent of the sinks of its tile mates.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/attention.h"
#include "kernels/dispatch.h"
#include "kernels/kernel_test_util.h"
#include "kernels/paged_kv.h"

namespace preface::kernels {
namespace {

using namespace test_attention;  // NOLINT: the shared fixtures of paged_kv.h

const std::vector<float> kSinks = {-INFINITY, -3.0f, 0.0f, 1.5f, 6.0f, 40.0f};

// Queries j = 0..n-1 over windows and sinks taken in turn.
std::vector<AttnQuery> queries_for(const std::vector<float>& q, std::vector<float>& out, size_t head_dim, size_t n,
                                   bool windows) {
  std::vector<AttnQuery> qs;
  for (size_t j = 0; j < n; ++j) {
    AttnQuery a{q.data() + j * head_dim, out.data() + j * head_dim, 77 - static_cast<int32_t>(j % 3) * 20, 0};
    if (windows && j % 2 == 1) a.first_pos = a.n_pos - 16;
    a.sink = kSinks[j % kSinks.size()];
    qs.push_back(a);
  }
  return qs;
}

TEST(AttentionSinks, MatchesDoubleReferenceOnEveryPath) {
  for (const Path& path : paths()) {
    for (KvType type : kAllKvTypes) {
      for (size_t head_dim : {24u, 64u}) {
        if (!row_fits(type, head_dim, 2)) continue;
        SCOPED_TRACE(std::string(path.name) + " type " + elem_name(type) + " head_dim " + std::to_string(head_dim));
        const PagedKv kv(type, head_dim, 2, 5, 77, 57);
        const size_t n_q = 12;
        const auto q = test::random_floats(head_dim * n_q, 58, 3.0f);
        std::vector<float> out(head_dim * n_q);
        std::vector<AttnQuery> qs = queries_for(q, out, head_dim, n_q, true);
        run_tile(path.fn, kv.pages(1), head_dim, 0.2f, qs);
        for (const AttnQuery& aq : qs) {
          const auto ref = reference_attention(kv, 1, aq.q, aq.first_pos, aq.n_pos, 0.2f, 0.0f, aq.sink);
          for (size_t i = 0; i < head_dim; ++i) {
            ASSERT_NEAR(aq.out[i], ref[i], 3e-5 + 3e-5 * std::fabs(ref[i])) << "sink " << aq.sink << " dim " << i;
          }
        }
      }
    }
  }
}

// A sink far above every score takes nearly all the weight: the output shrinks toward zero, and never turns NaN.
TEST(AttentionSinks, DominantSinkShrinksTheOutput) {
  const PagedKv kv(KvType::F16, 64, 1, 16, 40, 61);
  const auto q = test::random_floats(64, 62);
  for (const Path& path : paths()) {
    std::vector<float> plain(64), sunk(64);
    std::vector<AttnQuery> a = {{q.data(), plain.data(), 40}}, b = {{q.data(), sunk.data(), 40}};
    b[0].sink = 200.0f;
    run_tile(path.fn, kv.pages(0), 64, 0.125f, a);
    run_tile(path.fn, kv.pages(0), 64, 0.125f, b);
    for (size_t i = 0; i < 64; ++i) {
      EXPECT_FALSE(std::isnan(sunk[i])) << path.name;
      EXPECT_LE(std::fabs(sunk[i]), 1e-30f) << path.name;
      EXPECT_NE(plain[i], 0.0f) << path.name;
    }
  }
}

// The AVX-512 tile and decode paths give AVX2's bits with sinks, and a query's bits do not depend on its tile mates'
// sinks.
TEST(AttentionSinks, Avx512BitIdenticalToAvx2AndQueriesIndependent) {
  if (!avx512::available()) GTEST_SKIP() << "CPU lacks AVX-512";
  for (KvType type : kAllKvTypes) {
    for (size_t head_dim : {64u, 128u}) {
      SCOPED_TRACE(std::string("type ") + elem_name(type) + " head_dim " + std::to_string(head_dim));
      const PagedKv kv(type, head_dim, 2, 7, 77, 67);
      const size_t n_q = 6;
      const auto q = test::random_floats(head_dim * n_q, 68, 3.0f);
      std::vector<float> a(head_dim * n_q), z(head_dim * n_q), d(head_dim * n_q);
      std::vector<AttnQuery> qa = queries_for(q, a, head_dim, n_q, true), qz = queries_for(q, z, head_dim, n_q, true);
      run_tile(avx2::attention_tile, kv.pages(1), head_dim, 0.2f, qa);
      run_tile(avx512::attention_tile, kv.pages(1), head_dim, 0.2f, qz);
      EXPECT_TRUE(same_bits(a, z));
      // Decode: one n_pos, no window, each query its own sink.
      std::vector<AttnQuery> qd = queries_for(q, d, head_dim, n_q, false), qt = queries_for(q, a, head_dim, n_q, false);
      for (size_t j = 0; j < n_q; ++j) qd[j].n_pos = qt[j].n_pos = 77;
      run_tile(avx2::attention_tile, kv.pages(1), head_dim, 0.2f, qt);
      AttnTile tile;
      tile.kv = kv.pages(1);
      tile.head_dim = head_dim;
      tile.scale = 0.2f;
      tile.queries = qd.data();
      tile.n_queries = qd.size();
      std::vector<float> scratch(attention_scratch_floats(head_dim, qd.size()));
      // The shared tile reads F32, F16, BF16 and Q8_0 rows; the other types go through attention_tile.
      if (avx512::attention_tiles_shared(&tile, 1, scratch.data(), 0)) {
        EXPECT_TRUE(same_bits(a, d));
      } else {
        EXPECT_TRUE(kv_type_is_quantized(type) && type != KvType::Q8_0);
      }
      // Query 2 alone, with the same sink: the bits it had in the tile.
      std::vector<float> alone(head_dim);
      std::vector<AttnQuery> one = {qt[2]};
      one[0].out = alone.data();
      run_tile(avx2::attention_tile, kv.pages(1), head_dim, 0.2f, one);
      EXPECT_EQ(std::memcmp(alone.data(), a.data() + 2 * head_dim, head_dim * sizeof(float)), 0);
    }
  }
}

}  // namespace
}  // namespace preface::kernels
