// attention_tile: agreement with a double-precision softmax attention over paged rows, for every storage type and
// both code paths; and the exactness contract — a query's output does not depend on the other queries of its
// tile, and rows past a query's last position are never read.
#include "kernels/attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kernels/kernel_test_util.h"
#include "util/fp16.h"

namespace preface::kernels {
namespace {

using AttnFn = void (*)(const AttnTile&, float*);

struct Path {
  const char* name;
  AttnFn fn;
};

std::vector<Path> paths() {
  std::vector<Path> p = {{"scalar", scalar::attention_tile}};
  if (avx2::available()) p.push_back({"avx2", avx2::attention_tile});
  if (avx512::available()) p.push_back({"avx512", avx512::attention_tile});
  return p;
}

size_t elem_bytes(KvElem e) { return e == KvElem::F32 ? 4 : 2; }

float stored_value(KvElem e, float v) {
  switch (e) {
    case KvElem::F32: return v;
    case KvElem::F16: return f16_to_f32(f32_to_f16(v));
    case KvElem::BF16: return bf16_to_f32(f32_to_bf16(v));
  }
  return v;
}

// Paged K/V for one sequence of n_pos positions: n_kv_heads heads per row, blocks in shuffled order, with a
// spare block (never in the table) so that tables do not cover the whole storage.
struct PagedKv {
  PagedKv(KvElem elem, size_t head_dim, size_t n_kv_heads, int32_t block_size, int32_t n_pos, uint32_t seed)
      : elem(elem), head_dim(head_dim), n_kv_heads(n_kv_heads), block_size(block_size), n_pos(n_pos) {
    const int32_t n_blocks = (n_pos + block_size - 1) / block_size + 1;
    row_bytes = n_kv_heads * head_dim * elem_bytes(elem);
    k.assign(static_cast<size_t>(n_blocks * block_size) * row_bytes, 0);
    v.assign(k.size(), 0);
    table.resize(static_cast<size_t>(n_blocks - 1));
    std::iota(table.begin(), table.end(), 1);
    std::shuffle(table.begin(), table.end(), std::mt19937(seed));
    const auto values = test::random_floats(static_cast<size_t>(n_pos) * n_kv_heads * head_dim * 2, seed + 1);
    kf.resize(values.size() / 2);
    vf.resize(values.size() / 2);
    for (int32_t p = 0; p < n_pos; ++p) {
      for (size_t i = 0; i < n_kv_heads * head_dim; ++i) {
        const size_t at = static_cast<size_t>(p) * n_kv_heads * head_dim + i;
        kf[at] = stored_value(elem, values[2 * at]);
        vf[at] = stored_value(elem, values[2 * at + 1]);
        write(k.data(), p, i, values[2 * at]);
        write(v.data(), p, i, values[2 * at + 1]);
      }
    }
  }

  uint8_t* row(uint8_t* base, int32_t pos) {
    const size_t block = static_cast<size_t>(table[static_cast<size_t>(pos / block_size)]);
    return base + (block * static_cast<size_t>(block_size) + static_cast<size_t>(pos % block_size)) * row_bytes;
  }

  void write(uint8_t* base, int32_t pos, size_t i, float value) {
    uint8_t* dst = row(base, pos) + i * elem_bytes(elem);
    if (elem == KvElem::F32) {
      std::memcpy(dst, &value, 4);
    } else {
      const uint16_t h = elem == KvElem::F16 ? f32_to_f16(value) : f32_to_bf16(value);
      std::memcpy(dst, &h, 2);
    }
  }

  KvPages pages(size_t kv_head) const {
    KvPages p;
    p.elem = elem;
    p.k_base = k.data();
    p.v_base = v.data();
    p.block_table = table.data();
    p.block_size = block_size;
    p.row_bytes = row_bytes;
    p.head_offset_bytes = kv_head * head_dim * elem_bytes(elem);
    return p;
  }

