// UTF-8 and GPT-2 byte-map helpers for the tokenizers, following llama.cpp's (lenient) conventions so that
// token ids match it even on malformed input.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace preface::tok {

// Sequence length claimed by a UTF-8 lead byte, from its high nibble (llama.cpp's unicode_len_utf8):
// 0x00-0xBF -> 1 (continuation bytes count as 1), 0xC0-0xDF -> 2, 0xE0-0xEF -> 3, 0xF0-0xFF -> 4.
size_t utf8_len(uint8_t lead);

// Decodes UTF-8 into code points like llama.cpp: a byte that does not start a well-formed sequence (bad lead,
// truncated or bad continuation) becomes U+FFFD and decoding resumes at the next byte. Overlong forms,
// surrogates and values up to 0x1FFFFF (lead bytes F0-F7) are decoded as they are.
std::vector<uint32_t> decode_utf8_lenient(std::string_view text);

// Appends the UTF-8 encoding of `cpt`; values above 0x10FFFF are written as U+FFFD.
void append_utf8(std::string& out, uint32_t cpt);

// Unicode White_Space property (the set llama.cpp's pre-tokenizers treat as \s).
bool is_unicode_whitespace(uint32_t cpt);

// Number of bytes at the end of `bytes` that form an incomplete UTF-8 sequence (0 when the text ends on a
// character boundary or with bytes that can never complete, which are then passed through as they are).
size_t incomplete_utf8_tail(std::string_view bytes);

// GPT-2's reversible byte <-> printable-character map: bytes 0x21-0x7E, 0xA1-0xAC and 0xAE-0xFF map to the
// code point of the same value; the remaining 68 bytes map, in increasing order, to U+0100, U+0101, ...
class ByteMap {
 public:
  ByteMap();
  // UTF-8 of the character standing for `byte`.
  const std::string& encode(uint8_t byte) const { return to_char_[byte]; }
  // Appends the byte-level encoding of every byte of `bytes`.
  void encode_into(std::string_view bytes, std::string& out) const;
  // The byte a code point stands for, or -1 when it is not one of the 256 map characters.
  int decode(uint32_t cpt) const { return cpt < from_cpt_.size() ? from_cpt_[cpt] : -1; }

 private:
  std::array<std::string, 256> to_char_;  // [256] UTF-8 of the mapped character
  std::vector<int16_t> from_cpt_;         // [0x144] code point -> byte, -1 when unmapped
};

}  // namespace preface::tok
