// Fuzz target: GBNF grammar text (llama.cpp's `grammar` field). parse_gbnf throws only GrammarError; a grammar
// it accepts satisfies grammar.h's invariants (refs defined, alternatives End-terminated) and its token matcher
// agrees with the byte-level reference along a walk (grammar_walk.h). Input: the grammar text; its last 16 bytes
// also choose the walk's tokens.
#include <cstdint>
#include <string_view>

#include "grammar/grammar.h"
#include "grammar_walk.h"
#include "support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace preface;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  grammar::Grammar g;
  try {
    g = grammar::parse_gbnf(text);
  } catch (const grammar::GrammarError&) {
    return 0;
  }
  fuzz::check(g.root >= 0 && static_cast<size_t>(g.root) < g.rules.size(), "root out of range");
  for (const auto& alts : g.rules) {
    fuzz::check(!alts.empty(), "a rule without alternatives");
    for (int32_t start : alts) {
      size_t p = static_cast<size_t>(start);
      for (; p < g.elements.size() && g.elements[p].kind != grammar::Element::End; ++p) {
        const auto& e = g.elements[p];
        if (e.kind == grammar::Element::Ref) fuzz::check(static_cast<size_t>(e.value) < g.rules.size(), "bad ref");
        if (e.kind == grammar::Element::Bytes) {
          fuzz::check(static_cast<size_t>(e.value) < g.terminals.size(), "bad terminal");
        }
      }
      fuzz::check(p < g.elements.size(), "an alternative without End");
    }
  }
  const size_t n_choices = size < 16 ? size : 16;
  fuzz::walk_grammar(g, data + size - n_choices, n_choices, 24);
  return 0;
}
