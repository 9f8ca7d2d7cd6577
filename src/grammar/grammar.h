// A context-free grammar over bytes: the one representation that GBNF text (llama.cpp's grammar format) and
// JSON Schemas (compiled to GBNF by json_schema.h) end up as, and that the token matcher (matcher.h) runs.
//
// Layout (as llama.cpp's llama_grammar): every alternative of every rule is a run of elements in `elements`,
// ended by an End element; a rule is the list of its alternatives' start offsets. A position is an index into
// `elements`. Terminals are sets of bytes: a code point class of the GBNF text is lowered to alternatives of
// UTF-8 byte sequences, so the matcher never decodes UTF-8.
//
// Invariants of a Grammar returned by parse_gbnf(): every Ref names a rule with at least one alternative, no
// rule reaches itself without consuming a byte (no left recursion, no repetition of something that can be
// empty), and the element count is at most kMaxGrammarElements.
#pragma once
#include <bitset>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "util/error.h"

namespace preface::grammar {

inline constexpr size_t kMaxGrammarElements = 1u << 20;
inline constexpr size_t kMaxGrammarTextBytes = 1u << 20;
// Parenthesised groups nest at most this deep (the parser recurses once per group; llama.cpp's grammars and the
// GBNF that JSON Schemas compile to stay far below it).
inline constexpr size_t kMaxGrammarNesting = 256;

// A grammar the input does not describe validly. `where` names the place (a GBNF rule and offset, or a JSON
// Schema path such as "properties.x.items"); what() is the complete message.
class GrammarError : public Error {
 public:
  GrammarError(std::string where_, const std::string& what) : Error(where_.empty() ? what : where_ + ": " + what),
                                                                  where(std::move(where_)), detail(what) {}
  std::string where;
  std::string detail;
};

struct Element {
  enum Kind : uint8_t { End, Ref, Bytes };
  Kind kind = End;
  int32_t value = 0;  // Ref: rule id; Bytes: index into Grammar::terminals
};

struct Grammar {
  std::vector<Element> elements;
  std::vector<std::vector<int32_t>> rules;  // [n_rules] alternative start positions
  std::vector<std::string> rule_names;      // [n_rules] (synthesized rules get "name-N")
  std::vector<std::bitset<256>> terminals;  // byte sets
  int32_t root = 0;
};

// Parses GBNF text (https://github.com/ggml-org/llama.cpp/blob/master/grammars/README.md): `name ::= alts`,
// "literals" with \n \r \t \\ \" \xHH \uHHHH \UHHHHHHHH escapes, [classes] (ranges, ^ negation), `.`, groups,
// and the repetitions * + ? {m} {m,} {m,n}; `#` comments. The start rule is `root` (or `start_rule`). Throws
// GrammarError naming the rule or the text offset, also for groups nested deeper than kMaxGrammarNesting.
Grammar parse_gbnf(std::string_view text, std::string_view start_rule = "root");

// A plain reference matcher over bytes (copied stacks, no interning or caching; tests compare the token
// matcher against it). alive: `bytes` is a prefix of some sentence; accepting: `bytes` is a sentence;
// complete: a sentence that no byte can extend. Throws Error (never GrammarError) when more than max_stacks parse
// stacks are live at once, counted before duplicates merge (an ambiguous grammar can need exponentially many).
struct ByteMatch {
  bool alive = false;
  bool accepting = false;
  bool complete = false;
};
ByteMatch match_bytes(const Grammar& g, std::string_view bytes, size_t max_stacks = SIZE_MAX);
// Throws GrammarError naming a rule that can reach itself without consuming a byte (the matcher's expansion would
// not end); parse_gbnf runs it on every grammar it builds.
void check_left_recursion(const Grammar& g);

}  // namespace preface::grammar
