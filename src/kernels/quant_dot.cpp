// Scalar row dots of the types in quant.h, Q8_0/Q8_K activation quantization and the traits table.
// K-quant super-blocks are unpacked to 256 signed levels, 16 scales (one per 16 values) and 16 mins; the dot is
// then d * x.d * sum_g scale[g] * isum[g] - dmin * x.d * sum_g min[g] * bsums[g], all sums exact in int32.
#include <cmath>
#include <cstring>

#include "kernels/dispatch.h"
#include "kernels/dot.h"
#include "kernels/quant.h"
#include "util/fp16.h"

namespace preface::kernels {

namespace {

// One super-block as signed levels with a scale and a min per 16 values: value i = d * scale[i/16] * q[i]
// - dmin * min[i/16].
struct Unpacked {
  int8_t q[kQK];
  int32_t scale[16];
  int32_t min[16];
};

void unpack(const BlockQ2_K& b, Unpacked& u) {
  for (int h = 0; h < 2; ++h) {
    for (int s = 0; s < 4; ++s) {
      for (int i = 0; i < 32; ++i) u.q[128 * h + 32 * s + i] = static_cast<int8_t>((b.qs[32 * h + i] >> (2 * s)) & 3);
    }
  }
  for (int g = 0; g < 16; ++g) {
    u.scale[g] = b.scales[g] & 0xF;
    u.min[g] = b.scales[g] >> 4;
  }
}

void unpack(const BlockQ3_K& b, Unpacked& u) {
  for (int h = 0; h < 2; ++h) {
    for (int s = 0; s < 4; ++s) {
      for (int i = 0; i < 32; ++i) {
        const int hbit = (b.hmask[i] >> (4 * h + s)) & 1;
        u.q[128 * h + 32 * s + i] = static_cast<int8_t>(((b.qs[32 * h + i] >> (2 * s)) & 3) - (hbit ? 0 : 4));
      }
    }
  }
  int8_t scales[16];
  q3_k_scales(b.scales, scales);
  for (int g = 0; g < 16; ++g) {
    u.scale[g] = scales[g];
    u.min[g] = 0;
  }
}

template <typename Block>
void unpack_k4_scales(const Block& b, Unpacked& u) {
  for (int j = 0; j < 8; ++j) {
    uint8_t sc, m;
    scale_min_k4(j, b.scales, &sc, &m);
    u.scale[2 * j] = u.scale[2 * j + 1] = sc;
    u.min[2 * j] = u.min[2 * j + 1] = m;
  }
}

void unpack(const BlockQ4_K& b, Unpacked& u) {
  for (int p = 0; p < 4; ++p) {
    for (int l = 0; l < 32; ++l) {
      u.q[64 * p + l] = static_cast<int8_t>(b.qs[32 * p + l] & 0xF);
      u.q[64 * p + 32 + l] = static_cast<int8_t>(b.qs[32 * p + l] >> 4);
    }
  }
  unpack_k4_scales(b, u);
}

void unpack(const BlockQ5_K& b, Unpacked& u) {
  for (int p = 0; p < 4; ++p) {
    for (int l = 0; l < 32; ++l) {
      u.q[64 * p + l] = static_cast<int8_t>((b.qs[32 * p + l] & 0xF) | (((b.qh[l] >> (2 * p)) & 1) << 4));
      u.q[64 * p + 32 + l] = static_cast<int8_t>((b.qs[32 * p + l] >> 4) | (((b.qh[l] >> (2 * p + 1)) & 1) << 4));
    }
  }
  unpack_k4_scales(b, u);
}

void unpack(const BlockQ6_K& b, Unpacked& u) {
  for (int h = 0; h < 2; ++h) {
    const uint8_t* ql = b.ql + 64 * h;
    const uint8_t* qh = b.qh + 32 * h;
    int8_t* q = u.q + 128 * h;
    for (int l = 0; l < 32; ++l) {
      q[l] = static_cast<int8_t>(((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32);
      q[l + 32] = static_cast<int8_t>(((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32);
      q[l + 64] = static_cast<int8_t>(((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
      q[l + 96] = static_cast<int8_t>(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
    }
  }
  for (int g = 0; g < 16; ++g) {
    u.scale[g] = b.scales[g];
    u.min[g] = 0;
  }
}

void unpack(const BlockIQ4_XS& b, Unpacked& u) {
  for (int ib = 0; ib < 8; ++ib) {
    for (int j = 0; j < 16; ++j) {
      u.q[32 * ib + j] = kIq4nlValues[b.qs[16 * ib + j] & 0xF];
      u.q[32 * ib + 16 + j] = kIq4nlValues[b.qs[16 * ib + j] >> 4];
    }
    const int ls = ((b.scales_l[ib / 2] >> (4 * (ib % 2))) & 0xF) | (((b.scales_h >> (2 * ib)) & 3) << 4);
    u.scale[2 * ib] = u.scale[2 * ib + 1] = ls - 32;
    u.min[2 * ib] = u.min[2 * ib + 1] = 0;
  }
}

float d_of(const BlockQ2_K& b) { return f16_to_f32(b.d); }
float d_of(const BlockQ3_K& b) { return f16_to_f32(b.d); }
float d_of(const BlockQ4_K& b) { return f16_to_f32(b.d); }
float d_of(const BlockQ5_K& b) { return f16_to_f32(b.d); }
float d_of(const BlockQ6_K& b) { return f16_to_f32(b.d); }
float d_of(const BlockIQ4_XS& b) { return f16_to_f32(b.d); }
// Types with a min term (x = d * scale * q - dmin * min).
float dmin_of(const BlockQ2_K& b) { return f16_to_f32(b.dmin); }
float dmin_of(const BlockQ4_K& b) { return f16_to_f32(b.dmin); }
float dmin_of(const BlockQ5_K& b) { return f16_to_f32(b.dmin); }
template <typename Block>
constexpr bool kHasMin = requires(const Block& b) { dmin_of(b); };

template <typename Block>
float dot_k(const Block* w, const BlockQ8_K* x, size_t n) {
  float acc = 0.0f;
  Unpacked u;
  for (size_t b = 0; b < n / kQK; ++b) {
    unpack(w[b], u);
    int32_t isum = 0, imin = 0;
    for (int g = 0; g < 16; ++g) {
      int32_t s = 0;
      for (int i = 16 * g; i < 16 * g + 16; ++i) s += static_cast<int32_t>(u.q[i]) * x[b].qs[i];
      isum += u.scale[g] * s;
      imin += u.min[g] * x[b].bsums[g];
    }
    // The SIMD dots (quant_k_avx2.cpp) end each super-block with exactly these float operations.
    acc += d_of(w[b]) * x[b].d * static_cast<float>(isum);
    if constexpr (kHasMin<Block>) acc -= dmin_of(w[b]) * x[b].d * static_cast<float>(imin);
  }
  return acc;
}

// 32-value block dot for the Q8_0-activation types: levels q[32] (value = d * q + m), x one Q8_0 block.
float block_term(const int8_t* q, float d, float m, const gguf::BlockQ8_0& x) {
  int32_t isum = 0, xsum = 0;
  for (int i = 0; i < 32; ++i) {
    isum += static_cast<int32_t>(q[i]) * x.qs[i];
    xsum += x.qs[i];
  }
  const float dx = f16_to_f32(x.d);
  float t = d * dx * static_cast<float>(isum);
  if (m != 0.0f) t += m * dx * static_cast<float>(xsum);
  return t;
}

int8_t q5_level(const uint8_t* qs, uint32_t qh, int i) {  // i in 0..31, unsigned 0..31
  const int j = i % 16;
  const int nib = i < 16 ? qs[j] & 0xF : qs[j] >> 4;
  return static_cast<int8_t>(nib | (((qh >> i) & 1) << 4));
}

// The 32 levels of a Q8_0-format block (value = d * q + m) and its m (0 for the types without one).
void levels(const BlockQ4_1& b, int8_t* q) {
  for (int j = 0; j < 16; ++j) {
    q[j] = static_cast<int8_t>(b.qs[j] & 0xF);
    q[j + 16] = static_cast<int8_t>(b.qs[j] >> 4);
  }
}
void levels(const BlockQ5_0& b, int8_t* q) {
  uint32_t qh;
  std::memcpy(&qh, b.qh, 4);
  for (int i = 0; i < 32; ++i) q[i] = static_cast<int8_t>(q5_level(b.qs, qh, i) - 16);
}
void levels(const BlockQ5_1& b, int8_t* q) {
  uint32_t qh;
  std::memcpy(&qh, b.qh, 4);
  for (int i = 0; i < 32; ++i) q[i] = q5_level(b.qs, qh, i);
}
void levels(const BlockIQ4_NL& b, int8_t* q) {
  for (int j = 0; j < 16; ++j) {
    q[j] = kIq4nlValues[b.qs[j] & 0xF];
    q[j + 16] = kIq4nlValues[b.qs[j] >> 4];
  }
}
void levels(const BlockMXFP4& b, int8_t* q) {
  for (int j = 0; j < 16; ++j) {
    q[j] = kMxfp4Values[b.qs[j] & 0xF];
    q[j + 16] = kMxfp4Values[b.qs[j] >> 4];
  }
}
// A 32-value block's scale d: f16, or MXFP4's halved E8M0 exponent.
template <typename Block>
float scale_of(const Block& b) {
  if constexpr (requires { b.e; }) {
    return e8m0_half(b.e);
  } else {
    return f16_to_f32(b.d);
  }
}
template <typename Block>
float m_of(const Block& b) {
  if constexpr (requires { b.m; }) {
    return f16_to_f32(b.m);
  } else {
    return 0.0f;
  }
}

template <typename Block>
float dot_32(const Block* w, const gguf::BlockQ8_0* x, size_t n) {
  float acc = 0.0f;
  int8_t q[32];
  for (size_t b = 0; b < n / 32; ++b) {
    levels(w[b], q);
    acc += block_term(q, scale_of(w[b]), m_of(w[b]), x[b]);
  }
  return acc;
}

}  // namespace

void quantize_row_q8_k(const float* x, BlockQ8_K* out, size_t n) { kernel_table().quantize_row_q8_k(x, out, n); }

namespace scalar {

void quantize_row_q8_k(const float* x, BlockQ8_K* out, size_t n) {
  for (size_t b = 0; b < n / kQK; ++b, x += kQK) {
    float amax = 0.0f, max = 0.0f;
    for (size_t j = 0; j < kQK; ++j) {
      const float ax = std::fabs(x[j]);
      if (ax > amax) {
        amax = ax;
        max = x[j];
      }
    }
    BlockQ8_K& o = out[b];
    if (amax == 0.0f) {
      o = BlockQ8_K{};  // d = 0, every q and bsum 0
      continue;
    }
    const float iscale = -127.0f / max;
    for (size_t j = 0; j < kQK; ++j) {
      // ggml's nearest_int: round to nearest, ties to even, through the float's mantissa.
      const float v = iscale * x[j] + 12582912.0f;
      int32_t bits;
      std::memcpy(&bits, &v, sizeof(bits));
      const int32_t q = (bits & 0x007fffff) - 0x00400000;
      o.qs[j] = static_cast<int8_t>(q < 127 ? q : 127);
    }
    for (int g = 0; g < 16; ++g) {
      int32_t s = 0;
      for (int i = 0; i < 16; ++i) s += o.qs[16 * g + i];
      o.bsums[g] = static_cast<int16_t>(s);
    }
    o.d = 1.0f / iscale;
  }
}

float dot_q4_1(const BlockQ4_1* w, const gguf::BlockQ8_0* x, size_t n) { return dot_32(w, x, n); }
float dot_q5_0(const BlockQ5_0* w, const gguf::BlockQ8_0* x, size_t n) { return dot_32(w, x, n); }
float dot_q5_1(const BlockQ5_1* w, const gguf::BlockQ8_0* x, size_t n) { return dot_32(w, x, n); }
float dot_iq4_nl(const BlockIQ4_NL* w, const gguf::BlockQ8_0* x, size_t n) { return dot_32(w, x, n); }
float dot_mxfp4(const BlockMXFP4* w, const gguf::BlockQ8_0* x, size_t n) { return dot_32(w, x, n); }

float dot_q2_k(const BlockQ2_K* w, const BlockQ8_K* x, size_t n) { return dot_k(w, x, n); }
float dot_q3_k(const BlockQ3_K* w, const BlockQ8_K* x, size_t n) { return dot_k(w, x, n); }
float dot_q4_k(const BlockQ4_K* w, const BlockQ8_K* x, size_t n) { return dot_k(w, x, n); }
float dot_q5_k(const BlockQ5_K* w, const BlockQ8_K* x, size_t n) { return dot_k(w, x, n); }
float dot_q6_k(const BlockQ6_K* w, const BlockQ8_K* x, size_t n) { return dot_k(w, x, n); }
float dot_iq4_xs(const BlockIQ4_XS* w, const BlockQ8_K* x, size_t n) { return dot_k(w, x, n); }

}  // namespace scalar

namespace {

template <typename Block, typename Act, void (*Dequant)(const Block*, float*, size_t),
          float (*Dot)(const Block*, const Act*, size_t)>
constexpr QuantTraits row(gguf::TensorType type, ActFormat act,
                          void (*quantize)(const float*, void*, size_t) = nullptr) {
  return QuantTraits{
      type, act, [](const void* w, float* out, size_t n) { Dequant(static_cast<const Block*>(w), out, n); },
      [](const void* w, const void* x, size_t n) {
        return Dot(static_cast<const Block*>(w), static_cast<const Act*>(x), n);
      },
      quantize};
}

// The types with SIMD dots: the kernel table's choice (dispatch.cpp), the same bits as the scalar ones.
float dispatched_dot_q4_k(const BlockQ4_K* w, const BlockQ8_K* x, size_t n) { return kernel_table().dot_q4_k(w, x, n); }
float dispatched_dot_q5_k(const BlockQ5_K* w, const BlockQ8_K* x, size_t n) { return kernel_table().dot_q5_k(w, x, n); }
float dispatched_dot_q6_k(const BlockQ6_K* w, const BlockQ8_K* x, size_t n) { return kernel_table().dot_q6_k(w, x, n); }
float dispatched_dot_iq4_xs(const BlockIQ4_XS* w, const BlockQ8_K* x, size_t n) {
  return kernel_table().dot_iq4_xs(w, x, n);
}

using gguf::BlockQ8_0;
using gguf::TensorType;
constexpr QuantTraits kTraits[] = {
    row<BlockQ4_1, BlockQ8_0, scalar::dequantize_row_q4_1, scalar::dot_q4_1>(TensorType::Q4_1, ActFormat::Q8_0,
                                                                              scalar::quantize_row_q4_1),
    row<BlockQ5_0, BlockQ8_0, scalar::dequantize_row_q5_0, scalar::dot_q5_0>(TensorType::Q5_0, ActFormat::Q8_0,
                                                                              scalar::quantize_row_q5_0),
    row<BlockQ5_1, BlockQ8_0, scalar::dequantize_row_q5_1, scalar::dot_q5_1>(TensorType::Q5_1, ActFormat::Q8_0,
                                                                              scalar::quantize_row_q5_1),
    row<BlockIQ4_NL, BlockQ8_0, scalar::dequantize_row_iq4_nl, scalar::dot_iq4_nl>(TensorType::IQ4_NL,
                                                                                    ActFormat::Q8_0,
                                                                                    scalar::quantize_row_iq4_nl),
    row<BlockMXFP4, BlockQ8_0, scalar::dequantize_row_mxfp4, scalar::dot_mxfp4>(TensorType::MXFP4, ActFormat::Q8_0),
    row<BlockQ2_K, BlockQ8_K, scalar::dequantize_row_q2_k, scalar::dot_q2_k>(TensorType::Q2_K, ActFormat::Q8_K),
    row<BlockQ3_K, BlockQ8_K, scalar::dequantize_row_q3_k, scalar::dot_q3_k>(TensorType::Q3_K, ActFormat::Q8_K),
    row<BlockQ4_K, BlockQ8_K, scalar::dequantize_row_q4_k, dispatched_dot_q4_k>(TensorType::Q4_K, ActFormat::Q8_K,
                                                                                 scalar::quantize_row_q4_k),
    row<BlockQ5_K, BlockQ8_K, scalar::dequantize_row_q5_k, dispatched_dot_q5_k>(TensorType::Q5_K, ActFormat::Q8_K,
                                                                                 scalar::quantize_row_q5_k),
    row<BlockQ6_K, BlockQ8_K, scalar::dequantize_row_q6_k, dispatched_dot_q6_k>(TensorType::Q6_K, ActFormat::Q8_K,
                                                                                 scalar::quantize_row_q6_k),
    row<BlockIQ4_XS, BlockQ8_K, scalar::dequantize_row_iq4_xs, dispatched_dot_iq4_xs>(TensorType::IQ4_XS,
                                                                                    ActFormat::Q8_K,
                                                                                    scalar::quantize_row_iq4_xs),
};

}  // namespace

const QuantTraits* quant_traits(gguf::TensorType type) {
  for (const QuantTraits& t : kTraits) {
    if (t.type == type) return &t;
  }
  return nullptr;
}

}  // namespace preface::kernels
