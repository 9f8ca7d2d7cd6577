// Numeric bounds of a JSON Schema (minimum, maximum, exclusiveMinimum, exclusiveMaximum) as GBNF. Internal to
// json_schema.cpp. Written here: Debian packages no JSON-Schema-to-grammar compiler; the digit-range construction
// is the classic one (llama.cpp's converter builds integer bounds the same way; read, not copied).
//
// Every text the expressions match is a JSON number inside the bounds: integers of at most kMaxIntegerDigits
// digits (json_schema.h's `integer` rule) and, for `number`, decimals with at most 16 fraction digits and no
// exponent. Not every such number is produced (the grammar's outputs are a subset of the valid instances): a
// decimal's integer part must keep the whole interval (n, n+1) inside the bounds, and its fraction is never all
// zeros (1.0 is written 1).
#pragma once
#include <cstdint>
#include <optional>
#include <string>

namespace preface::grammar {

inline constexpr int kMaxIntegerDigits = 16;
inline constexpr int64_t kMaxIntegerMagnitude = 9'999'999'999'999'999;  // 16 nines

// A bound of a schema: the value and whether it is exclusive.
struct NumberBound {
  double value = 0;
  bool exclusive = false;
};

// GBNF expression of the integers n with lo <= n <= hi (both clamped to +-kMaxIntegerMagnitude), no leading
// zeros, no "-0". Precondition: lo <= hi after clamping.
std::string integer_range_gbnf(int64_t lo, int64_t hi);

// The smallest and largest integer inside optional bounds, clamped to +-kMaxIntegerMagnitude; lo > hi when no
// integer is inside.
struct IntegerSpan {
  int64_t lo = -kMaxIntegerMagnitude, hi = kMaxIntegerMagnitude;
};
IntegerSpan integer_span(const std::optional<NumberBound>& lower, const std::optional<NumberBound>& upper);

// GBNF expression of numbers inside the bounds (integers and decimals as described above); nullopt when the
// bounds admit no number this grammar writes (e.g. minimum 0.2, maximum 0.3).
std::optional<std::string> number_range_gbnf(const std::optional<NumberBound>& lower,
                                              const std::optional<NumberBound>& upper);

}  // namespace preface::grammar
