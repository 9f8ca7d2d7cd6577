// Python str.strip() over UTF-8, for the templates' `trim` filter and `.strip()` calls.
#include "chat/chat_template.h"

namespace preface::chat {
namespace {

constexpr char32_t kInvalid = 0xFFFFFFFF;

// Python's str.isspace(): bidirectional class WS, B or S, or general category Zs.
bool is_py_space(char32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 || cp == 0xA0 ||
         cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
         cp == 0x205F || cp == 0x3000;
}

// Decodes the code point starting at s[pos]; *n_bytes receives its length. kInvalid for a malformed sequence.
char32_t decode_at(std::string_view s, size_t pos, size_t* n_bytes) {
  const auto b0 = static_cast<unsigned char>(s[pos]);
  size_t n = 0;
  char32_t cp = 0;
  if (b0 < 0x80) {
    *n_bytes = 1;
    return b0;
  } else if ((b0 & 0xE0) == 0xC0) {
    n = 2;
    cp = b0 & 0x1F;
  } else if ((b0 & 0xF0) == 0xE0) {
    n = 3;
    cp = b0 & 0x0F;
  } else if ((b0 & 0xF8) == 0xF0) {
    n = 4;
    cp = b0 & 0x07;
  } else {
    return kInvalid;
  }
  if (pos + n > s.size()) return kInvalid;
  for (size_t k = 1; k < n; ++k) {
    const auto b = static_cast<unsigned char>(s[pos + k]);
    if ((b & 0xC0) != 0x80) return kInvalid;
    cp = (cp << 6) | (b & 0x3F);
  }
  *n_bytes = n;
  return cp;
}

}  // namespace

std::string_view py_strip(std::string_view text) {
  size_t begin = 0;
  size_t end = text.size();
  while (begin < end) {
    size_t n = 0;
    const char32_t cp = decode_at(text.substr(0, end), begin, &n);
    if (cp == kInvalid || !is_py_space(cp)) break;
    begin += n;
  }
  while (end > begin) {
    // Step back to the lead byte of the last code point (at most 3 continuation bytes).
    size_t start = end - 1;
    while (start > begin && end - start < 4 && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
    size_t n = 0;
    const char32_t cp = decode_at(text.substr(0, end), start, &n);
    if (cp == kInvalid || start + n != end || !is_py_space(cp)) break;
    end = start;
  }
  return text.substr(begin, end - begin);
}

}  // namespace preface::chat
