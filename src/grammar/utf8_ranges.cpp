#include "grammar/utf8_ranges.h"

#include <algorithm>

namespace preface::grammar {
namespace {

int encoded_length(uint32_t cp) { return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4; }

// Pushes sequences for [lo, hi], where lo and hi have the same encoded length and no surrogate lies inside.
void split_same_length(uint32_t lo, uint32_t hi, std::vector<std::vector<ByteRange>>& out) {
  const int n = encoded_length(lo);
  // Split until, for every continuation position, the range covers whole 64-blocks below it: then the
  // encodings of lo and hi bound each byte independently.
  for (int i = 1; i < n; ++i) {
    const uint32_t m = (1u << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        split_same_length(lo, lo | m, out);
        split_same_length((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        split_same_length(lo, (hi & ~m) - 1, out);
        split_same_length(hi & ~m, hi, out);
        return;
      }
    }
  }
  const std::string a = utf8_encode(lo), b = utf8_encode(hi);
  std::vector<ByteRange> seq;
  for (size_t k = 0; k < a.size(); ++k) seq.emplace_back(static_cast<uint8_t>(a[k]), static_cast<uint8_t>(b[k]));
  out.push_back(std::move(seq));
}

}  // namespace

std::string utf8_encode(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    s += static_cast<char>(0xE0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    s += static_cast<char>(0xF0 | (cp >> 18));
    s += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

std::vector<std::vector<ByteRange>> utf8_sequences(uint32_t lo, uint32_t hi) {
  std::vector<std::vector<ByteRange>> out;
  hi = std::min<uint32_t>(hi, 0x10FFFF);
  // Pieces of equal encoded length, surrogates removed.
  static constexpr std::pair<uint32_t, uint32_t> kPieces[] = {
      {0x0, 0x7F}, {0x80, 0x7FF}, {0x800, 0xD7FF}, {0xE000, 0xFFFF}, {0x10000, 0x10FFFF}};
  for (const auto& [plo, phi] : kPieces) {
    const uint32_t a = std::max(lo, plo), b = std::min(hi, phi);
    if (a <= b) split_same_length(a, b, out);
  }
  return out;
}

}  // namespace preface::grammar
