// The AVX-VNNI GEMM tiles of gemm_vnni_avx2.cpp with vpdpbusd in its EVEX form (AVX512-VNNI + VL, on 256-bit
// registers), for the AVX-512 kernels' leftover rows on CPUs that have AVX-512 VNNI but not the VEX-encoded
// AVX-VNNI (AMD Zen 4, Intel Ice Lake servers). The same instruction semantics, so the same bits.
// Only called where avx512::quant_available() (gemv_avx512.cpp).
//
// Standard headers come before the target pragma and the tile headers after it have internal linkage, so no code
// compiled for AVX-512 is shared with other translation units.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "kernels/dot.h"
#include "kernels/gemm.h"

#ifndef __clang__  // clang ignores target pragmas: its builds pass the ISA flags for this file instead
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c")
#endif
#include "kernels/gemm_tiles_avx2.h"  // after the target pragma: its inline code is compiled for AVX-512 VNNI

namespace preface::kernels::avx512 {
namespace {

struct EvexVnniIsa {  // vpdpbusd (EVEX): the 4 products of each lane summed in 32 bits, no intermediate saturation
  static constexpr bool kWideU8 = true;
  static __m256i dot(__m256i acc, __m256i u, __m256i s) { return _mm256_dpbusd_epi32(acc, u, s); }
};

}  // namespace

void gemm_vnni(const GemmArgs& args, int64_t row_begin, int64_t row_end) {
  avx2::gemm_any_type<EvexVnniIsa>(args, row_begin, row_end);
}

}  // namespace preface::kernels::avx512
