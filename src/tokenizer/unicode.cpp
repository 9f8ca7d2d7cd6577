#include "tokenizer/unicode.h"

namespace preface::tok {

size_t utf8_len(uint8_t lead) {
  static constexpr size_t kLenByHighNibble[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLenByHighNibble[lead >> 4];
}

namespace {

bool is_continuation(uint8_t b) { return (b & 0xC0) == 0x80; }

// Decodes one sequence at `pos`; returns its length in bytes, or 0 when it is malformed (llama.cpp's rules:
// only the lead byte's form and the continuation bytes are checked).
size_t decode_one(std::string_view s, size_t pos, uint32_t& cpt) {
  const auto b0 = static_cast<uint8_t>(s[pos]);
  auto cont = [&](size_t k) { return pos + k < s.size() && is_continuation(static_cast<uint8_t>(s[pos + k])); };
  auto bits = [&](size_t k) { return static_cast<uint32_t>(static_cast<uint8_t>(s[pos + k]) & 0x3F); };
  if (b0 < 0x80) {
    cpt = b0;
    return 1;
  }
  if ((b0 & 0x40) == 0) return 0;
  if ((b0 & 0x20) == 0) {
    if (!cont(1)) return 0;
    cpt = ((b0 & 0x1Fu) << 6) | bits(1);
    return 2;
  }
  if ((b0 & 0x10) == 0) {
    if (!cont(1) || !cont(2)) return 0;
    cpt = ((b0 & 0x0Fu) << 12) | (bits(1) << 6) | bits(2);
    return 3;
  }
  if ((b0 & 0x08) == 0) {
    if (!cont(1) || !cont(2) || !cont(3)) return 0;
    cpt = ((b0 & 0x07u) << 18) | (bits(1) << 12) | (bits(2) << 6) | bits(3);
    return 4;
  }
  return 0;
}

}  // namespace

std::vector<uint32_t> decode_utf8_lenient(std::string_view text) {
  std::vector<uint32_t> cpts;
  cpts.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) {
    uint32_t cpt = 0;
    const size_t n = decode_one(text, pos, cpt);
    if (n == 0) {
      cpts.push_back(0xFFFD);
      pos += 1;
    } else {
      cpts.push_back(cpt);
      pos += n;
    }
  }
  return cpts;
}

void append_utf8(std::string& out, uint32_t cpt) {
  if (cpt > 0x10FFFF) cpt = 0xFFFD;
  if (cpt < 0x80) {
    out.push_back(static_cast<char>(cpt));
  } else if (cpt < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cpt >> 6)));
    out.push_back(static_cast<char>(0x80 | (cpt & 0x3F)));
  } else if (cpt < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cpt >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cpt >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cpt & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cpt >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cpt >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cpt >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cpt & 0x3F)));
  }
}

bool is_unicode_whitespace(uint32_t cpt) {
  if (cpt <= 0x20) return cpt == 0x20 || (cpt >= 0x09 && cpt <= 0x0D);
  if (cpt < 0x85) return false;
  switch (cpt) {
    case 0x85: case 0xA0: case 0x1680: case 0x2028: case 0x2029: case 0x202F: case 0x205F: case 0x3000:
      return true;
    default:
      return cpt >= 0x2000 && cpt <= 0x200A;
  }
}

size_t incomplete_utf8_tail(std::string_view bytes) {
  const size_t n = bytes.size();
  // A sequence is at most 4 bytes, so only the last 3 bytes can belong to an unfinished one.
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    const auto b = static_cast<uint8_t>(bytes[n - back]);
    if (is_continuation(b)) continue;
    if (b < 0xC0 || b > 0xF7) return 0;  // ASCII or a byte that never leads: nothing to wait for
    const size_t need = utf8_len(b);
    return back < need ? back : 0;
  }
  return 0;
}

ByteMap::ByteMap() : from_cpt_(0x144, -1) {
  auto printable = [](int b) { return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE); };
  uint32_t next_extra = 0x100;
  for (int b = 0; b < 256; ++b) {
    const uint32_t cpt = printable(b) ? static_cast<uint32_t>(b) : next_extra++;
    append_utf8(to_char_[static_cast<size_t>(b)], cpt);
    from_cpt_[cpt] = static_cast<int16_t>(b);
  }
}

void ByteMap::encode_into(std::string_view bytes, std::string& out) const {
  for (char c : bytes) out += to_char_[static_cast<uint8_t>(c)];
}

}  // namespace preface::tok
