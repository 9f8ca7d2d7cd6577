// Scratch layout shared by the scalar and AVX2 attention_tile (internal to src/kernels). Internal linkage, so the
// AVX2 translation unit's copy can never be picked for baseline code.
#pragma once
#include <cstddef>

#include "kernels/attention.h"

namespace preface::kernels {
namespace {

// Head vectors are padded with zeros to a multiple of 8 floats (one AVX2 register).
struct AttnLayout {
  explicit AttnLayout(size_t head_dim, size_t n_queries)
      : hd_pad((head_dim + 7) / 8 * 8),
        k(0),
        v(k + kAttnChunk * hd_pad),
        q(v + kAttnChunk * hd_pad),
        acc(q + n_queries * hd_pad),
        m(acc + n_queries * hd_pad),
        l(m + n_queries),
        a(l + n_queries),
        p(a + n_queries),
        total(p + n_queries * kAttnChunk) {}

  size_t hd_pad;  // padded head_dim
  // Offsets in floats:
  size_t k;      // [kAttnChunk][hd_pad] the chunk's K rows widened to f32 (zero rows past the last position)
  size_t v;      // [kAttnChunk][hd_pad] the chunk's V rows widened to f32
  size_t q;      // [n_queries][hd_pad] each query rounded to the storage type
  size_t acc;    // [n_queries][hd_pad] running sum of p_i * V_i
  size_t m;      // [n_queries] running max score
  size_t l;      // [n_queries] running sum of p_i
  size_t a;      // [n_queries] the current chunk's rescale factor exp(m_old - m_new)
  size_t p;      // [n_queries][kAttnChunk] the current chunk's scores, then weights
  size_t total;  // floats in all
};

}  // namespace
}  // namespace preface::kernels
