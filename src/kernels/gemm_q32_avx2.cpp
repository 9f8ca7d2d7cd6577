// AVX2 GEMM for Q4_1, Q5_0, Q5_1, IQ4_NL and MXFP4 weights (gemm_q32_avx2.h's tiles with maddubs + madd); every
// output the bits of the scalar traits dot.
#include "kernels/gemm_q32_avx2.h"

namespace preface::kernels::avx2 {
namespace {

struct MaddQ32Isa {  // maddubs then madd: callers keep each int16 pair sum below 2^15
  static constexpr bool kWideU8 = false;
  static __m256i dot(__m256i acc, __m256i u, __m256i s) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
  }
};

}  // namespace

void gemm_q32(const GemmArgs& args, int64_t row_begin, int64_t row_end) {
  if (!gemm_q32_tiles<MaddQ32Isa>(args, row_begin, row_end)) scalar::gemm_traits(args, row_begin, row_end);
}

}  // namespace preface::kernels::avx2