  KvElem elem;
  size_t head_dim, n_kv_heads;
  int32_t block_size, n_pos;
  size_t row_bytes = 0;
  std::vector<uint8_t> k, v;     // [n_blocks][block_size][row_bytes]
  std::vector<int32_t> table;    // position block -> storage block (block 0 is never used)
  std::vector<float> kf, vf;     // [n_pos][n_kv_heads][head_dim] the stored values as f32
};

// Double-precision softmax(q' . K / sqrt(d)) V over positions 0..n_pos-1 of kv_head, q' = q rounded to the
// storage type (as the kernel documents).
std::vector<double> reference(const PagedKv& kv, size_t kv_head, const float* q, int32_t n_pos, float scale) {
  const size_t d = kv.head_dim, stride = kv.n_kv_heads * d;
  std::vector<double> s(static_cast<size_t>(n_pos));
  for (int32_t p = 0; p < n_pos; ++p) {
    double dot = 0;
    for (size_t i = 0; i < d; ++i) dot += double{stored_value(kv.elem, q[i])} * kv.kf[p * stride + kv_head * d + i];
    s[static_cast<size_t>(p)] = dot * scale;
  }
  const double m = *std::max_element(s.begin(), s.end());
  double sum = 0;
  for (double& e : s) sum += (e = std::exp(e - m));
  std::vector<double> out(d, 0.0);
  for (int32_t p = 0; p < n_pos; ++p) {
    for (size_t i = 0; i < d; ++i) out[i] += s[static_cast<size_t>(p)] / sum * kv.vf[p * stride + kv_head * d + i];
  }
  return out;
}

void run_tile(AttnFn fn, const KvPages& pages, size_t head_dim, float scale, std::vector<AttnQuery>& queries) {
  AttnTile tile;
  tile.kv = pages;
  tile.head_dim = head_dim;
  tile.scale = scale;
  tile.queries = queries.data();
  tile.n_queries = queries.size();
  std::vector<float> scratch(attention_scratch_floats(head_dim, queries.size()));
  fn(tile, scratch.data());
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(AttentionTile, MatchesDoubleReference) {
  for (const Path& path : paths()) {
    for (KvElem elem : {KvElem::F32, KvElem::F16, KvElem::BF16}) {
      for (size_t head_dim : {8u, 20u, 64u, 128u}) {
        for (int32_t block_size : {1, 5, 16}) {
          SCOPED_TRACE(std::string(path.name) + " elem " + std::to_string(static_cast<int>(elem)) + " head_dim " +
                       std::to_string(head_dim) + " block " + std::to_string(block_size));
          const int32_t n_pos = 77;  // two full chunks and a partial one
          const PagedKv kv(elem, head_dim, 2, block_size, n_pos, 7);
          const auto q = test::random_floats(head_dim * 3, 8, 2.0f);
          const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
          std::vector<float> out(head_dim * 3, -1.0f);
          std::vector<AttnQuery> queries = {{q.data(), out.data(), n_pos},
                                            {q.data() + head_dim, out.data() + head_dim, 1},
                                            {q.data() + 2 * head_dim, out.data() + 2 * head_dim, 33}};
          run_tile(path.fn, kv.pages(1), head_dim, scale, queries);
          for (const AttnQuery& aq : queries) {
            const auto ref = reference(kv, 1, aq.q, aq.n_pos, scale);
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
    for (KvElem elem : {KvElem::F32, KvElem::F16, KvElem::BF16}) {
      SCOPED_TRACE(std::string(path.name) + " elem " + std::to_string(static_cast<int>(elem)));
      const size_t head_dim = 24;
      const int32_t n_pos = 70;
      PagedKv kv(elem, head_dim, 1, 4, n_pos, 11);
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
      for (int32_t p = 45; p < n_pos; ++p) {
        for (size_t i = 0; i < head_dim; ++i) {
          kv.write(kv.k.data(), p, i, NAN);
          kv.write(kv.v.data(), p, i, NAN);
        }
      }
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
  const PagedKv kv(KvElem::F16, head_dim, 4, 16, n_pos, 21);
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
  for (KvElem elem : {KvElem::F32, KvElem::F16, KvElem::BF16}) {
    for (size_t head_dim : {8u, 20u, 24u, 64u, 80u, 128u, 136u}) {
      SCOPED_TRACE("elem " + std::to_string(static_cast<int>(elem)) + " head_dim " + std::to_string(head_dim));
      const int32_t n_pos = 90;
      const PagedKv kv(elem, head_dim, 2, 7, n_pos, 71);
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

// A dominant score later in the sequence rescales what came before it: the running max must be applied.
TEST(AttentionTile, LateMaximumRescalesEarlierChunks) {
  for (const Path& path : paths()) {
    const size_t head_dim = 8;
    const int32_t n_pos = 100;
    PagedKv kv(KvElem::F32, head_dim, 1, 16, n_pos, 31);
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
