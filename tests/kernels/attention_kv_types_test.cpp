// Attention over every KV type and K/V pair: a block type's rows are read as exactly the f32 values kv_value
// decodes (the query unrounded), on every path and for heads that start inside a block (4 heads of 8 or 16 values
// share 32-value blocks), so a tile over them gives the same bits as the same tile over F32 rows holding those
// values; and every SIMD path equals the scalar reference bit for bit where the arithmetic is the same.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "kernels/attention.h"
#include "kernels/kernel_test_util.h"
#include "kernels/paged_kv.h"

namespace preface::kernels {
namespace {

using namespace test_attention;  // NOLINT: the shared fixtures of paged_kv.h

// K types whose query is not rounded (f32 and the block types), each with a V type of any kind.
const std::vector<std::pair<KvType, KvType>> kPairs = {
    {KvType::Q8_0, KvType::Q8_0},   {KvType::Q4_0, KvType::Q4_0}, {KvType::Q4_1, KvType::Q4_1},
    {KvType::IQ4_NL, KvType::IQ4_NL}, {KvType::Q5_0, KvType::Q5_0}, {KvType::Q5_1, KvType::Q5_1},
    {KvType::Q8_0, KvType::Q4_0},   {KvType::Q4_1, KvType::F16},  {KvType::IQ4_NL, KvType::Q5_1},
    {KvType::Q5_0, KvType::BF16},   {KvType::F32, KvType::Q4_0},
};

// (head_dim, KV heads): heads of whole blocks, and heads inside blocks.
const std::vector<std::pair<size_t, size_t>> kShapes = {{32, 3}, {64, 2}, {96, 2}, {8, 4}, {16, 4}, {24, 4}};

TEST(AttentionKvTypes, BlockTypesEqualF32OfTheirValuesOnEveryPath) {
  for (const Path& path : paths()) {
    for (const auto& [k_type, v_type] : kPairs) {
      for (const auto& [head_dim, n_heads] : kShapes) {
        SCOPED_TRACE(std::string(path.name) + " K " + kv_type_name(k_type) + " V " + kv_type_name(v_type) +
                     " head_dim " + std::to_string(head_dim) + " x " + std::to_string(n_heads));
        const int32_t n_pos = 83;
        const PagedKv quant(k_type, v_type, head_dim, n_heads, 6, n_pos, 41);
        PagedKv f32(KvType::F32, head_dim, n_heads, 6, n_pos, 41);  // the same table (same seed); values below
        ASSERT_EQ(quant.table, f32.table);
        for (int32_t p = 0; p < n_pos; ++p) {
          for (size_t i = 0; i < n_heads * head_dim; ++i) {
            f32.write(f32.k.data(), p, i, quant.kf[static_cast<size_t>(p) * n_heads * head_dim + i]);
            f32.write(f32.v.data(), p, i, quant.vf[static_cast<size_t>(p) * n_heads * head_dim + i]);
          }
        }
        const auto q = test::random_floats(head_dim * 4, 42, 3.0f);
        for (size_t head = 0; head < n_heads; ++head) {
          std::vector<float> a(head_dim * 4), b(head_dim * 4);
          std::vector<AttnQuery> qa, qb;
          for (size_t j = 0; j < 4; ++j) {
            const int32_t n = n_pos - static_cast<int32_t>(25 * j);
            qa.push_back({q.data() + j * head_dim, a.data() + j * head_dim, n});
            qb.push_back({q.data() + j * head_dim, b.data() + j * head_dim, n});
          }
          run_tile(path.fn, quant.pages(head), head_dim, 0.17f, qa);
          run_tile(path.fn, f32.pages(head), head_dim, 0.17f, qb);
          EXPECT_TRUE(same_bits(a, b)) << "head " << head;
        }
      }
    }
  }
}

// The AVX-512 tile is the AVX2 tile's arithmetic: the same bits for every type pair and head placement, windows
// and soft-capping included. (The scalar reference differs from both in its reduction order; the F32 equality above
// ties each path's reading of the rows to kv_value.)
TEST(AttentionKvTypes, Avx512BitIdenticalToAvx2) {
  if (!avx512::available()) GTEST_SKIP() << "CPU lacks AVX-512";
  for (const auto& [k_type, v_type] : kPairs) {
    for (const auto& [head_dim, n_heads] : kShapes) {
      SCOPED_TRACE(std::string("K ") + kv_type_name(k_type) + " V " + kv_type_name(v_type) + " head_dim " +
                   std::to_string(head_dim));
      const int32_t n_pos = 91;
      const PagedKv kv(k_type, v_type, head_dim, n_heads, 7, n_pos, 71);
      const auto q = test::random_floats(head_dim * 5, 72, 3.0f);
      std::vector<float> a(head_dim * 5), z(head_dim * 5);
      std::vector<AttnQuery> qa, qz;
      for (size_t j = 0; j < 5; ++j) {
        const int32_t n = static_cast<int32_t>(n_pos - 17 * j);
        const int32_t first = j % 2 == 1 ? n / 3 : 0;
        qa.push_back({q.data() + j * head_dim, a.data() + j * head_dim, n, first});
        qz.push_back({q.data() + j * head_dim, z.data() + j * head_dim, n, first});
      }
      for (size_t head = 0; head < n_heads; ++head) {
        AttnTile tile;
        tile.kv = kv.pages(head);
        tile.head_dim = head_dim;
        tile.scale = 0.2f;
        tile.softcap = head % 2 == 1 ? 3.0f : 0.0f;
        std::vector<float> scratch(attention_scratch_floats(head_dim, 5));
        tile.queries = qa.data();
        tile.n_queries = qa.size();
        avx2::attention_tile(tile, scratch.data());
        tile.queries = qz.data();
        avx512::attention_tile(tile, scratch.data());
        EXPECT_TRUE(same_bits(a, z)) << "head " << head;
      }
    }
  }
}

// The AVX-512 decode path (one n_pos for every query, rows read straight from the pages) gives the AVX2 tile's
// bits for every pair it is built for, each type with itself and q8_0 / f16 keys with smaller values, heads of
// whole blocks; it leaves other pairs and heads inside blocks to attention_tile, computing nothing.
TEST(AttentionKvTypes, SharedTileBitIdenticalToAvx2OrRefused) {
  if (!avx512::available()) GTEST_SKIP() << "CPU lacks AVX-512";
  const auto run_shared = [](const PagedKv& kv, size_t head, std::vector<AttnQuery>& queries) {
    AttnTile tile;
    tile.kv = kv.pages(head);
    tile.head_dim = kv.head_dim;
    tile.scale = 0.2f;
    tile.queries = queries.data();
    tile.n_queries = queries.size();
    std::vector<float> scratch(attention_scratch_floats(kv.head_dim, queries.size()));
    return avx512::attention_tiles_shared(&tile, 1, scratch.data(), 0);
  };
  std::vector<std::pair<KvType, KvType>> built;
  for (KvType t : kAllKvTypes) built.emplace_back(t, t);
  for (KvType v : {KvType::Q4_0, KvType::Q4_1, KvType::IQ4_NL, KvType::Q5_0, KvType::Q5_1}) {
    built.emplace_back(KvType::Q8_0, v);
  }
  built.emplace_back(KvType::F16, KvType::Q8_0);
  built.emplace_back(KvType::F16, KvType::Q4_0);
  for (const auto& [k_type, v_type] : built) {
    for (int32_t n_pos : {1, 9, 33, 70}) {
      SCOPED_TRACE(std::string("K ") + kv_type_name(k_type) + " V " + kv_type_name(v_type) + " n_pos " +
                   std::to_string(n_pos));
      PagedKv kv(k_type, v_type, 64, 2, 7, 70, 81);
      for (int32_t p = n_pos; p < 70; ++p) kv.poison(p);  // never read
      const auto q = test::random_floats(64 * 5, 82, 3.0f);
      std::vector<float> want(64 * 5), got(64 * 5);
      std::vector<AttnQuery> qw, qg;
      for (size_t j = 0; j < 5; ++j) {
        qw.push_back({q.data() + j * 64, want.data() + j * 64, n_pos});
        qg.push_back({q.data() + j * 64, got.data() + j * 64, n_pos});
      }
      run_tile(avx2::attention_tile, kv.pages(1), 64, 0.2f, qw);
      ASSERT_TRUE(run_shared(kv, 1, qg));
      EXPECT_TRUE(same_bits(want, got));
    }
  }
  const auto refused = [&](const PagedKv& kv, size_t head) {
    const auto q = test::random_floats(kv.head_dim, 5, 1.0f);
    std::vector<float> out(kv.head_dim, -7.0f);
    std::vector<AttnQuery> queries = {{q.data(), out.data(), 20}};
    const bool taken = run_shared(kv, head, queries);
    EXPECT_EQ(out[0], -7.0f);
    return !taken;
  };
  EXPECT_TRUE(refused(PagedKv(KvType::Q4_1, KvType::F16, 64, 2, 16, 20, 3), 1));   // a pair not built
  EXPECT_TRUE(refused(PagedKv(KvType::Q8_0, 16, 4, 16, 20, 3), 1));                // head 1 inside a block
  EXPECT_TRUE(refused(PagedKv(KvType::Q4_0, KvType::Q4_0, 48, 2, 16, 20, 3), 0));  // heads of 1.5 blocks
}

}  // namespace
}  // namespace preface::kernels
