// AVX2 attention_tile (attention.h): the shared tile (attention_tile_avx2.h) with 8-lane row dots and V
// accumulation. K rows are stored one after the other.
#include "kernels/attention_tile_avx2.h"

namespace preface::kernels::avx2 {
namespace {

struct YmmOps {
  static constexpr size_t kKSegStride = 8;  // K row i: [hp] at kbuf + i * hp
  static float* k_row(float* kbuf, size_t hp, int32_t i) { return kbuf + static_cast<size_t>(i) * hp; }
  static constexpr bool kPairsF16 = false;  // rows are widened one at a time (widen_chunk)

  // out[r] = 8-lane FMA accumulator of q . k_r for rows 8g..8g+7.
  static void dots8(const float* q, const float* kbuf, size_t hp, int g, __m256 out[8]) {
    for (int r = 0; r < 8; ++r) out[r] = _mm256_setzero_ps();
    const float* kg = kbuf + static_cast<size_t>(8 * g) * hp;  // [8][hp]
    for (size_t d = 0; d < hp; d += 8) {
      const __m256 qv = _mm256_loadu_ps(q + d);
      for (int r = 0; r < 8; ++r) out[r] = _mm256_fmadd_ps(_mm256_loadu_ps(kg + r * hp + d), qv, out[r]);
    }
  }

  // acc[0..8 NR) = acc * a + sum_i p[i] * vbuf[i][0..8 NR), i < n_valid in order. vbuf rows are hp floats apart.
  template <int NR>
  static void accumulate_regs(float* acc, float a, const float* p, const float* vbuf, size_t hp, int32_t n_valid) {
    __m256 r[NR];
    const __m256 va = _mm256_set1_ps(a);
    for (int k = 0; k < NR; ++k) r[k] = _mm256_mul_ps(_mm256_loadu_ps(acc + 8 * k), va);
    for (int32_t i = 0; i < n_valid; ++i) {
      const __m256 pi = _mm256_set1_ps(p[i]);
      const float* v = vbuf + static_cast<size_t>(i) * hp;
      for (int k = 0; k < NR; ++k) r[k] = _mm256_fmadd_ps(pi, _mm256_loadu_ps(v + 8 * k), r[k]);
    }
    for (int k = 0; k < NR; ++k) _mm256_storeu_ps(acc + 8 * k, r[k]);
  }

  static void accumulate_v(float* acc, float a, const float* p, const float* vbuf, size_t hp, int32_t n_valid) {
    for (size_t d0 = 0; d0 < hp; d0 += 64) {
      const size_t n_regs = hp - d0 >= 64 ? 8 : (hp - d0) / 8;
      float* ad = acc + d0;
      const float* vd = vbuf + d0;
      switch (n_regs) {
        case 1: accumulate_regs<1>(ad, a, p, vd, hp, n_valid); break;
        case 2: accumulate_regs<2>(ad, a, p, vd, hp, n_valid); break;
        case 3: accumulate_regs<3>(ad, a, p, vd, hp, n_valid); break;
        case 4: accumulate_regs<4>(ad, a, p, vd, hp, n_valid); break;
        case 5: accumulate_regs<5>(ad, a, p, vd, hp, n_valid); break;
        case 6: accumulate_regs<6>(ad, a, p, vd, hp, n_valid); break;
        case 7: accumulate_regs<7>(ad, a, p, vd, hp, n_valid); break;
        default: accumulate_regs<8>(ad, a, p, vd, hp, n_valid); break;
      }
    }
  }

  // Two queries: 8 registers per query already keep both FMA ports busy, so one after the other.
  static void accumulate_v2(float* acc0, float a0, const float* p0, int32_t n0, float* acc1, float a1,
                            const float* p1, int32_t n1, const float* vbuf, size_t hp) {
    accumulate_v(acc0, a0, p0, vbuf, hp, n0);
    accumulate_v(acc1, a1, p1, vbuf, hp, n1);
  }
};

}  // namespace

void attention_tile(const AttnTile& tile, float* scratch) { attention_tile_impl<YmmOps>(tile, scratch); }

}  // namespace preface::kernels::avx2
