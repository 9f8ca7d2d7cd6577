// Code point ranges as UTF-8 byte-range sequences, so that a code point class becomes a byte-level grammar.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace preface::grammar {

using ByteRange = std::pair<uint8_t, uint8_t>;  // inclusive

// The UTF-8 encodings of the code points [lo, hi] (surrogates D800-DFFF excluded, hi clamped to 10FFFF) as a
// disjoint list of sequences; each sequence matches exactly the encodings of one sub-range, byte k within
// sequence[k]. An empty result for an empty range.
std::vector<std::vector<ByteRange>> utf8_sequences(uint32_t lo, uint32_t hi);

// The UTF-8 encoding of one code point (<= 10FFFF; a surrogate is encoded as is, as GBNF escapes may name one).
std::string utf8_encode(uint32_t cp);

}  // namespace preface::grammar
