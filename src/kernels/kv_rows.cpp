#include "kernels/kv_rows.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "kernels/dot.h"
#include "kernels/kv_block_decode.h"
#include "kernels/quant.h"
#include "util/fp16.h"

namespace preface::kernels {
namespace {

void store_u16(uint8_t* p, uint16_t v) { std::memcpy(p, &v, sizeof(v)); }

// The signed value of largest magnitude (the first of equal magnitudes), as ggml's absmax loops keep it.
float signed_absmax(const float* x) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < 32; ++j) {
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  return max;
}

// ggml's level of a scaled value v (v + 0.5 already added): the integer part, capped at max_level. For the finite
// values of a block v lies in [0, max_level + 1), where this is ggml's (int8_t)v and MIN; a non-finite row's NaN
// gives 0 instead of an undefined conversion.
uint8_t truncated_level(float v, int max_level) {
  const float capped = v > 0.0f ? std::min(v, static_cast<float>(max_level)) : 0.0f;
  return static_cast<uint8_t>(capped);
}

// q4_0 / q5_0: d = max / -half, q = min(2 half - 1, (int8)(x / d + half + 0.5)).
void quantize_symmetric(const float* x, uint8_t* out, size_t n, int half, size_t block_bytes, bool fifth_bit) {
  for (size_t b = 0; b < n / 32; ++b, x += 32, out += block_bytes) {
    const float d = signed_absmax(x) / static_cast<float>(-half);
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    store_u16(out, f32_to_f16(d));
    uint8_t q[32];
    const float bias = static_cast<float>(half) + 0.5f;
    for (int j = 0; j < 32; ++j) q[j] = truncated_level(x[j] * id + bias, 2 * half - 1);
    pack_levels_32(q, out + (fifth_bit ? 6 : 2), fifth_bit ? out + 2 : nullptr);
  }
}

// q4_1 / q5_1: d = (max - min) / levels, m = min, q = (x - min) / d + 0.5 truncated (q4_1 capped at 15).
void quantize_offset(const float* x, uint8_t* out, size_t n, int levels, size_t block_bytes, bool fifth_bit) {
  for (size_t b = 0; b < n / 32; ++b, x += 32, out += block_bytes) {
    float min = FLT_MAX, max = -FLT_MAX;
    for (int j = 0; j < 32; ++j) {
      min = std::min(min, x[j]);
      max = std::max(max, x[j]);
    }
    const float d = (max - min) / static_cast<float>(levels);
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    store_u16(out, f32_to_f16(d));
    store_u16(out + 2, f32_to_f16(min));
    uint8_t q[32];
    for (int j = 0; j < 32; ++j) q[j] = truncated_level((x[j] - min) * id + 0.5f, levels);
    pack_levels_32(q, out + (fifth_bit ? 8 : 4), fifth_bit ? out + 4 : nullptr);
  }
}

// ggml's best_index_int8 over the 16 IQ4_NL levels: the nearest level (the lower one of a tie).
int nearest_iq4nl_level(float x) {
  const int8_t* val = kIq4nlValues;
  if (x <= val[0]) return 0;
  if (x >= val[15]) return 15;
  int lo = 0, hi = 15;
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (x < val[mid]) {
      hi = mid;
    } else {
      lo = mid;
    }
  }
  return x - val[hi - 1] < val[hi] - x ? hi - 1 : hi;
}

// iq4_nl: every value to the level nearest x / d0 (d0 from the value of largest magnitude over level -127), then d
// refitted by least squares weighted by x^2.
void quantize_iq4_nl(const float* x, uint8_t* out, size_t n) {
  for (size_t b = 0; b < n / 32; ++b, x += 32, out += 18) {
    const float max = signed_absmax(x);
    uint8_t q[32] = {};
    float d = 0.0f;
    if (std::fabs(max) >= 1e-15f) {
      const float id = 1.0f / (max / static_cast<float>(kIq4nlValues[0]));
      float sumqx = 0.0f, sumq2 = 0.0f;
      for (int j = 0; j < 32; ++j) {
        const int l = nearest_iq4nl_level(id * x[j]);
        q[j] = static_cast<uint8_t>(l);
        const float level = kIq4nlValues[l];
        const float w = x[j] * x[j];
        sumqx += w * level * x[j];
        sumq2 += w * level * level;
      }
      d = sumq2 > 0.0f ? sumqx / sumq2 : 0.0f;
    }
    store_u16(out, f32_to_f16(d));
    pack_levels_32(q, out + 2, nullptr);
  }
}

}  // namespace

void kv_write_row(KvType t, const float* x, uint8_t* dst, size_t n) {
  switch (t) {
    case KvType::F32: std::memcpy(dst, x, n * sizeof(float)); return;
    case KvType::F16: f32_to_f16_row(x, reinterpret_cast<uint16_t*>(dst), n); return;
    case KvType::BF16: f32_to_bf16_row(x, reinterpret_cast<uint16_t*>(dst), n); return;
    // Every path of quantize_row_q8_0 gives the same bytes, those of the GGUF codec's Q8_0 for finite values.
    case KvType::Q8_0: quantize_row_q8_0(x, reinterpret_cast<BlockQ8_0*>(dst), n); return;
    case KvType::Q4_0: quantize_symmetric(x, dst, n, 8, 18, false); return;
    case KvType::Q4_1: quantize_offset(x, dst, n, 15, 20, false); return;
    case KvType::IQ4_NL: quantize_iq4_nl(x, dst, n); return;
    case KvType::Q5_0: quantize_symmetric(x, dst, n, 16, 22, true); return;
    case KvType::Q5_1: quantize_offset(x, dst, n, 31, 24, true); return;
    case KvType::Q8_PC:
    case KvType::Q4_PC: throw std::logic_error("kv_write_row: per-channel keys are written a group at a time");
  }
}

float kv_value(KvType t, const uint8_t* row, size_t i) {
  switch (t) {
    case KvType::F32: {
      float f;
      std::memcpy(&f, row + 4 * i, sizeof(f));
      return f;
    }
    case KvType::F16: return f16_to_f32(kv_load_u16(row + 2 * i));
    case KvType::BF16: return bf16_to_f32(kv_load_u16(row + 2 * i));
    case KvType::Q8_PC:
    case KvType::Q4_PC: return std::numeric_limits<float>::quiet_NaN();  // a group's value: kv_widen_group
    default: {
      const uint8_t* block = row + i / 32 * kv_type_block_bytes(t);
      const float v = f16_to_f32(kv_load_u16(block)) *
                      static_cast<float>(kv_block_level(t, block, static_cast<int>(i % 32)));
      return kv_type_has_offset(t) ? v + f16_to_f32(kv_load_u16(block + 2)) : v;
    }
  }
}

}  // namespace preface::kernels
