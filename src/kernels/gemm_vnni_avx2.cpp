// GEMM with AVX-VNNI for the quantized types: vpdpbusd forms the same exact integer sums as maddubs + madd, one
// instruction instead of two, so every output is bit-identical to avx2::gemm's. Float types use the AVX2 tiles
// unchanged. Called only when the CPU reports AVX-VNNI.
//
// Shared inline helpers are included before the target pragma so that this file's copies of them are plain
// AVX2; the tile templates (internal linkage) are compiled here with AVX-VNNI enabled.
#include <immintrin.h>

#include <utility>

#include "kernels/dot.h"
#include "kernels/gemm.h"
#include "kernels/simd_avx2.h"

#ifndef __clang__  // clang ignores target pragmas: its builds pass the ISA flags for this file instead
#pragma GCC target("avx2,fma,f16c,avxvnni")
#endif
#include "kernels/gemm_tiles_avx2.h"

namespace preface::kernels::avx2 {
namespace {

struct VnniIsa {  // vpdpbusd: the 4 products of each lane summed in 32 bits, no intermediate saturation
  static constexpr bool kWideU8 = true;
  static __m256i dot(__m256i acc, __m256i u, __m256i s) { return _mm256_dpbusd_avx_epi32(acc, u, s); }
};

}  // namespace

void gemm_vnni(const GemmArgs& args, int64_t row_begin, int64_t row_end) {
  gemm_any_type<VnniIsa>(args, row_begin, row_end);
}

}  // namespace preface::kernels::avx2
