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

#include "gguf/writer.h"
#include "kernels/attention.h"
#include "kernels/dot.h"
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

// Bytes of n values of e (Q8_0: n % 32 == 0).
inline size_t elem_bytes(KvType e, size_t n) { return e == KvType::F32 ? 4 * n : e == KvType::Q8_0 ? n / 32 * 34 : 2 * n; }

inline const char* elem_name(KvType e) {
  switch (e) {
    case KvType::F32: return "f32";
    case KvType::F16: return "f16";
    case KvType::BF16: return "bf16";
    case KvType::Q8_0: return "q8_0";
  }
  return "?";
}

// The query as the kernel uses it: rounded to F16/BF16 storage, unchanged for F32 and Q8_0.
inline float query_value(KvType e, float v) {
  switch (e) {
    case KvType::F32: return v;
    case KvType::F16: return f16_to_f32(f32_to_f16(v));
    case KvType::BF16: return bf16_to_f32(f32_to_bf16(v));
    case KvType::Q8_0: return v;
  }
  return v;
}

// Paged K/V for one sequence of n_pos positions: n_kv_heads heads per row, blocks in shuffled order, with a
// spare block (never in the table) so that tables do not cover the whole storage. Q8_0 rows are written by the
// GGUF codec (gguf::encode_values), one head at a time, and kf/vf hold its decoding.
struct PagedKv {
  PagedKv(KvType type, size_t head_dim, size_t n_kv_heads, int32_t block_size, int32_t n_pos, uint32_t seed)
      : type(type), head_dim(head_dim), n_kv_heads(n_kv_heads), block_size(block_size), n_pos(n_pos) {
    const int32_t n_blocks = (n_pos + block_size - 1) / block_size + 1;
    row_bytes = n_kv_heads * elem_bytes(type, head_dim);
    k.assign(static_cast<size_t>(n_blocks * block_size) * row_bytes, 0);
    v.assign(k.size(), 0);
    table.resize(static_cast<size_t>(n_blocks - 1));
    std::iota(table.begin(), table.end(), 1);
    std::shuffle(table.begin(), table.end(), std::mt19937(seed));
    const auto values = ::preface::kernels::test::random_floats(static_cast<size_t>(n_pos) * n_kv_heads * head_dim * 2, seed + 1);
    std::vector<float> kx(values.size() / 2), vx(values.size() / 2);  // [n_pos][n_kv_heads][head_dim]
    for (size_t at = 0; at < kx.size(); ++at) {
      kx[at] = values[2 * at];
      vx[at] = values[2 * at + 1];
    }
    kf.resize(kx.size());
    vf.resize(vx.size());
    for (int32_t p = 0; p < n_pos; ++p) {
      for (size_t h = 0; h < n_kv_heads; ++h) {
        const size_t at = (static_cast<size_t>(p) * n_kv_heads + h) * head_dim;
        write_head(k.data(), p, h, kx.data() + at, kf.data() + at);
        write_head(v.data(), p, h, vx.data() + at, vf.data() + at);
      }
    }
  }

  // Stores head h of position pos from x[head_dim]; stored[head_dim] receives the values as stored.
  void write_head(uint8_t* base, int32_t pos, size_t h, const float* x, float* stored) {
    if (type == KvType::Q8_0) {
      const std::vector<uint8_t> bytes = gguf::encode_values(gguf::TensorType::Q8_0, x, head_dim);
      std::memcpy(row(base, pos) + h * elem_bytes(type, head_dim), bytes.data(), bytes.size());
      gguf::decode_values(gguf::TensorType::Q8_0, bytes.data(), head_dim, stored);
      return;
    }
    for (size_t i = 0; i < head_dim; ++i) {
      write(base, pos, h * head_dim + i, x[i]);
      stored[i] = query_value(type, x[i]);
    }
  }

  // Every value of position pos (K and V, all heads) becomes NaN: Q8_0 blocks get a NaN scale.
  void poison(int32_t pos) {
    for (uint8_t* base : {k.data(), v.data()}) {
      if (type == KvType::Q8_0) {
        for (size_t b = 0; b < n_kv_heads * head_dim / 32; ++b) {
          const uint16_t nan_f16 = 0x7e00;
          std::memcpy(row(base, pos) + b * 34, &nan_f16, 2);
        }
      } else {
        for (size_t i = 0; i < n_kv_heads * head_dim; ++i) write(base, pos, i, NAN);
      }
    }
  }

  uint8_t* row(uint8_t* base, int32_t pos) {
    const size_t block = static_cast<size_t>(table[static_cast<size_t>(pos / block_size)]);
    return base + (block * static_cast<size_t>(block_size) + static_cast<size_t>(pos % block_size)) * row_bytes;
  }

  // Value i of a F32/F16/BF16 row.
  void write(uint8_t* base, int32_t pos, size_t i, float value) {
    uint8_t* dst = row(base, pos) + elem_bytes(type, i);
    if (type == KvType::F32) {
      std::memcpy(dst, &value, 4);
    } else {
      const uint16_t h = type == KvType::F16 ? f32_to_f16(value) : f32_to_bf16(value);
      std::memcpy(dst, &h, 2);
    }
  }

  KvPages pages(size_t kv_head) const {
    KvPages p;
    p.type = type;
    p.k_base = k.data();
    p.v_base = v.data();
    p.block_table = table.data();
    p.block_size = block_size;
    p.row_bytes = row_bytes;
    p.head_offset_bytes = kv_head * elem_bytes(type, head_dim);
    return p;
  }

  KvType type;
  size_t head_dim, n_kv_heads;
  int32_t block_size, n_pos;
  size_t row_bytes = 0;
  std::vector<uint8_t> k, v;     // [n_blocks][block_size][row_bytes]
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
