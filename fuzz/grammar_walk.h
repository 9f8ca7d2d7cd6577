// Shared by the grammar fuzz targets: walks a compiled grammar's token matcher over a small byte vocabulary and
// checks it against the byte-level reference matcher (grammar::match_bytes) at every step.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "grammar/matcher.h"
#include "support.h"

namespace preface::fuzz {

// Vocabulary: EOS (id 0), every single byte, and a few multi-byte pieces.
inline std::shared_ptr<const grammar::TokenVocab> grammar_vocab() {
  static const auto vocab = [] {
    std::vector<std::string> bytes{""};
    for (int b = 0; b < 256; ++b) bytes.emplace_back(1, static_cast<char>(b));
    for (const char* t : {"{\"", "\":", "\",\"", "true", "null", "12", " \"", "\"}", "\xC3\xA9", "ab"}) {
      bytes.emplace_back(t);
    }
    return std::make_shared<grammar::TokenVocab>(std::move(bytes), std::vector<int32_t>{0}, false);
  }();
  return vocab;
}

// The reference's bound on live parse stacks: it has no interning, so an ambiguous grammar (`x?{1,34}`) would
// take exponential time there; the walk stops where the reference gives up.
inline constexpr size_t kReferenceMaxStacks = 1024;

// Up to max_steps tokens chosen by `choices` (one byte per step); the matcher's mask must agree with
// match_bytes for the chosen token and for EOS. Only preface::Error (the matcher's and the reference's state
// limits) may escape.
inline void walk_grammar(const grammar::Grammar& g, const uint8_t* choices, size_t n_choices, size_t max_steps) {
  try {
    auto c = std::make_shared<grammar::Constraint>(g, grammar_vocab());
    grammar::Matcher m(c, false);
    std::string text;
    for (size_t step = 0; step < max_steps; ++step) {
      const auto mask = m.allowed();
      const grammar::ByteMatch here = grammar::match_bytes(g, text, kReferenceMaxStacks);
      check(here.alive, "the matcher reached a dead prefix");
      check(mask->test(0) == here.accepting, "EOS allowed where the grammar does not accept (or the reverse)");
      check(m.complete() == here.complete, "complete() disagrees with the reference");
      if (mask->n_allowed == 0 || m.complete()) return;
      std::vector<int32_t> allowed;
      for (int32_t id = 1; id < c->vocab().n_vocab(); ++id) {
        if (mask->test(id)) allowed.push_back(id);
      }
      if (allowed.empty()) return;
      const int32_t t = allowed[(step < n_choices ? choices[step] : 0) % allowed.size()];
      check(grammar::match_bytes(g, text + c->vocab().bytes(t), kReferenceMaxStacks).alive,
            "the mask allowed a token leaving the grammar");
      check(m.accept(t), "accept() refused a token the mask allowed");
      text += c->vocab().bytes(t);
    }
  } catch (const grammar::GrammarError&) {
    fail("GrammarError from the matcher of a grammar that compiled");
  } catch (const Error&) {
    // the matcher's state-space limits, or the reference's
  }
}

}  // namespace preface::fuzz
