// The token matcher against a brute-force reference: on a small vocabulary, the mask of every state reached
// along random walks equals "prefix + token bytes is alive" per token (match_bytes), EOS exactly where the
// prefix is a sentence; control tokens never.
#include <gtest/gtest.h>

#include <random>

#include <nlohmann/json.hpp>

#include "grammar/grammar_cache.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"

namespace preface::grammar {
namespace {

constexpr int32_t kEos = 0;
constexpr int32_t kControl = 1;

std::shared_ptr<const TokenVocab> small_vocab(bool space_prefix) {
  std::vector<std::string> bytes{"", ""};  // 0: EOS, 1: a control token
  for (int c = 0x20; c < 0x7F; ++c) bytes.emplace_back(1, static_cast<char>(c));
  for (const char* t : {"{\"", "\":", "\",\"", "true", "false", "null", "12", "-0", ".5", "e+", "  ", "\n ", "}",
                        " {", " \"", "\"}", "],", "[{", "ab", "abc", "red", "green", "\xC3\xA9", "\xC3", "\xA9x",
                        "\\n", "\\u00", "\"v\":", "\"kids\":[", " true", "  \"", "\"a\"", "\n", "\t"}) {
    bytes.emplace_back(t);
  }
  return std::make_shared<TokenVocab>(std::move(bytes), std::vector<int32_t>{kEos}, space_prefix);
}

void check_walks(const std::string& gbnf, bool space_prefix, bool strip, int n_walks, int max_len) {
  const auto vocab = small_vocab(space_prefix);
  const Grammar g = parse_gbnf(gbnf);
  auto c = std::make_shared<Constraint>(g, vocab);
  std::mt19937_64 rng(42);
  for (int w = 0; w < n_walks; ++w) {
    Matcher m(c, strip);
    std::string text;
    bool first = true;
    for (int step = 0; step < max_len; ++step) {
      const auto mask = m.allowed();
      std::vector<int32_t> allowed;
      for (int32_t id = 0; id < vocab->n_vocab(); ++id) {
        bool expect;
        if (id == kEos) {
          expect = match_bytes(g, text).accepting;
        } else if (vocab->bytes(id).empty()) {
          expect = false;
        } else {
          std::string b = vocab->bytes(id);
          if (first && strip && space_prefix && b[0] == ' ') b.erase(0, 1);
          expect = !b.empty() && match_bytes(g, text + b).alive;
        }
        ASSERT_EQ(mask->test(id), expect) << "walk " << w << " after '" << text << "' token " << id << " '"
                                          << vocab->bytes(id) << "'";
        if (expect) allowed.push_back(id);
      }
      ASSERT_EQ(mask->n_allowed, static_cast<int32_t>(allowed.size()));
      EXPECT_FALSE(mask->test(kControl));
      if (allowed.empty()) break;
      const int32_t t = allowed[rng() % allowed.size()];
      ASSERT_TRUE(m.accept(t));
      if (t == kEos) break;
      std::string b = vocab->bytes(t);
      if (first && strip && space_prefix && b[0] == ' ') b.erase(0, 1);
      text += b;
      first = false;
      EXPECT_EQ(m.accepting(), match_bytes(g, text).accepting);
      EXPECT_EQ(m.complete(), match_bytes(g, text).complete);
      if (m.complete()) break;
    }
  }
}

TEST(Matcher, MasksEqualBruteForceOnASchema) {
  const auto schema = nlohmann::json::parse(R"({"type":"object","properties":{
      "a":{"type":"array","items":{"enum":["red","green",12]},"maxItems":3},
      "b":{"type":"string","maxLength":4},"n":{"type":"number"},"t":{"type":"boolean"}},
      "required":["a","t"]})");
  check_walks(json_schema_to_gbnf(schema), false, false, 25, 40);
}

TEST(Matcher, MasksEqualBruteForceOnARecursiveGrammarWithUtf8) {
  check_walks(R"(root ::= node
node ::= "{" ( "\"v\":" ( [0-9]+ | "\"" [^"\\]{0,3} "\"" ) ( ",\"kids\":[" node ( "," node )* "]" )? ) "}"
)", false, false, 25, 40);
}

TEST(Matcher, FirstTokenDropsOneLeadingSpaceWhenTheTokenizerDoes) {
  const std::string g = json_object_gbnf();
  check_walks(g, true, true, 10, 12);
  check_walks(g, true, false, 5, 12);  // a completion continuing text: no dropping
}

TEST(Matcher, MasksAreCachedPerStateAndSharedThroughTheCache) {
  GrammarCache cache(small_vocab(false), 2);
  const auto schema = nlohmann::json::parse(R"({"type":"object","properties":{"x":{"type":"boolean"}}})");
  auto a = cache.json_schema(schema);
  auto b = cache.json_schema(nlohmann::json::parse(R"({"properties":{"x":{"type":"boolean"}},"type":"object"})"));
  EXPECT_EQ(a, b);  // same canonical text
  Matcher m1(a, false), m2(b, false);
  const auto mask1 = m1.allowed();
  const auto mask2 = m2.allowed();
  EXPECT_EQ(mask1, mask2);  // the same cached object
  EXPECT_EQ(a->stats().n_mask_hits, 1);
  EXPECT_NE(cache.gbnf("root ::= \"x\"\n"), a);
  cache.json_object();
  EXPECT_EQ(cache.stats().n_entries, 2u);  // bounded
  EXPECT_THROW(cache.gbnf("root ::= nope\n"), GrammarError);
}

TEST(Matcher, EosOnlyWhereAcceptingAndCompleteEndsIt) {
  auto c = std::make_shared<Constraint>(parse_gbnf("root ::= \"ab\" \"c\"?\n"), small_vocab(false));
  Matcher m(c, false);
  EXPECT_FALSE(m.allowed()->test(kEos));
  EXPECT_FALSE(m.accept(kEos));
  ASSERT_TRUE(m.accept(static_cast<int32_t>(2 + 'a' - 0x20)));
  ASSERT_TRUE(m.accept(static_cast<int32_t>(2 + 'b' - 0x20)));
  EXPECT_TRUE(m.accepting());
  EXPECT_FALSE(m.complete());
  EXPECT_TRUE(m.allowed()->test(kEos));
  EXPECT_FALSE(m.accept(static_cast<int32_t>(2 + 'x' - 0x20)));
  ASSERT_TRUE(m.accept(static_cast<int32_t>(2 + 'c' - 0x20)));
  EXPECT_TRUE(m.complete());
  EXPECT_EQ(m.allowed()->n_allowed, 1);  // EOS only
}

}  // namespace
}  // namespace preface::grammar
