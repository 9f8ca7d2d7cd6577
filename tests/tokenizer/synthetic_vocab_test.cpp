// Tiny vocabularies written with gguf::Writer: the merge order rules of both models, byte fallback,
// user-defined vs control tokens, metadata defaults, and clear errors for unsupported or broken metadata.
#include <gtest/gtest.h>

#include "gguf/writer.h"
#include "tok_test_util.h"
#include "util/error.h"

namespace preface::test {
namespace {

const std::string kSpace = "\xE2\x96\x81";  // U+2581, SentencePiece's space

struct TokenDef {
  std::string text;
  float score;
  int32_t type;  // tokenizer.ggml.token_type
};

// <unk> <s> </s> <0x00>..<0xFF> (ids 0..258), then `extra` from id 259.
gguf::Writer spm_writer(const std::vector<TokenDef>& extra) {
  std::vector<TokenDef> defs = {{"<unk>", 0, 2}, {"<s>", 0, 3}, {"</s>", 0, 3}};
  for (int b = 0; b < 256; ++b) {
    static constexpr char kHex[] = "0123456789ABCDEF";
    defs.push_back({std::string{'<', '0', 'x', kHex[b >> 4], kHex[b & 15], '>'}, 0, 6});
  }
  defs.insert(defs.end(), extra.begin(), extra.end());
  std::vector<std::string> texts;
  std::vector<float> scores;
  std::vector<int32_t> types;
  for (const auto& d : defs) {
    texts.push_back(d.text);
    scores.push_back(d.score);
    types.push_back(d.type);
  }
  gguf::Writer w;
  w.set_string("general.architecture", "llama");
  w.set_string("tokenizer.ggml.model", "llama");
  w.set_string_array("tokenizer.ggml.tokens", texts);
  w.set_f32_array("tokenizer.ggml.scores", scores);
  w.set_i32_array("tokenizer.ggml.token_type", types);
  return w;
}

// Byte-level vocab: "a" "b" "c" "Ġ" "ab" "Ġa" "<|endoftext|>" with the given merges.
gguf::Writer bpe_writer(const std::string& pre, const std::vector<std::string>& merges) {
  gguf::Writer w;
  w.set_string("tokenizer.ggml.model", "gpt2");
  w.set_string("tokenizer.ggml.pre", pre);
  w.set_string_array("tokenizer.ggml.tokens", {"a", "b", "c", "\xC4\xA0", "ab", "\xC4\xA0" "a", "<|endoftext|>"});
  w.set_i32_array("tokenizer.ggml.token_type", {1, 1, 1, 1, 1, 1, 3});
  w.set_string_array("tokenizer.ggml.merges", merges);
  w.set_u32("tokenizer.ggml.bos_token_id", 6);
  w.set_u32("tokenizer.ggml.eos_token_id", 6);
  return w;
}

std::unique_ptr<Tokenizer> build(const gguf::Writer& w, const std::string& name) {
  struct RemoveDir {
    std::filesystem::path dir;
    ~RemoveDir() { std::filesystem::remove_all(dir); }
  } scratch{temp_dir("tok-" + name)};
  const auto path = scratch.dir / "vocab.gguf";
  w.write(path.string());
  const gguf::File file = gguf::File::open(path.string());
  return Tokenizer::from_gguf(file);
}

std::string error_of(const gguf::Writer& w, const std::string& name) {
  try {
    build(w, name);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

constexpr int32_t kSp = 259, kA = 260, kB = 261, kAB = 262, kSpA = 263, kTag = 264, kCtl = 265;

std::vector<TokenDef> pair_tokens(float ab_score, float sp_a_score) {
  return {{kSpace, -1, 1},        {"a", -2, 1},      {"b", -2, 1}, {"ab", ab_score, 1},
          {kSpace + "a", sp_a_score, 1}, {"<tag>", 0, 4}, {"<ctl>", 0, 3}};
}

TEST(SyntheticSpm, HighestScoringPairMergesFirst) {
  EXPECT_EQ(build(spm_writer(pair_tokens(-1, -3)), "spm1")->encode("ab", false),
            (std::vector<int32_t>{kSp, kAB}));
  EXPECT_EQ(build(spm_writer(pair_tokens(-3, -1)), "spm2")->encode("ab", false),
            (std::vector<int32_t>{kSpA, kB}));
  // Equal scores: the leftmost pair wins.
  EXPECT_EQ(build(spm_writer(pair_tokens(-2, -2)), "spm3")->encode("ab", false),
            (std::vector<int32_t>{kSpA, kB}));
}

TEST(SyntheticSpm, ByteFallbackSpecialTokensAndDefaults) {
  const auto tok = build(spm_writer(pair_tokens(-1, -3)), "spm4");
  EXPECT_TRUE(tok->add_bos_default());  // default for llama vocabs
  EXPECT_TRUE(tok->adds_space_prefix());
  EXPECT_EQ(tok->bos_id(), 1);
  EXPECT_EQ(tok->eos_id(), 2);
  EXPECT_EQ(tok->encode("c", true), (std::vector<int32_t>{1, kSp, 3 + 'c'}));
  // User-defined tokens are split out even without parse_special; text after them gets the space prefix.
  EXPECT_EQ(tok->encode("a<tag>b", false), (std::vector<int32_t>{kSpA, kTag, kSp, kB}));
  EXPECT_EQ(tok->decode({kSpA, kTag, kSp, kB}), "a<tag> b");
  // Control tokens only with parse_special.
  EXPECT_EQ(tok->encode("<ctl>", false, true), (std::vector<int32_t>{kCtl}));
  const std::vector<int32_t> plain = tok->encode("<ctl>", false, false);
  EXPECT_EQ(plain.size(), 6u);  // "▁" then the five characters as byte tokens
  EXPECT_EQ(tok->decode(plain), "<ctl>");
}

TEST(SyntheticSpm, MetadataOverridesDefaults) {
  gguf::Writer w = spm_writer(pair_tokens(-1, -3));
  w.set_bool("tokenizer.ggml.add_space_prefix", false);
  w.set_bool("tokenizer.ggml.add_bos_token", false);
  w.set_u32("tokenizer.ggml.eos_token_id", kA);
  w.set_u32("tokenizer.ggml.bos_token_id", 4294967295u);  // "none" as some converters write it: ignored
  const auto tok = build(w, "spm5");
  EXPECT_FALSE(tok->add_bos_default());
  EXPECT_FALSE(tok->adds_space_prefix());
  EXPECT_EQ(tok->bos_id(), 1);
  EXPECT_EQ(tok->eos_id(), kA);
  EXPECT_TRUE(tok->is_end_of_generation(kA));
  EXPECT_TRUE(tok->is_end_of_generation(2));  // "</s>" is an end marker by its text
  EXPECT_EQ(tok->encode("ab", false), (std::vector<int32_t>{kAB}));
  EXPECT_EQ(tok->decode({kA, kB}), "ab");
}

TEST(SyntheticBpe, LowestRankMergesFirst) {
  EXPECT_EQ(build(bpe_writer("gpt-2", {"a b", "\xC4\xA0 a"}), "bpe1")->encode(" ab", false),
            (std::vector<int32_t>{3, 4}));
  EXPECT_EQ(build(bpe_writer("gpt-2", {"\xC4\xA0 a", "a b"}), "bpe2")->encode(" ab", false),
            (std::vector<int32_t>{5, 1}));
  const auto tok = build(bpe_writer("gpt-2", {"a b"}), "bpe3");
  EXPECT_FALSE(tok->add_bos_default());
  EXPECT_EQ(tok->encode("ab c", true), (std::vector<int32_t>{6, 4, 3, 2}));
  EXPECT_EQ(tok->decode({6, 4, 3, 2}), "ab c");
  EXPECT_TRUE(tok->is_end_of_generation(6));
  // llama3-style pre-tokenizers add BOS by default.
  EXPECT_TRUE(build(bpe_writer("llama-bpe", {"a b"}), "bpe4")->add_bos_default());
}

TEST(SyntheticErrors, UnsupportedPreTokenizerIsNamed) {
  const std::string msg = error_of(bpe_writer("no-such-pre", {"a b"}), "err1");
  EXPECT_NE(msg.find("tokenizer.ggml.pre"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'no-such-pre'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("llama-bpe"), std::string::npos) << "should list supported values: " << msg;
}

TEST(SyntheticErrors, UnsupportedModelIsNamed) {
  gguf::Writer w = bpe_writer("gpt-2", {"a b"});
  w.set_string("tokenizer.ggml.model", "bert");
  const std::string msg = error_of(w, "err2");
  EXPECT_NE(msg.find("'bert'"), std::string::npos) << msg;
}

TEST(SyntheticErrors, BrokenMetadata) {
  gguf::Writer no_model;
  no_model.set_string_array("tokenizer.ggml.tokens", {"a"});
  EXPECT_NE(error_of(no_model, "err3").find("tokenizer.ggml.model"), std::string::npos);

  gguf::Writer no_tokens;
  no_tokens.set_string("tokenizer.ggml.model", "llama");
  EXPECT_NE(error_of(no_tokens, "err4").find("tokenizer.ggml.tokens"), std::string::npos);

  gguf::Writer short_types = spm_writer({});
  short_types.set_i32_array("tokenizer.ggml.token_type", {1, 2, 3});
  EXPECT_NE(error_of(short_types, "err5").find("tokenizer.ggml.token_type"), std::string::npos);

  gguf::Writer no_merges;
  no_merges.set_string("tokenizer.ggml.model", "gpt2");
  no_merges.set_string_array("tokenizer.ggml.tokens", {"a", "b"});
  EXPECT_NE(error_of(no_merges, "err6").find("tokenizer.ggml.merges"), std::string::npos);

  gguf::Writer bos_missing = bpe_writer("gpt-2", {"a b"});
  bos_missing.set_bool("tokenizer.ggml.add_bos_token", true);
  bos_missing.set_u32("tokenizer.ggml.bos_token_id", 99);  // out of range: the gpt2 default (11) is too
  EXPECT_NE(error_of(bos_missing, "err7").find("bos_token_id"), std::string::npos);
}

}  // namespace
}  // namespace preface::test

namespace preface::test {
namespace {

// An EOS id outside the vocabulary is ignored, as llama.cpp does, but said (issue 28 item 11).
TEST(SyntheticVocab, OutOfRangeSpecialIdIsIgnoredWithAWarning) {
  gguf::Writer w = spm_writer({});
  w.set_u32("tokenizer.ggml.bos_token_id", 1);
  w.set_u32("tokenizer.ggml.eos_token_id", 99999);
  const auto tok = build(w, "eos-out-of-range");
  EXPECT_EQ(tok->bos_id(), 1);
  ASSERT_EQ(tok->load_warnings().size(), 1u);
  EXPECT_NE(tok->load_warnings()[0].find("tokenizer.ggml.eos_token_id = 99999 is outside the vocabulary"),
            std::string::npos)
      << tok->load_warnings()[0];
  gguf::Writer ok = spm_writer({});
  ok.set_u32("tokenizer.ggml.eos_token_id", 2);
  EXPECT_TRUE(build(ok, "eos-in-range")->load_warnings().empty());
}

}  // namespace
}  // namespace preface::test
