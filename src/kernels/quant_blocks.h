// Block layouts of the ggml quantized types beyond Q8_0 / Q4_0 (gguf/types.h), little-endian, as GGUF stores
// them, and the 8-bit activation block the K-quants multiply with. f16 fields are raw uint16 bits.
//
// 32-value blocks (value j and j + 16 share byte j of qs: low nibble, high nibble):
//   Q4_1   { d, m; qs[16] }                       x = d * q + m,           q in 0..15
//   Q5_0   { d; qh[4]; qs[16] }                   x = d * (q - 16),        q = nibble | bit j (j + 16) of qh << 4
//   Q5_1   { d, m; qh[4]; qs[16] }                x = d * q + m
//   IQ4_NL { d; qs[16] }                          x = d * kIq4nlValues[nibble]
//   MXFP4  { e; qs[16] }                          x = e8m0_half(e) * kMxfp4Values[nibble]  (e: a u8 exponent)
// 256-value super-blocks (QK_K):
//   Q2_K   { scales[16]; qs[64]; d, dmin }        16 groups of 16: x = d * (sc & 15) * q - dmin * (sc >> 4), q 2 bits
//   Q3_K   { hmask[32]; qs[64]; scales[12]; d }   16 groups of 16: x = d * (s6 - 32) * (q2 - (hbit ? 0 : 4))
//   Q4_K   { d, dmin; scales[12]; qs[128] }       8 groups of 32: x = d * s6 * q - dmin * m6, q 4 bits
//   Q5_K   { d, dmin; scales[12]; qh[32]; qs[128] } as Q4_K with a fifth bit from qh
//   Q6_K   { ql[128]; qh[64]; scales[16] (int8); d } 16 groups of 16: x = d * sc * (q6 - 32)
//   IQ4_XS { d; scales_h; scales_l[4]; qs[128] }  8 groups of 32: x = d * (s6 - 32) * kIq4nlValues[nibble]
//   Q8_K   { float d; int8 qs[256]; int16 bsums[16] }  activations: x = d * q, bsums = sums of 16 values
// (s6, m6: 6-bit scales and mins packed into 12 bytes; see quant_dequant.cpp.)
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace preface::kernels {

inline constexpr size_t kQK = 256;  // values per K-quant super-block

struct BlockQ4_1 { uint16_t d, m; uint8_t qs[16]; };
struct BlockQ5_0 { uint16_t d; uint8_t qh[4]; uint8_t qs[16]; };
struct BlockQ5_1 { uint16_t d, m; uint8_t qh[4]; uint8_t qs[16]; };
struct BlockIQ4_NL { uint16_t d; uint8_t qs[16]; };
struct BlockMXFP4 { uint8_t e; uint8_t qs[16]; };
struct BlockQ2_K { uint8_t scales[16]; uint8_t qs[64]; uint16_t d, dmin; };
struct BlockQ3_K { uint8_t hmask[32]; uint8_t qs[64]; uint8_t scales[12]; uint16_t d; };
struct BlockQ4_K { uint16_t d, dmin; uint8_t scales[12]; uint8_t qs[128]; };
struct BlockQ5_K { uint16_t d, dmin; uint8_t scales[12]; uint8_t qh[32]; uint8_t qs[128]; };
struct BlockQ6_K { uint8_t ql[128]; uint8_t qh[64]; int8_t scales[16]; uint16_t d; };
struct BlockIQ4_XS { uint16_t d; uint16_t scales_h; uint8_t scales_l[4]; uint8_t qs[128]; };
struct BlockQ8_K { float d; int8_t qs[256]; int16_t bsums[16]; };

static_assert(sizeof(BlockQ4_1) == 20 && sizeof(BlockQ5_0) == 22 && sizeof(BlockQ5_1) == 24);
static_assert(sizeof(BlockIQ4_NL) == 18 && sizeof(BlockQ2_K) == 84 && sizeof(BlockQ3_K) == 110);
static_assert(sizeof(BlockQ4_K) == 144 && sizeof(BlockQ5_K) == 176 && sizeof(BlockQ6_K) == 210);
static_assert(sizeof(BlockIQ4_XS) == 136 && sizeof(BlockQ8_K) == 292 && sizeof(BlockMXFP4) == 17);

// The 16 non-linear levels of IQ4_NL and IQ4_XS.
inline constexpr int8_t kIq4nlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};

// MXFP4 (OCP Microscaling FP4, E2M1 elements): the 16 codes' values doubled, as ggml's kvalues_mxfp4 (0, 0.5, 1,
// 1.5, 2, 3, 4, 6 and their negatives, times 2), so that they are integers; the block scale is then halved.
inline constexpr int8_t kMxfp4Values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

// 2^(e - 128): half of MXFP4's E8M0 scale 2^(e - 127), as ggml's GGML_E8M0_TO_FP32_HALF (subnormal for e < 2; exact).
inline float e8m0_half(uint8_t e) {
  const uint32_t bits = e < 2 ? uint32_t{0x00200000} << e : static_cast<uint32_t>(e - 1) << 23;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// The 6-bit scale and min of group j (0..7) of a Q4_K / Q5_K super-block.
inline void scale_min_k4(int j, const uint8_t* q, uint8_t* sc, uint8_t* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = static_cast<uint8_t>((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    *m = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

// The 16 6-bit scales of a Q3_K super-block, minus 32 (-32..31).
void q3_k_scales(const uint8_t packed[12], int8_t out[16]);

}  // namespace preface::kernels
