#include "kernels/kv_channels.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "util/fp16.h"

namespace preface::kernels {
namespace {

constexpr size_t kRows = static_cast<size_t>(kKvChannelGroup);
constexpr uint16_t kF16MaxFinite = 0x7BFF;

int max_level(KvType t) {
  if (t == KvType::Q8_PC) return 255;
  if (t == KvType::Q4_PC) return 15;
  throw std::logic_error("kernels: not a per-channel KV type");
}

uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

void store_u16(uint8_t* p, uint16_t v) { std::memcpy(p, &v, sizeof(v)); }

}  // namespace

void kv_seal_group(KvType t, const float* rows, size_t stride, size_t n, uint8_t* out) {
  const int levels = max_level(t);
  uint8_t* d_out = out;
  uint8_t* m_out = out + 2 * n;
  uint8_t* q_out = out + 4 * n;
  if (t == KvType::Q4_PC) std::memset(q_out, 0, kRows * n / 2);
  for (size_t c = 0; c < n; ++c) {
    float lo = INFINITY, hi = -INFINITY;
    for (size_t r = 0; r < kRows; ++r) {
      const float x = rows[r * stride + c];
      if (!std::isfinite(x)) continue;
      lo = std::min(lo, x);
      hi = std::max(hi, x);
    }
    if (lo > hi) lo = hi = 0.0f;  // no finite value
    uint16_t m_bits = f32_to_f16(lo);
    if (!std::isfinite(f16_to_f32(m_bits))) m_bits = 0;
    uint16_t d_bits = f32_to_f16((hi - lo) / static_cast<float>(levels));
    if (!std::isfinite(f16_to_f32(d_bits))) d_bits = kF16MaxFinite;
    store_u16(d_out + 2 * c, d_bits);
    store_u16(m_out + 2 * c, m_bits);
    const float d = f16_to_f32(d_bits), m = f16_to_f32(m_bits);
    for (size_t r = 0; r < kRows; ++r) {
      const float x = rows[r * stride + c];
      int q = 0;
      if (d > 0.0f && std::isfinite(x)) {
        const float v = std::nearbyint((x - m) / d);
        q = v <= 0.0f ? 0 : v >= static_cast<float>(levels) ? levels : static_cast<int>(v);
      }
      if (t == KvType::Q8_PC) {
        q_out[r * n + c] = static_cast<uint8_t>(q);
      } else {
        q_out[r * n / 2 + c / 2] |= static_cast<uint8_t>(c % 2 == 0 ? q : q << 4);
      }
    }
  }
}

void kv_widen_group(KvType t, const uint8_t* group, size_t n, size_t first, size_t count, size_t n_rows, float* out,
                    size_t out_stride) {
  max_level(t);  // throws for another type
  const uint8_t* q = group + 4 * n;
  // Channels in blocks of kBlock: their scales and minimums widened once, then row by row (loops the compiler
  // vectorizes; f32(d) * level is exact, so each value is the same bits however it is computed).
  constexpr size_t kBlock = 64;
  float d[kBlock], m[kBlock];
  for (size_t j0 = 0; j0 < count; j0 += kBlock) {
    const size_t nb = std::min(kBlock, count - j0);
    for (size_t j = 0; j < nb; ++j) {
      d[j] = f16_to_f32(load_u16(group + 2 * (first + j0 + j)));
      m[j] = f16_to_f32(load_u16(group + 2 * n + 2 * (first + j0 + j)));
    }
    for (size_t r = 0; r < n_rows; ++r) {
      float* dst = out + r * out_stride + j0;
      if (t == KvType::Q8_PC) {
        const uint8_t* levels = q + r * n + first + j0;
        for (size_t j = 0; j < nb; ++j) dst[j] = d[j] * static_cast<float>(levels[j]) + m[j];
      } else {
        const uint8_t* packed = q + r * n / 2;
        uint8_t levels[kBlock] = {};
        const size_t c0 = first + j0;
        if (c0 % 2 == 0 && nb % 2 == 0) {  // whole bytes: low nibble, then high
          for (size_t j = 0; j < nb / 2; ++j) {
            levels[2 * j] = packed[c0 / 2 + j] & 0xF;
            levels[2 * j + 1] = packed[c0 / 2 + j] >> 4;
          }
        } else {
          for (size_t j = 0; j < nb; ++j) levels[j] = (packed[(c0 + j) / 2] >> ((c0 + j) % 2 == 0 ? 0 : 4)) & 0xF;
        }
        for (size_t j = 0; j < nb; ++j) dst[j] = d[j] * static_cast<float>(levels[j]) + m[j];
      }
    }
  }
}

}  // namespace preface::kernels
