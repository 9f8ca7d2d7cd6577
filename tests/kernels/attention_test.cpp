// attention_tile: agreement with a double-precision softmax attention over paged rows, for every storage type and
// every code path; and the exactness contract — a query's output does not depend on the other queries of its
// tile, rows past a query's last position are never read, Q8_0 rows are dequantized exactly (the same bits as F32
// storage of the dequantized values, on every path) and the non-scalar paths agree bit for bit.
#include "kernels/attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "gguf/writer.h"
#include "kernels/dot.h"
#include "kernels/kernel_test_util.h"
#include "kernels/paged_kv.h"
#include "util/fp16.h"

namespace preface::kernels {
namespace {

using namespace test_attention;  // NOLINT: the shared fixtures of paged_kv.h

TEST(AttentionTile, MatchesDoubleReference) {
  for (const Path& path : paths()) {
    for (KvType type : kAllKvTypes) {
      for (size_t head_dim : {8u, 20u, 32u, 64u, 128u}) {
        if (!row_fits(type, head_dim, 2)) continue;
        for (int32_t block_size : {1, 5, 16}) {
          SCOPED_TRACE(std::string(path.name) + " type " + elem_name(type) + " head_dim " +
                       std::to_string(head_dim) + " block " + std::to_string(block_size));
          const int32_t n_pos = 77;  // two full chunks and a partial one
          const PagedKv kv(type, head_dim, 2, block_size, n_pos, 7);
          const auto q = test::random_floats(head_dim * 3, 8, 2.0f);
          const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
          std::vector<float> out(head_dim * 3, -1.0f);
          std::vector<AttnQuery> queries = {{q.data(), out.data(), n_pos},
                                            {q.data() + head_dim, out.data() + head_dim, 1},
                                            {q.data() + 2 * head_dim, out.data() + 2 * head_dim, 33}};
          run_tile(path.fn, kv.pages(1), head_dim, scale, queries);
          for (const AttnQuery& aq : queries) {
            const auto ref = reference_attention(kv, 1, aq.q, 0, aq.n_pos, scale);
            for (size_t i = 0; i < head_dim; ++i) {
              ASSERT_NEAR(aq.out[i], ref[i], 2e-5 + 2e-5 * std::fabs(ref[i])) << "n_pos " << aq.n_pos << " dim " << i;
            }
          }
        }
      }
    }
  }
}

// One query's output is the same bits alone and in a tile with other queries of other lengths, at any position in
// the tile; and rows past its last position (here NaN) are never read.
TEST(AttentionTile, QueryIndependentOfTileAndUnreadRows) {
  for (const Path& path : paths()) {
    for (KvType type : kAllKvTypes) {
      SCOPED_TRACE(std::string(path.name) + " type " + elem_name(type));
      const size_t head_dim = kv_type_is_quantized(type) ? 64 : 24;
      const int32_t n_pos = 70;
      PagedKv kv(type, head_dim, 1, 4, n_pos, 11);
      const auto q = test::random_floats(head_dim * 4, 12, 3.0f);
      const float scale = 0.3f;
      const int32_t lengths[] = {45, 70, 1, 32};
      std::vector<float> alone(head_dim * 4);
      for (size_t j = 0; j < 4; ++j) {
        std::vector<AttnQuery> one = {{q.data() + j * head_dim, alone.data() + j * head_dim, lengths[j]}};
        run_tile(path.fn, kv.pages(0), head_dim, scale, one);
      }
      std::vector<float> tiled(head_dim * 4), reversed(head_dim * 4);
      std::vector<AttnQuery> all, back;
      for (size_t j = 0; j < 4; ++j) all.push_back({q.data() + j * head_dim, tiled.data() + j * head_dim, lengths[j]});
      for (size_t j = 4; j-- > 0;) {
        back.push_back({q.data() + j * head_dim, reversed.data() + j * head_dim, lengths[j]});
      }
      run_tile(path.fn, kv.pages(0), head_dim, scale, all);
      run_tile(path.fn, kv.pages(0), head_dim, scale, back);
      EXPECT_TRUE(same_bits(alone, tiled));
      EXPECT_TRUE(same_bits(alone, reversed));

      // Poison positions 45.. : the 45-position query must not change.
      for (int32_t p = 45; p < n_pos; ++p) kv.poison(p);
      std::vector<float> poisoned(head_dim);
      std::vector<AttnQuery> first = {{q.data(), poisoned.data(), 45}};
      run_tile(path.fn, kv.pages(0), head_dim, scale, first);
      EXPECT_EQ(std::memcmp(poisoned.data(), alone.data(), head_dim * sizeof(float)), 0);
    }
  }
}

TEST(AttentionTile, Avx2AgreesWithScalar) {
  if (!avx2::available()) GTEST_SKIP() << "CPU lacks AVX2";
  const size_t head_dim = 64;
  const int32_t n_pos = 300;
  const PagedKv kv(KvType::F16, head_dim, 4, 16, n_pos, 21);
  const auto q = test::random_floats(head_dim, 22, 4.0f);
  std::vector<float> s(head_dim), a(head_dim);
  std::vector<AttnQuery> qs = {{q.data(), s.data(), n_pos}}, qa = {{q.data(), a.data(), n_pos}};
  run_tile(scalar::attention_tile, kv.pages(3), head_dim, 0.125f, qs);
  run_tile(avx2::attention_tile, kv.pages(3), head_dim, 0.125f, qa);
  for (size_t i = 0; i < head_dim; ++i) EXPECT_NEAR(a[i], s[i], 1e-5 + 1e-5 * std::fabs(s[i])) << i;
}

// The AVX-512 kernel is the AVX2 kernel's arithmetic with wider registers: same bits, for head sizes that fill
// 16-lane registers, leave an 8-lane tail, or need zero padding.
TEST(AttentionTile, Avx512BitIdenticalToAvx2) {
  if (!avx512::available()) GTEST_SKIP() << "CPU lacks AVX-512";
  for (KvType type : kAllKvTypes) {
    for (size_t head_dim : {8u, 20u, 24u, 32u, 64u, 80u, 96u, 128u, 136u}) {
      if (!row_fits(type, head_dim, 2)) continue;
      SCOPED_TRACE(std::string("type ") + elem_name(type) + " head_dim " + std::to_string(head_dim));
      const int32_t n_pos = 91;  // the last chunk has an odd number of rows (AVX-512 widens F16 rows in pairs)
      const PagedKv kv(type, head_dim, 2, 7, n_pos, 71);
      const auto q = test::random_floats(head_dim * 5, 72, 3.0f);
      std::vector<float> a(head_dim * 5), z(head_dim * 5);
      std::vector<AttnQuery> qa, qz;
      for (size_t j = 0; j < 5; ++j) {
        const int32_t n = static_cast<int32_t>(n_pos - 17 * j);
        qa.push_back({q.data() + j * head_dim, a.data() + j * head_dim, n});
        qz.push_back({q.data() + j * head_dim, z.data() + j * head_dim, n});
      }
      run_tile(avx2::attention_tile, kv.pages(1), head_dim, 0.2f, qa);
      run_tile(avx512::attention_tile, kv.pages(1), head_dim, 0.2f, qz);
      EXPECT_TRUE(same_bits(a, z));
    }
  }
}

// Tiles whose queries share n_pos (decode: one token's query heads) take AVX-512's direct path, which reads the
// rows from the pages without the f32 copy: the same bits as the AVX2 tile for any number of queries (scored and
// accumulated four at a time) and any last chunk, Q8_0 rows included; positions from n_pos on are poisoned, so a
// read of one would show as NaN. Other tiles are refused.
TEST(AttentionTile, Avx512SharedTileBitIdenticalToAvx2) {
  if (!avx512::available()) GTEST_SKIP() << "CPU lacks AVX-512";
  const auto shared = [](const KvPages& pages, size_t head_dim, std::vector<AttnQuery>& queries) {
    AttnTile tile;
    tile.kv = pages;
    tile.head_dim = head_dim;
    tile.scale = 0.2f;
    tile.queries = queries.data();
    tile.n_queries = queries.size();
    std::vector<float> scratch(attention_scratch_floats(head_dim, queries.size()));
    return avx512::attention_tiles_shared(&tile, 1, scratch.data(), 0);
  };
  // Block sizes: rows one block apart (1), runs of a block crossing 8-row groups and chunks (7), whole blocks (16).
  for (KvType type : {KvType::F32, KvType::F16, KvType::BF16, KvType::Q8_0}) {  // the shared tile's types
    for (size_t head_dim : {16u, 64u, 80u, 128u}) {
      if (type == KvType::Q8_0 && head_dim % 32 != 0) continue;  // refused, below
      for (int32_t block_size : {1, 7, 16}) {
        PagedKv kv(type, head_dim, 2, block_size, 100, 91);
        for (int32_t n_pos : {96, 65, 64, 33, 32, 9, 8, 7, 1}) {  // descending: positions >= n_pos are poisoned
          for (int32_t p = n_pos; p < 100; ++p) kv.poison(p);
          for (size_t n_q : {1u, 2u, 3u, 4u, 5u, 8u}) {
            SCOPED_TRACE(std::string("type ") + elem_name(type) + " head_dim " + std::to_string(head_dim) +
                         " block " + std::to_string(block_size) + " n_pos " + std::to_string(n_pos) + " queries " +
                         std::to_string(n_q));
            const auto q = test::random_floats(head_dim * n_q, 92 + static_cast<uint32_t>(n_q), 3.0f);
            std::vector<float> a(head_dim * n_q), z(head_dim * n_q);
            std::vector<AttnQuery> qa, qz;
            for (size_t j = 0; j < n_q; ++j) {
              qa.push_back({q.data() + j * head_dim, a.data() + j * head_dim, n_pos});
              qz.push_back({q.data() + j * head_dim, z.data() + j * head_dim, n_pos});
            }
            run_tile(avx2::attention_tile, kv.pages(1), head_dim, 0.2f, qa);
            ASSERT_TRUE(shared(kv.pages(1), head_dim, qz));
            EXPECT_TRUE(same_bits(a, z));
          }
        }
      }
    }
  }
  const PagedKv q8(KvType::Q8_0, 64, 1, 16, 40, 93);
  const PagedKv f16_20(KvType::F16, 20, 1, 16, 40, 94);
  const PagedKv f16(KvType::F16, 64, 1, 16, 40, 95);
  const auto q = test::random_floats(64 * 2, 96);
  std::vector<float> out(64 * 2);
  std::vector<AttnQuery> one = {{q.data(), out.data(), 40}};
  std::vector<AttnQuery> uneven = {{q.data(), out.data(), 40}, {q.data() + 64, out.data() + 64, 39}};
  EXPECT_FALSE(shared(q8.pages(0), 48, one));  // Q8_0 heads of whole 32-value blocks only
  EXPECT_FALSE(shared(f16_20.pages(0), 20, one));
  EXPECT_FALSE(shared(f16.pages(0), 64, uneven));
}

// attention_tiles over the KV heads of one storage (more than the 8 the AVX-512 path runs together, each tile with
// its own n_pos) gives each tile's attention_tile bits; a tile whose queries differ in n_pos sends the whole call
// one tile at a time, with the same results.
TEST(AttentionTile, TilesTogetherBitIdenticalToOneAtATime) {
  if (!avx2::available()) GTEST_SKIP() << "CPU lacks AVX2";
  constexpr size_t kHeads = 9, kGroup = 3, kHeadDim = 64;
  const PagedKv kv(KvType::F16, kHeadDim, kHeads, 5, 120, 97);
  const auto q = test::random_floats(kHeads * kGroup * kHeadDim, 98, 3.0f);
  for (bool uneven : {false, true}) {
    SCOPED_TRACE(uneven ? "one tile's queries differ in n_pos" : "every tile's queries share n_pos");
    std::vector<float> want(q.size()), got(q.size());
    std::vector<AttnQuery> qw, qg;
    for (size_t h = 0; h < kHeads; ++h) {
      for (size_t j = 0; j < kGroup; ++j) {
        const size_t at = (h * kGroup + j) * kHeadDim;
        const int32_t n_pos = 120 - 7 * static_cast<int32_t>(h) - (uneven && h == 4 ? static_cast<int32_t>(j) : 0);
        qw.push_back({q.data() + at, want.data() + at, n_pos});
        qg.push_back({q.data() + at, got.data() + at, n_pos});
      }
    }
    const size_t stride = attention_scratch_floats(kHeadDim, kGroup);
    std::vector<AttnTile> tiles(kHeads);
    for (size_t h = 0; h < kHeads; ++h) {
      std::vector<AttnQuery> one(qw.begin() + static_cast<std::ptrdiff_t>(h * kGroup),
                                 qw.begin() + static_cast<std::ptrdiff_t>((h + 1) * kGroup));
      run_tile(avx2::attention_tile, kv.pages(h), kHeadDim, 0.2f, one);
      tiles[h].kv = kv.pages(h);
      tiles[h].head_dim = kHeadDim;
      tiles[h].scale = 0.2f;
      tiles[h].queries = qg.data() + h * kGroup;
      tiles[h].n_queries = kGroup;
    }
    std::vector<float> scratch(kHeads * stride);
    attention_tiles(tiles.data(), kHeads, scratch.data(), stride);
    EXPECT_TRUE(same_bits(want, got));
    if (avx512::available()) {
      EXPECT_EQ(avx512::attention_tiles_shared(tiles.data(), kHeads, scratch.data(), stride), !uneven);
    }
  }
}

// The non-scalar paths agree with the scalar reference on Q8_0 storage (closely: their arithmetic differs), and
// with each other bit for bit (AVX-512 is checked against AVX2 in Avx512BitIdenticalToAvx2).
TEST(AttentionTile, Q8_0SimdAgreesWithScalar) {
  if (!avx2::available()) GTEST_SKIP() << "CPU lacks AVX2";
  const size_t head_dim = 128;
  const int32_t n_pos = 260;
  const PagedKv kv(KvType::Q8_0, head_dim, 2, 16, n_pos, 51);
  const auto q = test::random_floats(head_dim, 52, 4.0f);
  std::vector<float> s(head_dim);
  std::vector<AttnQuery> qs = {{q.data(), s.data(), n_pos}};
  run_tile(scalar::attention_tile, kv.pages(1), head_dim, 0.09f, qs);
  for (const Path& path : paths()) {
    std::vector<float> a(head_dim);
    std::vector<AttnQuery> qa = {{q.data(), a.data(), n_pos}};
    run_tile(path.fn, kv.pages(1), head_dim, 0.09f, qa);
    for (size_t i = 0; i < head_dim; ++i) EXPECT_NEAR(a[i], s[i], 1e-5 + 1e-5 * std::fabs(s[i])) << path.name << i;
  }
}

// The KV store quantizes rows with quantize_row_q8_0: on every path its bytes are the GGUF codec's (so a stored
// row depends only on its f32 values), including all-zero blocks, exact ties (x * id = k + 0.5) and blocks whose
// largest magnitude is negative.
TEST(KvQuantizer, Q8_0BytesEqualGgufCodec) {
  std::vector<void (*)(const float*, BlockQ8_0*, size_t)> quantizers = {quantize_row_q8_0,
                                                                       scalar::quantize_row_q8_0};
  if (avx2::available()) quantizers.push_back(avx2::quantize_row_q8_0);
  if (avx512::available()) quantizers.push_back(avx512::quantize_row_q8_0);
  for (uint32_t seed = 0; seed < 40; ++seed) {
    const size_t n = 32 * (1 + seed % 5);
    std::vector<float> x = test::random_floats(n, 900 + seed, seed % 3 == 0 ? 1e-3f : 7.0f);
    if (seed % 4 == 1) std::fill(x.begin(), x.begin() + 32, 0.0f);
    if (seed % 4 == 2) {  // amax 127 gives d = 1, id = 1: halves are exact ties
      for (size_t i = 0; i < 32; ++i) x[i] = static_cast<float>(static_cast<int>(i) - 16) + 0.5f;
      x[31] = -127.0f;
    }
    const std::vector<uint8_t> codec = gguf::encode_values(gguf::TensorType::Q8_0, x.data(), n);
    for (auto* quantize : quantizers) {
      std::vector<BlockQ8_0> got(n / 32);
      quantize(x.data(), got.data(), n);
      ASSERT_EQ(codec.size(), got.size() * sizeof(BlockQ8_0));
      EXPECT_EQ(std::memcmp(codec.data(), got.data(), codec.size()), 0) << "seed " << seed;
    }
  }
}

// A dominant score later in the sequence rescales what came before it: the running max must be applied.
TEST(AttentionTile, LateMaximumRescalesEarlierChunks) {
  for (const Path& path : paths()) {
    const size_t head_dim = 8;
    const int32_t n_pos = 100;
    PagedKv kv(KvType::F32, head_dim, 1, 16, n_pos, 31);
    for (int32_t p = 0; p < n_pos; ++p) {
      for (size_t i = 0; i < head_dim; ++i) {
        kv.write(kv.k.data(), p, i, p == 90 ? 10.0f : 0.0f);
        kv.write(kv.v.data(), p, i, p == 90 ? 1.0f : 0.0f);
        kv.kf[static_cast<size_t>(p) * head_dim + i] = p == 90 ? 10.0f : 0.0f;
        kv.vf[static_cast<size_t>(p) * head_dim + i] = p == 90 ? 1.0f : 0.0f;
      }
    }
    const std::vector<float> q(head_dim, 1.0f);
    std::vector<float> out(head_dim);
    std::vector<AttnQuery> qs = {{q.data(), out.data(), n_pos}};
    run_tile(path.fn, kv.pages(0), head_dim, 1.0f, qs);
    // Score 80 at position 90 against 0 elsewhere: weight 1 / (1 + 99 e^-80) ~ 1.
    for (float v : out) EXPECT_NEAR(v, 1.0f, 1e-6) << path.name;
  }
}

}  // namespace
}  // namespace preface::kernels
