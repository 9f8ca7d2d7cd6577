// Paged K/V test storage and helpers shared by the attention_tile tests (attention_test.cpp,
// attention_window_test.cpp, attention_sinks_test.cpp): the code paths, storage-type names, a PagedKv of random
// rows and the double-precision reference.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kernels/attention.h"
#include "kernels/dot.h"
#include "kernels/kv_rows.h"
#include "kernels/kernel_test_util.h"
#include "util/fp16.h"

namespace preface::kernels::test_attention {

using AttnFn = void (*)(const AttnTile&, float*);

struct Path {
  const char* name;
  AttnFn fn;
};

inline std::vector<Path> paths() {
  std::vector<Path> p = {{"scalar", scalar::attention_tile}};
  if (avx2::available()) p.push_back({"avx2", avx2::attention_tile});
  if (avx512::available()) p.push_back({"avx512", avx512::attention_tile});
  return p;
}

// Bytes of n values of e (block types: n % 32 == 0).
inline size_t elem_bytes(KvType e, size_t n) { return kv_row_bytes(e, n); }

inline const char* elem_name(KvType e) { return kv_type_name(e); }

// The query as the kernel uses it: rounded to F16/BF16 K storage, unchanged for F32 and the block types.
inline float query_value(KvType e, float v) {
  switch (e) {
    case KvType::F16: return f16_to_f32(f32_to_f16(v));
    case KvType::BF16: return bf16_to_f32(f32_to_bf16(v));
    default: return v;
  }
}

// Whether rows of n_kv_heads heads of head_dim values can be stored in e (block types: whole 32-value blocks).
inline bool row_fits(KvType e, size_t head_dim, size_t n_kv_heads) {
  return head_dim * n_kv_heads % kv_type_block_values(e) == 0;
}

// Paged K/V for one sequence of n_pos positions: n_kv_heads heads per row, blocks in shuffled order, with a
// spare block (never in the table) so that tables do not cover the whole storage. Rows are written whole by
// kv_write_row (a block type quantizes the row in 32-value blocks), and kf/vf hold kv_value's decoding.
struct PagedKv {
  PagedKv(KvType type, size_t head_dim, size_t n_kv_heads, int32_t block_size, int32_t n_pos, uint32_t seed)
      : PagedKv(type, type, head_dim, n_kv_heads, block_size, n_pos, seed) {}
  PagedKv(KvType k_type, KvType v_type, size_t head_dim, size_t n_kv_heads, int32_t block_size, int32_t n_pos,
          uint32_t seed)
      : type(k_type), v_type(v_type), head_dim(head_dim), n_kv_heads(n_kv_heads), block_size(block_size),
        n_pos(n_pos) {
    const int32_t n_blocks = (n_pos + block_size - 1) / block_size + 1;
    const size_t row_values = n_kv_heads * head_dim;
    k_row_bytes = elem_bytes(k_type, row_values);
    v_row_bytes = elem_bytes(v_type, row_values);
    k.assign(static_cast<size_t>(n_blocks * block_size) * k_row_bytes, 0);
    v.assign(static_cast<size_t>(n_blocks * block_size) * v_row_bytes, 0);
    table.resize(static_cast<size_t>(n_blocks - 1));
    std::iota(table.begin(), table.end(), 1);
    std::shuffle(table.begin(), table.end(), std::mt19937(seed));
    const auto values = ::preface::kernels::test::random_floats(static_cast<size_t>(n_pos) * row_values * 2, seed + 1);
    std::vector<float> kx(values.size() / 2), vx(values.size() / 2);  // [n_pos][n_kv_heads][head_dim]
    for (size_t at = 0; at < kx.size(); ++at) {
      kx[at] = values[2 * at];
      vx[at] = values[2 * at + 1];
    }
    kf.resize(kx.size());
    vf.resize(vx.size());
    for (int32_t p = 0; p < n_pos; ++p) {
      const size_t at = static_cast<size_t>(p) * row_values;
      kv_write_row(k_type, kx.data() + at, row(k.data(), k_row_bytes, p), row_values);
      kv_write_row(v_type, vx.data() + at, row(v.data(), v_row_bytes, p), row_values);
      for (size_t i = 0; i < row_values; ++i) {
        kf[at + i] = kv_value(k_type, row(k.data(), k_row_bytes, p), i);
        vf[at + i] = kv_value(v_type, row(v.data(), v_row_bytes, p), i);
      }
    }
  }

