// Random sentences of a forced-call grammar (grammar/tool_calls.h), for the tool-call tests: a vocabulary of the
// 256 bytes plus every row's markers as whole tokens (as a real vocabulary has them), and walks that prefer those
// multi-byte tokens half the time, so that free text meets its end marker.
#pragma once
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "grammar/matcher.h"
#include "grammar/tool_formats.h"

namespace preface::test {

inline std::shared_ptr<const grammar::TokenVocab> marker_vocab() {
  std::vector<std::string> bytes{""};  // id 0: end of generation
  for (int b = 0; b < 256; ++b) bytes.emplace_back(1, static_cast<char>(b));
  for (const grammar::ToolFormat& f : grammar::tool_formats()) {
    for (const std::string_view m : {f.section_open, f.section_close, f.call_open, f.call_close, f.name_close,
                                     f.param_open, f.param_mid, f.param_close}) {
      if (m.size() > 1) bytes.emplace_back(m);
    }
  }
  bytes.emplace_back("<|\"|>");
  return std::make_shared<grammar::TokenVocab>(std::move(bytes), std::vector<int32_t>{0}, false);
}

// One sentence of the grammar; empty when the walk ran out of steps.
inline std::string walk(const std::shared_ptr<grammar::Constraint>& c, std::mt19937_64& rng) {
  grammar::Matcher m(c, false);
  std::string text;
  for (int step = 0; step < 600; ++step) {
    const auto mask = m.allowed();
    std::vector<int32_t> allowed, long_ones;
    for (int32_t id = 1; id < c->vocab().n_vocab(); ++id) {
      if (!mask->test(id)) continue;
      allowed.push_back(id);
      if (c->vocab().bytes(id).size() > 1) long_ones.push_back(id);
    }
    int32_t t = 0;
    if (!(mask->test(0) && (rng() % 3 == 0 || allowed.empty()))) {
      if (allowed.empty()) return {};
      const auto& pool = !long_ones.empty() && rng() % 2 == 0 ? long_ones : allowed;
      t = pool[rng() % pool.size()];
    }
    if (!m.accept(t)) return {};
    if (t == 0) return text;
    text += c->vocab().bytes(t);
  }
  return {};
}

}  // namespace preface::test
