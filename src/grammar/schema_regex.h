// A JSON Schema `pattern` (ECMA-262 regex subset) as a GBNF expression over the characters of a JSON string's
// content (escaped as JSON needs). Internal to json_schema.cpp.
#pragma once
#include <string>
#include <string_view>

namespace preface::grammar {

// Groups nest at most this deep: the parser recurses once per group, and each group becomes a GBNF group (plus
// one more for a quantifier), which parse_gbnf() accepts up to kMaxGrammarNesting deep.
inline constexpr size_t kMaxPatternNesting = 64;

// char_rule: the name of the GBNF rule for one JSON string character (any character, escaped as needed).
// Throws GrammarError (where "") for syntax outside the subset: backreferences, lookaround, lazy quantifiers,
// unicode property escapes, and so on; and for groups nested deeper than kMaxPatternNesting.
std::string pattern_to_gbnf(std::string_view pattern, const std::string& char_rule);

// Concatenation by appending: GCC 12's -Wrestrict misfires on `"literal" + std::string&&`.
template <typename... Parts>
std::string cat(const Parts&... parts) {
  std::string s;
  (s.append(std::string_view(parts)), ...);
  return s;
}

// GBNF quoting helpers shared with json_schema.cpp.
std::string gbnf_literal(std::string_view bytes);  // "..." with escapes
std::string gbnf_codepoint(uint32_t cp);           // \UXXXXXXXX (inside a literal or a class)

}  // namespace preface::grammar
