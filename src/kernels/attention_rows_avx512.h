// The AVX-512 decode path's readers of stored K/V values (internal to attention_decode_avx512.cpp, which includes
// it after its target pragma; internal linkage). Rows<T>::pair(a, b, s): segment s (values 8s..8s+7) of rows a and b
// as [a | b]; Rows<T>::load16(row, i): values i..i+15 (i % 16 == 0). Every value is what kv_value gives (kv_rows.h):
// F16/BF16/F32 widened exactly, a block type's f32(d) * f32(level) (+ f32(m)), the same floats as the shared tile's
// widening, so the results stay bit-identical to avx2::attention_tile.
#pragma once
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/kv_block_decode.h"
#include "kernels/kv_type.h"
#include "kernels/quant_blocks.h"

namespace preface::kernels::avx512 {
namespace {

template <KvType kElem>
struct Rows;

template <>
struct Rows<KvType::F16> {
  static __m512 pair(const uint8_t* a, const uint8_t* b, size_t s) {
    const __m128i lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a + 16 * s));
    const __m128i hi = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 16 * s));
    return _mm512_cvtph_ps(_mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1));
  }
  static __m512 load16(const uint8_t* row, size_t i) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 * i)));
  }
};

template <>
struct Rows<KvType::BF16> {
  static __m512 widen(__m256i bits) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16)); }
  static __m512 pair(const uint8_t* a, const uint8_t* b, size_t s) {
    const __m128i lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a + 16 * s));
    const __m128i hi = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 16 * s));
    return widen(_mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1));
  }
  static __m512 load16(const uint8_t* row, size_t i) {
    return widen(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 * i)));
  }
};

template <>
struct Rows<KvType::F32> {
  static __m512 pair(const uint8_t* a, const uint8_t* b, size_t s) {
    return _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_loadu_ps(reinterpret_cast<const float*>(a) + 8 * s)),
                              _mm256_loadu_ps(reinterpret_cast<const float*>(b) + 8 * s), 1);
  }
  static __m512 load16(const uint8_t* row, size_t i) {
    return _mm512_loadu_ps(reinterpret_cast<const float*>(row) + i);
  }
};

// Q8_0 rows: blocks of 32 values {f16 d; int8 q[32]}; a value is f32(d) * f32(q), exact (an 11-bit by 8-bit
// significand product), as widen_q8_0 gives it.
template <>
struct Rows<KvType::Q8_0> {
  static constexpr size_t kBlockBytes = 34;
  static float scale(const uint8_t* block) {
    uint16_t bits;
    std::memcpy(&bits, block, sizeof(bits));
    return _cvtsh_ss(bits);
  }
  static __m512 pair(const uint8_t* a, const uint8_t* b, size_t s) {
    const size_t block = s / 4 * kBlockBytes, at = block + 2 + s % 4 * 8;
    const __m128i q = _mm_unpacklo_epi64(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(a + at)),
                                         _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b + at)));
    const __m512 d = _mm512_insertf32x8(_mm512_set1_ps(scale(a + block)), _mm256_set1_ps(scale(b + block)), 1);
    return _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q)));
  }
  static __m512 load16(const uint8_t* row, size_t i) {
    const uint8_t* block = row + i / 32 * kBlockBytes;
    const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 2 + i % 32));
    return _mm512_mul_ps(_mm512_set1_ps(scale(block)), _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q)));
  }
};


// The 4- and 5-bit block types: where a block's scale, offset, nibbles and fifth bits are (kernels/kv_type.h).
template <KvType kElem>
struct NibbleBlock {
  static constexpr size_t kBytes = kv_type_block_bytes(kElem);
  static constexpr bool kHasMin = kv_type_has_offset(kElem);
  static constexpr bool kFifthBit = kElem == KvType::Q5_0 || kElem == KvType::Q5_1;
  static constexpr size_t kQs = kElem == KvType::Q4_1 ? 4 : kElem == KvType::Q5_0 ? 6 : kElem == KvType::Q5_1 ? 8 : 2;
  static constexpr size_t kQh = kElem == KvType::Q5_1 ? 4 : 2;

  // Levels of values [16 h, 16 h + 16) of a block (h = 0 or 1) as 16 int8: nibbles (low for the first 16 values,
  // high for the rest), the fifth bit, then the type's offset or table.
  static __m128i levels16(const uint8_t* block, size_t h) {
    __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + kQs));
    if (h == 1) q = _mm_srli_epi16(q, 4);
    q = _mm_and_si128(q, _mm_set1_epi8(0x0F));
    if constexpr (kFifthBit) {
      uint32_t bits;
      std::memcpy(&bits, block + kQh, sizeof(bits));
      q = _mm_or_si128(q, _mm_maskz_mov_epi8(static_cast<__mmask16>(bits >> (16 * h)), _mm_set1_epi8(0x10)));
    }
    if constexpr (kElem == KvType::Q4_0) return _mm_sub_epi8(q, _mm_set1_epi8(8));
    if constexpr (kElem == KvType::Q5_0) return _mm_sub_epi8(q, _mm_set1_epi8(16));
    if constexpr (kElem == KvType::IQ4_NL) {
      return _mm_shuffle_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlValues)), q);
    }
    return q;
  }
  // d (low 8 lanes from block a, high from b) and m alike.
  static __m512 halves(float a, float b) { return _mm512_insertf32x8(_mm512_set1_ps(a), _mm256_set1_ps(b), 1); }
};

template <KvType kElem>
struct NibbleRows {
  using B = NibbleBlock<kElem>;
  static __m512 pair(const uint8_t* a, const uint8_t* b, size_t s) {
    const size_t block = s / 4 * B::kBytes, seg = s % 4;
    // Segment seg is 8 of the 16 levels of half seg / 2: bytes 8 (seg % 2) .. of it.
    const __m128i la = B::levels16(a + block, seg / 2), lb = B::levels16(b + block, seg / 2);
    const __m128i q = seg % 2 == 0 ? _mm_unpacklo_epi64(la, lb) : _mm_unpackhi_epi64(la, lb);
    const __m512 v = _mm512_mul_ps(B::halves(_cvtsh_ss(kv_load_u16(a + block)), _cvtsh_ss(kv_load_u16(b + block))),
                                   _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q)));
    if constexpr (B::kHasMin) {
      return _mm512_add_ps(v, B::halves(_cvtsh_ss(kv_load_u16(a + block + 2)), _cvtsh_ss(kv_load_u16(b + block + 2))));
    }
    return v;
  }
  static __m512 load16(const uint8_t* row, size_t i) {
    const uint8_t* block = row + i / 32 * B::kBytes;
    const __m128i q = B::levels16(block, i % 32 / 16);
    const __m512 v = _mm512_mul_ps(_mm512_set1_ps(_cvtsh_ss(kv_load_u16(block))), _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q)));
    if constexpr (B::kHasMin) return _mm512_add_ps(v, _mm512_set1_ps(_cvtsh_ss(kv_load_u16(block + 2))));
    return v;
  }
};

template <>
struct Rows<KvType::Q4_0> : NibbleRows<KvType::Q4_0> {};
template <>
struct Rows<KvType::Q4_1> : NibbleRows<KvType::Q4_1> {};
template <>
struct Rows<KvType::IQ4_NL> : NibbleRows<KvType::IQ4_NL> {};
template <>
struct Rows<KvType::Q5_0> : NibbleRows<KvType::Q5_0> {};
template <>
struct Rows<KvType::Q5_1> : NibbleRows<KvType::Q5_1> {};

}  // namespace
}  // namespace preface::kernels::avx512