  // Every value of position pos (K and V, all heads) becomes NaN: a block type's blocks get a NaN scale.
  void poison(int32_t pos) {
    const size_t row_values = n_kv_heads * head_dim;
    for (int side = 0; side < 2; ++side) {
      const KvType t = side == 0 ? type : v_type;
      uint8_t* r = side == 0 ? row(k.data(), k_row_bytes, pos) : row(v.data(), v_row_bytes, pos);
      if (kv_type_is_quantized(t)) {
        for (size_t b = 0; b < row_values / 32; ++b) {
          const uint16_t nan_f16 = 0x7e00;
          std::memcpy(r + b * kv_type_block_bytes(t), &nan_f16, 2);
        }
      } else {
        const float nan = NAN;
        for (size_t i = 0; i < row_values; ++i) kv_write_row(t, &nan, r + elem_bytes(t, i), 1);
      }
    }
  }

  // Value i of position pos of a F32/F16/BF16 region (base: k.data() or v.data()).
  void write(uint8_t* base, int32_t pos, size_t i, float value) {
    const bool is_k = base == k.data();
    const KvType t = is_k ? type : v_type;
    kv_write_row(t, &value, row(base, is_k ? k_row_bytes : v_row_bytes, pos) + elem_bytes(t, i), 1);
  }

  uint8_t* row(uint8_t* base, size_t row_bytes, int32_t pos) const {
    const size_t block = static_cast<size_t>(table[static_cast<size_t>(pos / block_size)]);
    return base + (block * static_cast<size_t>(block_size) + static_cast<size_t>(pos % block_size)) * row_bytes;
  }

  KvPages pages(size_t kv_head) const {
    KvPages p;
    p.k_type = type;
    p.v_type = v_type;
    p.k_base = k.data();
    p.v_base = v.data();
    p.block_table = table.data();
    p.block_size = block_size;
    p.k_row_bytes = k_row_bytes;
    p.v_row_bytes = v_row_bytes;
    p.head_value = kv_head * head_dim;
    return p;
  }

  KvType type;    // K rows' type
  KvType v_type;  // V rows' type
  size_t head_dim, n_kv_heads;
  int32_t block_size, n_pos;
  size_t k_row_bytes = 0, v_row_bytes = 0;
  std::vector<uint8_t> k, v;     // [n_blocks][block_size][row bytes]
  std::vector<int32_t> table;    // position block -> storage block (block 0 is never used)
  std::vector<float> kf, vf;     // [n_pos][n_kv_heads][head_dim] the stored values as f32
};

inline void run_tile(AttnFn fn, const KvPages& pages, size_t head_dim, float scale, std::vector<AttnQuery>& queries) {
  AttnTile tile;
  tile.kv = pages;
  tile.head_dim = head_dim;
  tile.scale = scale;
  tile.queries = queries.data();
  tile.n_queries = queries.size();
  std::vector<float> scratch(attention_scratch_floats(head_dim, queries.size()));
  fn(tile, scratch.data());
}

// Double-precision attention of q over positions [first, n_pos) of kv_head: softmax(cap(q' . K * scale)) V, q' = q
// rounded to the storage type (F16/BF16, as the kernel documents), cap the soft-cap when cap > 0, and a sink logit
// joining the denominator when it is finite.
inline std::vector<double> reference_attention(const PagedKv& kv, size_t kv_head, const float* q, int32_t first,
                                               int32_t n_pos, float scale, float cap = 0.0f,
                                               float sink = -INFINITY) {
  const size_t d = kv.head_dim, stride = kv.n_kv_heads * d;
  std::vector<double> s;
  for (int32_t p = first; p < n_pos; ++p) {
    double dot = 0;
    for (size_t i = 0; i < d; ++i) dot += double{query_value(kv.type, q[i])} * kv.kf[p * stride + kv_head * d + i];
    dot *= scale;
    s.push_back(cap > 0 ? cap * std::tanh(dot / cap) : dot);
  }
  double m = *std::max_element(s.begin(), s.end());
  if (std::isfinite(sink)) m = std::max(m, double{sink});
  double sum = std::isfinite(sink) ? std::exp(double{sink} - m) : 0.0;
  for (double& e : s) sum += (e = std::exp(e - m));
  std::vector<double> out(d, 0.0);
  for (int32_t p = first; p < n_pos; ++p) {
    const double w = s[static_cast<size_t>(p - first)] / sum;
    for (size_t i = 0; i < d; ++i) out[i] += w * kv.vf[p * stride + kv_head * d + i];
  }
  return out;
}

inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace preface::kernels::test_attention
