// Scalar dequantization of the types in quant_blocks.h: the same float operations, in the same order, as ggml's
// reference to_float (ggml-quants.c, without FMA contraction; the build passes -ffp-contract=off), so every
// tensor decodes to ggml's bits (checked against ggml's digests in tests/kernels/quant_dequant_test.cpp).
#include <cstring>

#include "kernels/quant.h"
#include "kernels/quant_blocks.h"
#include "util/fp16.h"

namespace preface::kernels {

void q3_k_scales(const uint8_t packed[12], int8_t out[16]) {
  for (int i = 0; i < 16; ++i) {
    const int low = i < 8 ? packed[i] & 0xF : packed[i - 8] >> 4;
    const int high = (packed[8 + i % 4] >> (2 * (i / 4))) & 3;
    out[i] = static_cast<int8_t>((low | (high << 4)) - 32);
  }
}

namespace scalar {

void dequantize_row_q4_1(const BlockQ4_1* x, float* y, size_t n) {
  for (size_t b = 0; b < n / 32; ++b, y += 32) {
    const float d = f16_to_f32(x[b].d), m = f16_to_f32(x[b].m);
    for (int j = 0; j < 16; ++j) {
      y[j] = static_cast<float>(x[b].qs[j] & 0xF) * d + m;
      y[j + 16] = static_cast<float>(x[b].qs[j] >> 4) * d + m;
    }
  }
}

namespace {
uint32_t high_bits(const uint8_t qh[4]) {
  uint32_t h;
  std::memcpy(&h, qh, 4);
  return h;
}
}  // namespace

void dequantize_row_q5_0(const BlockQ5_0* x, float* y, size_t n) {
  for (size_t b = 0; b < n / 32; ++b, y += 32) {
    const float d = f16_to_f32(x[b].d);
    const uint32_t qh = high_bits(x[b].qh);
    for (int j = 0; j < 16; ++j) {
      const int lo = static_cast<int>((x[b].qs[j] & 0xF) | (((qh >> j) << 4) & 0x10)) - 16;
      const int hi = static_cast<int>((x[b].qs[j] >> 4) | ((qh >> (j + 12)) & 0x10)) - 16;
      y[j] = static_cast<float>(lo) * d;
      y[j + 16] = static_cast<float>(hi) * d;
    }
  }
}

void dequantize_row_q5_1(const BlockQ5_1* x, float* y, size_t n) {
  for (size_t b = 0; b < n / 32; ++b, y += 32) {
    const float d = f16_to_f32(x[b].d), m = f16_to_f32(x[b].m);
    const uint32_t qh = high_bits(x[b].qh);
    for (int j = 0; j < 16; ++j) {
      const uint32_t lo = (x[b].qs[j] & 0xF) | (((qh >> j) << 4) & 0x10);
      const uint32_t hi = (x[b].qs[j] >> 4) | ((qh >> (j + 12)) & 0x10);
      y[j] = static_cast<float>(lo) * d + m;
      y[j + 16] = static_cast<float>(hi) * d + m;
    }
  }
}

void dequantize_row_iq4_nl(const BlockIQ4_NL* x, float* y, size_t n) {
  for (size_t b = 0; b < n / 32; ++b, y += 32) {
    const float d = f16_to_f32(x[b].d);
    for (int j = 0; j < 16; ++j) {
      y[j] = d * static_cast<float>(kIq4nlValues[x[b].qs[j] & 0xF]);
      y[j + 16] = d * static_cast<float>(kIq4nlValues[x[b].qs[j] >> 4]);
    }
  }
}

// As ggml's dequantize_row_mxfp4: each value an exact product of a small integer and a power of two.
void dequantize_row_mxfp4(const BlockMXFP4* x, float* y, size_t n) {
  for (size_t b = 0; b < n / 32; ++b, y += 32) {
    const float d = e8m0_half(x[b].e);
    for (int j = 0; j < 16; ++j) {
      y[j] = static_cast<float>(kMxfp4Values[x[b].qs[j] & 0xF]) * d;
      y[j + 16] = static_cast<float>(kMxfp4Values[x[b].qs[j] >> 4]) * d;
    }
  }
}

void dequantize_row_q2_k(const BlockQ2_K* x, float* y, size_t n) {
  for (size_t b = 0; b < n / kQK; ++b) {
    const float d = f16_to_f32(x[b].d), dmin = f16_to_f32(x[b].dmin);
    const uint8_t* q = x[b].qs;
    int is = 0;
    for (int half = 0; half < 2; ++half, q += 32) {
      for (int shift = 0; shift < 8; shift += 2) {
        for (int part = 0; part < 2; ++part) {
          const uint8_t sc = x[b].scales[is++];
          const float dl = d * static_cast<float>(sc & 0xF), ml = dmin * static_cast<float>(sc >> 4);
          for (int l = 0; l < 16; ++l) *y++ = dl * static_cast<float>((q[l + 16 * part] >> shift) & 3) - ml;
        }
      }
    }
  }
}

void dequantize_row_q3_k(const BlockQ3_K* x, float* y, size_t n) {
  for (size_t b = 0; b < n / kQK; ++b) {
    const float d = f16_to_f32(x[b].d);
    int8_t scales[16];
    q3_k_scales(x[b].scales, scales);
    const uint8_t* q = x[b].qs;
    uint8_t m = 1;
    int is = 0;
    for (int half = 0; half < 2; ++half, q += 32) {
      for (int shift = 0; shift < 8; shift += 2, m = static_cast<uint8_t>(m << 1)) {
        for (int part = 0; part < 2; ++part) {
          const float dl = d * static_cast<float>(scales[is++]);
          for (int l = 16 * part; l < 16 * part + 16; ++l) {
            const int v = ((q[l] >> shift) & 3) - ((x[b].hmask[l] & m) ? 0 : 4);
            *y++ = dl * static_cast<float>(v);
          }
        }
      }
    }
  }
}

namespace {
// Q4_K and Q5_K: 4 pairs of 32-value groups with 6-bit scales and mins; level(block, p, l, high) is value l of
// group 2p (high false: the low nibbles) or 2p + 1.
template <typename Block, typename Level>
void dequantize_k4(const Block* x, float* y, size_t n, Level level) {
  for (size_t b = 0; b < n / kQK; ++b) {
    const float d = f16_to_f32(x[b].d), dmin = f16_to_f32(x[b].dmin);
    for (int p = 0; p < 4; ++p) {
      uint8_t sc, m;
      scale_min_k4(2 * p, x[b].scales, &sc, &m);
      const float d1 = d * static_cast<float>(sc), m1 = dmin * static_cast<float>(m);
      scale_min_k4(2 * p + 1, x[b].scales, &sc, &m);
      const float d2 = d * static_cast<float>(sc), m2 = dmin * static_cast<float>(m);
      for (int l = 0; l < 32; ++l) *y++ = d1 * static_cast<float>(level(x[b], p, l, false)) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * static_cast<float>(level(x[b], p, l, true)) - m2;
    }
  }
}
}  // namespace

void dequantize_row_q4_k(const BlockQ4_K* x, float* y, size_t n) {
  dequantize_k4(x, y, n, [](const BlockQ4_K& b, int p, int l, bool high) {
    const uint8_t q = b.qs[32 * p + l];
    return high ? q >> 4 : q & 0xF;
  });
}

void dequantize_row_q5_k(const BlockQ5_K* x, float* y, size_t n) {
  dequantize_k4(x, y, n, [](const BlockQ5_K& b, int p, int l, bool high) {
    const uint8_t q = b.qs[32 * p + l];
    const int bit = (b.qh[l] >> (2 * p + (high ? 1 : 0))) & 1;
    return (high ? q >> 4 : q & 0xF) + 16 * bit;
  });
}

void dequantize_row_q6_k(const BlockQ6_K* x, float* y, size_t n) {
  for (size_t b = 0; b < n / kQK; ++b) {
    const float d = f16_to_f32(x[b].d);
    const uint8_t* ql = x[b].ql;
    const uint8_t* qh = x[b].qh;
    const int8_t* sc = x[b].scales;
    for (int half = 0; half < 2; ++half, y += 128, ql += 64, qh += 32, sc += 8) {
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l] = d * static_cast<float>(sc[is + 0]) * static_cast<float>(q1);
        y[l + 32] = d * static_cast<float>(sc[is + 2]) * static_cast<float>(q2);
        y[l + 64] = d * static_cast<float>(sc[is + 4]) * static_cast<float>(q3);
        y[l + 96] = d * static_cast<float>(sc[is + 6]) * static_cast<float>(q4);
      }
    }
  }
}

void dequantize_row_iq4_xs(const BlockIQ4_XS* x, float* y, size_t n) {
  for (size_t b = 0; b < n / kQK; ++b) {
    const float d = f16_to_f32(x[b].d);
    const uint8_t* qs = x[b].qs;
    for (int ib = 0; ib < 8; ++ib, qs += 16, y += 32) {
      const int ls = ((x[b].scales_l[ib / 2] >> (4 * (ib % 2))) & 0xF) | (((x[b].scales_h >> (2 * ib)) & 3) << 4);
      const float dl = d * static_cast<float>(ls - 32);
      for (int j = 0; j < 16; ++j) {
        y[j] = dl * static_cast<float>(kIq4nlValues[qs[j] & 0xF]);
        y[j + 16] = dl * static_cast<float>(kIq4nlValues[qs[j] >> 4]);
      }
    }
  }
}

}  // namespace scalar
}  // namespace preface::kernels
