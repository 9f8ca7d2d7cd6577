// GBNF parsing and the byte-level reference matcher: sentences accepted and rejected, errors named.
#include <gtest/gtest.h>

#include "grammar/grammar.h"
#include "grammar/utf8_ranges.h"

namespace preface::grammar {
namespace {

bool accepts(const Grammar& g, std::string_view s) { return match_bytes(g, s).accepting; }

TEST(GbnfParser, LiteralsAlternativesAndGroups) {
  const Grammar g = parse_gbnf(R"(root ::= "a" ( "b" | "cd" ) tail  # comment
tail ::= "!" | "")");
  EXPECT_TRUE(accepts(g, "ab"));
  EXPECT_TRUE(accepts(g, "acd!"));
  EXPECT_FALSE(accepts(g, "ac"));
  EXPECT_FALSE(accepts(g, "abx"));
  EXPECT_TRUE(match_bytes(g, "ac").alive);
  EXPECT_FALSE(match_bytes(g, "ab").complete);  // "!" may follow
  EXPECT_TRUE(match_bytes(g, "ab!").complete);
}

TEST(GbnfParser, DuplicateEmptyAlternativesAreOneCompleteSentence) {
  // Two empty alternatives are one stack, not two: the empty sentence is complete (the fuzzer's finding).
  for (const char* text : {R"(root ::= "" | "")", R"(root ::= x x
x ::= "" | "")"}) {
    const ByteMatch m = match_bytes(parse_gbnf(text), "");
    EXPECT_TRUE(m.accepting) << text;
    EXPECT_TRUE(m.complete) << text;
  }
}

TEST(GbnfParser, ReferenceStopsAtItsStackBound) {
  // Nested optionals of an optional: every way to skip them is a stack until duplicates merge.
  const Grammar g = parse_gbnf(R"(root ::= [a-z]?{1,34})");
  EXPECT_THROW(match_bytes(g, "ab", 1024), Error);
  EXPECT_TRUE(match_bytes(parse_gbnf(R"(root ::= [a-z]?{1,4})"), "ab", 1024).accepting);
}

TEST(GbnfParser, Repetitions) {
  const Grammar g = parse_gbnf(R"(root ::= "x"* "y"+ "z"? [0-9]{2,3} "w"{2} "v"{1,})");
  EXPECT_TRUE(accepts(g, "y12wwv"));
  EXPECT_TRUE(accepts(g, "xxxyyz123wwvvv"));
  EXPECT_FALSE(accepts(g, "12wwv"));      // y+ needs one
  EXPECT_FALSE(accepts(g, "y1wwv"));      // {2,3}
  EXPECT_FALSE(accepts(g, "y1234wwv"));
  EXPECT_FALSE(accepts(g, "y12wv"));      // {2}
  EXPECT_FALSE(accepts(g, "y12ww"));      // {1,}
}

TEST(GbnfParser, ClassesNegationAndUtf8) {
  const Grammar g = parse_gbnf(R"(root ::= [^"\\a-c] [é-ë] "\u00e9\x41" .)");
  EXPECT_TRUE(accepts(g, "d\xC3\xAA\xC3\xA9" "A\xE2\x82\xAC"));  // d ê é A €
  EXPECT_FALSE(accepts(g, "b\xC3\xAA\xC3\xA9" "Az"));
  EXPECT_FALSE(accepts(g, "\"\xC3\xAA\xC3\xA9" "Az"));
  EXPECT_FALSE(accepts(g, "d\xC3\xAC\xC3\xA9" "Az"));  // ì outside é-ë
  EXPECT_TRUE(accepts(g, "\xF0\x9F\x98\x80\xC3\xAB\xC3\xA9" "A\x01"));
  EXPECT_FALSE(accepts(g, "\xC3"));  // a partial character is alive, not accepted
  EXPECT_TRUE(match_bytes(g, "\xC3").alive);
  EXPECT_FALSE(match_bytes(g, "\xFF").alive);  // never valid UTF-8
}

TEST(GbnfParser, RecursionIsFineLeftRecursionIsRejected) {
  const Grammar g = parse_gbnf("root ::= \"(\" root \")\" | \"x\"\n");
  EXPECT_TRUE(accepts(g, "((x))"));
  EXPECT_FALSE(accepts(g, "((x)"));
  EXPECT_THROW(parse_gbnf("root ::= root \"x\" | \"y\"\n"), GrammarError);
  EXPECT_THROW(parse_gbnf("root ::= (\"a\"?)*\n"), GrammarError);  // repetition of something empty
  EXPECT_THROW(parse_gbnf("root ::= a\na ::= b \"x\"\nb ::= \"\" | a\n"), GrammarError);
}

TEST(GbnfParser, ErrorsNameTheProblem) {
  auto message = [](std::string_view text) {
    try {
      parse_gbnf(text);
    } catch (const GrammarError& e) {
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  EXPECT_NE(message("root ::= undefined\n").find("undefined rule 'undefined'"), std::string::npos);
  EXPECT_NE(message("other ::= \"x\"\n").find("no 'root' rule"), std::string::npos);
  EXPECT_NE(message("root ::= \"x\n").find("unterminated"), std::string::npos);
  EXPECT_NE(message("root ::= [b-a]\n").find("out of order"), std::string::npos);
  EXPECT_NE(message("root := \"x\"\n").find("'::='"), std::string::npos);
  EXPECT_NE(message("root ::= \"x\"\nroot ::= \"y\"\n").find("defined twice"), std::string::npos);
  EXPECT_NE(message("root ::= * \"x\"\n").find("repetition"), std::string::npos);
  EXPECT_NE(message("root ::= \"x\"{3,2}\n").find("m <= n"), std::string::npos);
  std::string huge = "root ::=";
  for (int i = 0; i < 11; ++i) huge += " \"x\"{99999}";
  EXPECT_NE(message(huge).find("too large"), std::string::npos);
  EXPECT_NE(message("root ::= \"x\"{100001}").find("repetition bound"), std::string::npos);
  EXPECT_NE(message("root ::= \"\\q\"\n").find("unknown escape"), std::string::npos);
}

// The parser recurses once per group: 30,000 nested groups (60 KB) once overflowed the stack (issue 41).
TEST(GbnfParser, GroupNestingIsBounded) {
  auto nested = [](size_t depth) {
    std::string g = "root ::= ";  // appended: GCC 12's -Wrestrict misfires on "literal" + std::string&&
    return g.append(depth, '(').append("\"a\"").append(depth, ')').append("\n");
  };
  const Grammar at_limit = parse_gbnf(nested(kMaxGrammarNesting));
  EXPECT_TRUE(accepts(at_limit, "a"));
  for (const size_t depth : {kMaxGrammarNesting + 1, size_t{30000}}) {
    try {
      (void)parse_gbnf(nested(depth));
      ADD_FAILURE() << depth << " nested groups were accepted";
    } catch (const GrammarError& e) {
      EXPECT_NE(std::string(e.what()).find("nested deeper than " + std::to_string(kMaxGrammarNesting)),
                std::string::npos)
          << e.what();
    }
  }
}

TEST(Utf8Ranges, EverySequenceMatchesExactlyItsCodePoints) {
  // Brute force over the whole code space, sampled: each code point's encoding is matched by exactly one
  // sequence of the full range, and none matches an encoding outside [lo, hi].
  const auto seqs = utf8_sequences(0x7A, 0x10FFF0);
  auto matched = [&](const std::string& enc) {
    int n = 0;
    for (const auto& seq : seqs) {
      if (seq.size() != enc.size()) continue;
      bool ok = true;
      for (size_t k = 0; k < seq.size(); ++k) {
        const auto b = static_cast<uint8_t>(enc[k]);
        ok = ok && seq[k].first <= b && b <= seq[k].second;
      }
      n += ok ? 1 : 0;
    }
    return n;
  };
  for (uint32_t cp = 0; cp <= 0x10FFFF; cp += (cp < 0x20000 ? 1 : 97)) {
    const bool surrogate = cp >= 0xD800 && cp <= 0xDFFF;
    const int expect = (cp >= 0x7A && cp <= 0x10FFF0 && !surrogate) ? 1 : 0;
    ASSERT_EQ(matched(utf8_encode(cp)), expect) << std::hex << cp;
  }
}

}  // namespace
}  // namespace preface::grammar
