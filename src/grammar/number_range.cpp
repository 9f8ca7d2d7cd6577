#include "grammar/number_range.h"

#include "grammar/schema_regex.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace preface::grammar {
namespace {

constexpr const char* kFraction = R"("." [0-9]{0,15} [1-9])";  // 1-16 digits, never all zeros

std::string join_alternatives(const std::vector<std::string>& alts) {
  std::string out = "(";
  for (size_t i = 0; i < alts.size(); ++i) out += cat(i ? " | " : " ", alts[i]);
  return out + " )";
}

int64_t clamp_to_range(double v) {
  const double m = static_cast<double>(kMaxIntegerMagnitude);
  if (v >= m) return kMaxIntegerMagnitude;
  if (v <= -m) return -kMaxIntegerMagnitude;
  return static_cast<int64_t>(v);  // v is integral here (a ceil or floor)
}

std::string digit_class(char lo, char hi) {
  const std::string a(1, lo), b(1, hi);
  return lo == hi ? cat("\"", a, "\"") : cat("[", a, "-", b, "]");
}

std::string any_digits(size_t n) {
  if (n == 0) return "";
  return n == 1 ? " [0-9]" : cat(" [0-9]{", std::to_string(n), "}");
}

// Decimal strings of one length between lo and hi (same length, lo <= hi), as an expression.
std::string same_length(const std::string& lo, const std::string& hi) {
  if (lo.empty()) return "\"\"";
  const size_t rest = lo.size() - 1;
  const std::string lo_rest = lo.substr(1), hi_rest = hi.substr(1);
  if (lo[0] == hi[0]) {
    return rest == 0 ? digit_class(lo[0], lo[0]) : cat(digit_class(lo[0], lo[0]), " ", same_length(lo_rest, hi_rest));
  }
  const bool lo_open = lo_rest.find_first_not_of('0') == std::string::npos;  // lo[0] followed by any digits
  const bool hi_open = hi_rest.find_first_not_of('9') == std::string::npos;
  std::vector<std::string> alts;
  if (!lo_open) alts.push_back(cat(digit_class(lo[0], lo[0]), " ", same_length(lo_rest, std::string(rest, '9'))));
  const char mid_lo = static_cast<char>(lo_open ? lo[0] : lo[0] + 1);
  const char mid_hi = static_cast<char>(hi_open ? hi[0] : hi[0] - 1);
  if (mid_lo <= mid_hi) alts.push_back(digit_class(mid_lo, mid_hi) + any_digits(rest));
  if (!hi_open) alts.push_back(cat(digit_class(hi[0], hi[0]), " ", same_length(std::string(rest, '0'), hi_rest)));
  return join_alternatives(alts);
}

// Non-negative integers a..b (0 <= a <= b), no leading zeros, as a list of alternatives.
void unsigned_range(int64_t a, int64_t b, std::vector<std::string>& alts) {
  const std::string sa = std::to_string(a), sb = std::to_string(b);
  for (size_t len = sa.size(); len <= sb.size(); ++len) {
    int64_t first = 1;  // 10^(len-1); len <= 16 digits, so 10^len fits
    for (size_t i = 1; i < len; ++i) first *= 10;
    const int64_t last = first * 10 - 1;
    if (len == 1) first = 0;
    const int64_t lo = std::max(a, first), hi = std::min(b, last);
    if (lo <= hi) alts.push_back(same_length(std::to_string(lo), std::to_string(hi)));
  }
}

std::string unsigned_range_expr(int64_t a, int64_t b) {
  std::vector<std::string> alts;
  unsigned_range(a, b, alts);
  if (alts.size() == 1) return alts[0];
  return join_alternatives(alts);
}

}  // namespace

std::string integer_range_gbnf(int64_t lo, int64_t hi) {
  lo = std::clamp(lo, -kMaxIntegerMagnitude, kMaxIntegerMagnitude);
  hi = std::clamp(hi, -kMaxIntegerMagnitude, kMaxIntegerMagnitude);
  std::vector<std::string> alts;
  if (hi >= 0 && lo <= hi) unsigned_range(std::max<int64_t>(lo, 0), hi, alts);
  if (lo < 0) {  // -m for m in [max(1, -hi), -lo]
    const int64_t m_lo = std::max<int64_t>(1, -hi);
    if (m_lo <= -lo) alts.push_back(cat("\"-\" ", unsigned_range_expr(m_lo, -lo)));
  }
  return join_alternatives(alts);
}

IntegerSpan integer_span(const std::optional<NumberBound>& lower, const std::optional<NumberBound>& upper) {
  IntegerSpan s;
  if (lower) s.lo = clamp_to_range(lower->exclusive ? std::floor(lower->value) + 1 : std::ceil(lower->value));
  if (upper) s.hi = clamp_to_range(upper->exclusive ? std::ceil(upper->value) - 1 : std::floor(upper->value));
  if (lower && lower->value > static_cast<double>(kMaxIntegerMagnitude)) s.lo = kMaxIntegerMagnitude + 1;
  if (upper && upper->value < -static_cast<double>(kMaxIntegerMagnitude)) s.hi = -kMaxIntegerMagnitude - 1;
  return s;
}

std::optional<std::string> number_range_gbnf(const std::optional<NumberBound>& lower,
                                              const std::optional<NumberBound>& upper) {
  std::vector<std::string> alts;
  const IntegerSpan ints = integer_span(lower, upper);
  if (ints.lo <= ints.hi) alts.push_back(integer_range_gbnf(ints.lo, ints.hi));
  // n.f (f > 0) lies in (n, n+1): inside the bounds when lower <= n and n + 1 <= upper.
  const int64_t n_lo = std::max<int64_t>(0, lower ? clamp_to_range(std::ceil(lower->value)) : 0);
  const int64_t n_hi = upper ? clamp_to_range(std::floor(upper->value)) - 1 : kMaxIntegerMagnitude;
  if (n_lo <= n_hi && (!lower || lower->value <= static_cast<double>(kMaxIntegerMagnitude))) {
    alts.push_back(cat(unsigned_range_expr(n_lo, std::min(n_hi, kMaxIntegerMagnitude)), " ", kFraction));
  }
  // -m.f (f > 0) lies in (-m-1, -m): inside when lower <= -m-1 and -m <= upper.
  const int64_t m_lo = std::max<int64_t>(0, upper ? clamp_to_range(std::ceil(-upper->value)) : 0);
  const int64_t m_hi = lower ? clamp_to_range(std::floor(-lower->value)) - 1 : kMaxIntegerMagnitude;
  if (m_lo <= m_hi && (!upper || upper->value >= -static_cast<double>(kMaxIntegerMagnitude))) {
    alts.push_back(cat("\"-\" ", unsigned_range_expr(m_lo, std::min(m_hi, kMaxIntegerMagnitude)), " ", kFraction));
  }
  if (alts.empty()) return std::nullopt;
  return join_alternatives(alts);
}

}  // namespace preface::grammar
