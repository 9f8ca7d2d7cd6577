// Simple f32 -> block quantizers for Q4_1, Q5_0, Q5_1, IQ4_NL, Q4_K, Q5_K, Q6_K and IQ4_XS, for synthetic
// benchmark files (model/synth.h).
// They are the plain min/max (or absmax) fits, not llama-quantize's error-minimising searches, so a tensor
// quantized here differs from llama-quantize's choice for the same values; the blocks are valid for any reader,
// and dequantizing them (quant_dequant.cpp) is within a few percent of the input (tests/kernels/quant_quantize_test).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/quant.h"
#include "kernels/quant_blocks.h"
#include "util/fp16.h"

namespace preface::kernels {
namespace {

int nearest_clamped(float v, int lo, int hi) {
  return std::clamp(static_cast<int>(std::lround(v)), lo, hi);
}

// Packs 8 6-bit scales and mins the way scale_min_k4() unpacks them.
void pack_scale_min_k4(const uint8_t sc[8], const uint8_t m[8], uint8_t q[12]) {
  std::memset(q, 0, 12);
  for (int j = 0; j < 4; ++j) {
    q[j] = sc[j] & 63;
    q[j + 4] = m[j] & 63;
  }
  for (int j = 4; j < 8; ++j) {
    q[j + 4] = static_cast<uint8_t>((sc[j] & 0xF) | ((m[j] & 0xF) << 4));
    q[j - 4] = static_cast<uint8_t>(q[j - 4] | ((sc[j] >> 4) << 6));
    q[j] = static_cast<uint8_t>(q[j] | ((m[j] >> 4) << 6));
  }
}

// One super-block of Q4_K (levels 15) or Q5_K (levels 31): per 32-value group x ~ s * q - m with q in
// 0..levels, s and m 6-bit multiples of the f16 super-block scales d and dmin. q[256] receives the levels.
void fit_k4(const float* x, int levels, uint16_t* d_out, uint16_t* dmin_out, uint8_t scales[12], uint8_t q[256]) {
  float scale[8], min[8];  // per group: step and offset (x = step * q - offset)
  float max_scale = 0.0f, max_min = 0.0f;
  for (int j = 0; j < 8; ++j) {
    const float* g = x + 32 * j;
    const float lo = std::min(0.0f, *std::min_element(g, g + 32));
    const float hi = *std::max_element(g, g + 32);
    scale[j] = (hi - lo) / static_cast<float>(levels);
    min[j] = -lo;
    max_scale = std::max(max_scale, scale[j]);
    max_min = std::max(max_min, min[j]);
  }
  const uint16_t d16 = f32_to_f16(max_scale / 63.0f), dmin16 = f32_to_f16(max_min / 63.0f);
  const float d = f16_to_f32(d16), dmin = f16_to_f32(dmin16);
  uint8_t sc[8], m[8];
  for (int j = 0; j < 8; ++j) {
    sc[j] = static_cast<uint8_t>(d > 0.0f ? nearest_clamped(scale[j] / d, 0, 63) : 0);
    m[j] = static_cast<uint8_t>(dmin > 0.0f ? nearest_clamped(min[j] / dmin, 0, 63) : 0);
    const float step = d * static_cast<float>(sc[j]), offset = dmin * static_cast<float>(m[j]);
    for (int l = 0; l < 32; ++l) {
      const float v = x[32 * j + l];
      q[32 * j + l] = static_cast<uint8_t>(step > 0.0f ? nearest_clamped((v + offset) / step, 0, levels) : 0);
    }
  }
  pack_scale_min_k4(sc, m, scales);
  *d_out = d16;
  *dmin_out = dmin16;
}

// The index (0..15) of the IQ4_NL level nearest x at this step (the first of equals: 0 when step is 0).
int nearest_iq4nl(float x, float step) {
  int best = 0;
  float best_err = INFINITY;
  for (int k = 0; k < 16; ++k) {
    const float err = std::fabs(x - step * static_cast<float>(kIq4nlValues[k]));
    if (err < best_err) best = k, best_err = err;
  }
  return best;
}

// Q4_1 / Q5_1: x ~ d * q + m with m the block's minimum, q in 0..levels.
template <typename Block>
void quantize_min_32(const float* x, Block* b, size_t n, int levels) {
  for (size_t i = 0; i < n / 32; ++i, x += 32) {
    const float lo = *std::min_element(x, x + 32), hi = *std::max_element(x, x + 32);
    b[i].d = f32_to_f16((hi - lo) / static_cast<float>(levels));
    b[i].m = f32_to_f16(lo);
    const float d = f16_to_f32(b[i].d), m = f16_to_f32(b[i].m);
    uint8_t q[32];
    for (int j = 0; j < 32; ++j) q[j] = static_cast<uint8_t>(d > 0.0f ? nearest_clamped((x[j] - m) / d, 0, levels) : 0);
    if constexpr (requires { b[i].qh; }) {
      pack_levels_32(q, b[i].qs, b[i].qh);
    } else {
      pack_levels_32(q, b[i].qs, nullptr);
    }
  }
}

}  // namespace

void pack_levels_32(const uint8_t q[32], uint8_t qs[16], uint8_t* qh) {
  uint32_t h = 0;
  for (int j = 0; j < 16; ++j) qs[j] = static_cast<uint8_t>((q[j] & 0xF) | ((q[j + 16] & 0xF) << 4));
  for (int j = 0; j < 32; ++j) h |= static_cast<uint32_t>(q[j] >> 4) << j;
  if (qh != nullptr) std::memcpy(qh, &h, sizeof(h));
}

namespace scalar {
void quantize_row_q4_k(const float* x, void* out, size_t n) {
  auto* b = static_cast<BlockQ4_K*>(out);
  for (size_t i = 0; i < n / kQK; ++i, x += kQK) {
    uint8_t q[256];
    fit_k4(x, 15, &b[i].d, &b[i].dmin, b[i].scales, q);
    for (int p = 0; p < 4; ++p) {  // group 2p in the low nibbles of qs[32p..], group 2p+1 in the high ones
      for (int l = 0; l < 32; ++l) {
        b[i].qs[32 * p + l] = static_cast<uint8_t>(q[64 * p + l] | (q[64 * p + 32 + l] << 4));
      }
    }
  }
}

void quantize_row_q5_k(const float* x, void* out, size_t n) {
  auto* b = static_cast<BlockQ5_K*>(out);
  for (size_t i = 0; i < n / kQK; ++i, x += kQK) {
    uint8_t q[256];
    fit_k4(x, 31, &b[i].d, &b[i].dmin, b[i].scales, q);
    std::memset(b[i].qh, 0, sizeof(b[i].qh));
    for (int p = 0; p < 4; ++p) {
      for (int l = 0; l < 32; ++l) {
        const uint8_t lo = q[64 * p + l], hi = q[64 * p + 32 + l];
        b[i].qs[32 * p + l] = static_cast<uint8_t>((lo & 0xF) | ((hi & 0xF) << 4));
        b[i].qh[l] = static_cast<uint8_t>(b[i].qh[l] | ((lo >> 4) << (2 * p)) | ((hi >> 4) << (2 * p + 1)));
      }
    }
  }
}

// Q6_K: per 16-value group x ~ d * sc * (q - 32), q in 0..63, sc int8.
void quantize_row_q6_k(const float* x, void* out, size_t n) {
  auto* b = static_cast<BlockQ6_K*>(out);
  for (size_t i = 0; i < n / kQK; ++i, x += kQK) {
    float scale[16], max_scale = 0.0f;
    for (int g = 0; g < 16; ++g) {
      float amax = 0.0f;
      for (int l = 0; l < 16; ++l) amax = std::max(amax, std::fabs(x[16 * g + l]));
      scale[g] = amax / 31.0f;
      max_scale = std::max(max_scale, scale[g]);
    }
    b[i].d = f32_to_f16(max_scale / 127.0f);
    const float d = f16_to_f32(b[i].d);
    std::memset(b[i].ql, 0, sizeof(b[i].ql));
    std::memset(b[i].qh, 0, sizeof(b[i].qh));
    for (int g = 0; g < 16; ++g) {
      b[i].scales[g] = static_cast<int8_t>(d > 0.0f ? nearest_clamped(scale[g] / d, 0, 127) : 0);
    }
    for (int v = 0; v < 256; ++v) {  // v = 128 h + 32 k + l: see dequantize_row_q6_k
      const float step = d * static_cast<float>(b[i].scales[v / 16]);
      const int q = (step > 0.0f ? nearest_clamped(x[v] / step, -32, 31) : 0) + 32;
      const int h = v / 128, k = (v % 128) / 32, l = v % 32;
      uint8_t& ql = b[i].ql[64 * h + l + 32 * (k & 1)];
      ql = static_cast<uint8_t>(ql | ((q & 0xF) << (k < 2 ? 0 : 4)));
      b[i].qh[32 * h + l] = static_cast<uint8_t>(b[i].qh[32 * h + l] | ((q >> 4) << (2 * k)));
    }
  }
}

void quantize_row_q4_1(const float* x, void* out, size_t n) { quantize_min_32(x, static_cast<BlockQ4_1*>(out), n, 15); }
void quantize_row_q5_1(const float* x, void* out, size_t n) { quantize_min_32(x, static_cast<BlockQ5_1*>(out), n, 31); }

// Q5_0: x ~ d * (q - 16), q in 0..31; the value of largest magnitude maps to level 0 (-16).
void quantize_row_q5_0(const float* x, void* out, size_t n) {
  auto* b = static_cast<BlockQ5_0*>(out);
  for (size_t i = 0; i < n / 32; ++i, x += 32) {
    float big = 0.0f;
    for (int j = 0; j < 32; ++j) big = std::fabs(x[j]) > std::fabs(big) ? x[j] : big;
    b[i].d = f32_to_f16(big / -16.0f);
    const float d = f16_to_f32(b[i].d);
    uint8_t q[32];
    for (int j = 0; j < 32; ++j) q[j] = static_cast<uint8_t>(d != 0.0f ? nearest_clamped(x[j] / d, -16, 15) + 16 : 16);
    pack_levels_32(q, b[i].qs, b[i].qh);
  }
}

// IQ4_NL: x ~ d * kIq4nlValues[nibble], the value of largest magnitude at level -127.
void quantize_row_iq4_nl(const float* x, void* out, size_t n) {
  auto* b = static_cast<BlockIQ4_NL*>(out);
  for (size_t i = 0; i < n / 32; ++i, x += 32) {
    float big = 0.0f;
    for (int j = 0; j < 32; ++j) big = std::fabs(x[j]) > std::fabs(big) ? x[j] : big;
    b[i].d = f32_to_f16(big / static_cast<float>(kIq4nlValues[0]));
    const float d = f16_to_f32(b[i].d);
    uint8_t q[32];
    for (int j = 0; j < 32; ++j) q[j] = static_cast<uint8_t>(nearest_iq4nl(x[j], d));
    pack_levels_32(q, b[i].qs, nullptr);
  }
}

// IQ4_XS: per 32-value group x ~ d * (ls - 32) * kIq4nlValues[nibble], the nearest of the 16 levels.
void quantize_row_iq4_xs(const float* x, void* out, size_t n) {
  auto* b = static_cast<BlockIQ4_XS*>(out);
  for (size_t i = 0; i < n / kQK; ++i, x += kQK) {
    float group_scale[8], max_abs = 0.0f;  // signed: the value of largest magnitude maps to level -127
    for (int ib = 0; ib < 8; ++ib) {
      float big = 0.0f;
      for (int l = 0; l < 32; ++l) big = std::fabs(x[32 * ib + l]) > std::fabs(big) ? x[32 * ib + l] : big;
      group_scale[ib] = big / static_cast<float>(kIq4nlValues[0]);
      max_abs = std::max(max_abs, std::fabs(group_scale[ib]));
    }
    b[i].d = f32_to_f16(max_abs / 31.0f);
    const float d = f16_to_f32(b[i].d);
    b[i].scales_h = 0;
    std::memset(b[i].scales_l, 0, sizeof(b[i].scales_l));
    for (int ib = 0; ib < 8; ++ib) {
      const int ls = (d > 0.0f ? nearest_clamped(group_scale[ib] / d, -32, 31) : 0) + 32;
      b[i].scales_l[ib / 2] = static_cast<uint8_t>(b[i].scales_l[ib / 2] | ((ls & 0xF) << (4 * (ib % 2))));
      b[i].scales_h = static_cast<uint16_t>(b[i].scales_h | ((ls >> 4) << (2 * ib)));
      const float step = d * static_cast<float>(ls - 32);
      for (int j = 0; j < 32; ++j) {
        const int best = nearest_iq4nl(x[32 * ib + j], step);
        uint8_t& byte = b[i].qs[16 * ib + j % 16];
        byte = static_cast<uint8_t>(j < 16 ? (byte & 0xF0) | best : (byte & 0x0F) | (best << 4));
      }
    }
  }
}

}  // namespace scalar
}  // namespace preface::kernels
