// Decoding pieces, StreamDecoder, special-token parsing and end-of-generation ids on the shared vocabs.
#include <gtest/gtest.h>

#include <algorithm>

#include "tok_test_util.h"
#include "util/error.h"

namespace preface::test {
namespace {

int32_t id_of(const Tokenizer& tok, const std::string& piece) {
  for (int32_t id = 0; id < tok.n_vocab(); ++id) {
    if (tok.piece(id) == piece) return id;
  }
  ADD_FAILURE() << "piece not in vocab: " << piece;
  return -1;
}

TEST(TokenBytes, SentencePiecePieces) {
  const auto tok = load_shared_tokenizer("vocab/ggml-vocab-llama-spm.gguf");
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->bos_id(), 1);
  EXPECT_EQ(tok->eos_id(), 2);
  EXPECT_EQ(tok->unk_id(), 0);
  EXPECT_TRUE(tok->add_bos_default());
  EXPECT_TRUE(tok->adds_space_prefix());
  EXPECT_EQ(tok->attr(13), TokenAttr::Byte);
  EXPECT_EQ(tok->token_to_bytes(13), "\n");  // <0x0A>
  EXPECT_EQ(tok->token_to_bytes(id_of(*tok, "\xE2\x96\x81Hello")), " Hello");
  EXPECT_EQ(tok->token_to_bytes(1), "");  // <s> is a control token
  EXPECT_EQ(tok->token_to_bytes(0), "");  // <unk>
  EXPECT_THROW(tok->token_to_bytes(-1), Error);
  EXPECT_THROW(tok->token_to_bytes(tok->n_vocab()), Error);
  EXPECT_EQ(tok->encode("", true), std::vector<int32_t>{1});
  EXPECT_TRUE(tok->encode("", false).empty());
}

TEST(TokenBytes, ByteLevelPieces) {
  const auto tok = load_shared_tokenizer("vocab/ggml-vocab-gpt-2.gguf");
  ASSERT_NE(tok, nullptr);
  EXPECT_FALSE(tok->add_bos_default());
  EXPECT_FALSE(tok->adds_space_prefix());
  EXPECT_EQ(tok->token_to_bytes(id_of(*tok, "\xC4\xA0hello")), " hello");  // "Ġhello"
  EXPECT_EQ(tok->token_to_bytes(id_of(*tok, "\xC4\x8A")), "\n");          // "Ċ"
  EXPECT_EQ(tok->decode(tok->encode(" leading space kept", false)), " leading space kept");
}

TEST(StreamDecoder, HoldsMultiByteCharacterSplitOverByteTokens) {
  const auto tok = load_shared_tokenizer("vocab/ggml-vocab-llama-spm.gguf");
  ASSERT_NE(tok, nullptr);
  // U+1F999 is not in the vocab: SentencePiece falls back to its four bytes.
  const std::vector<int32_t> ids = tok->encode("\xF0\x9F\xA6\x99", false);
  ASSERT_EQ(ids.size(), 5u);
  EXPECT_EQ(tok->piece(ids[0]), "\xE2\x96\x81");
  EXPECT_EQ(ids[1], id_of(*tok, "<0xF0>"));
  EXPECT_EQ(ids[4], id_of(*tok, "<0x99>"));

  StreamDecoder s(*tok);
  EXPECT_EQ(s.push(ids[0]), "");  // the space prefix is dropped at the start of the text
  EXPECT_EQ(s.push(ids[1]), "");
  EXPECT_EQ(s.push(ids[2]), "");
  EXPECT_EQ(s.push(ids[3]), "");
  EXPECT_EQ(s.push(ids[4]), "\xF0\x9F\xA6\x99");
  EXPECT_EQ(s.flush(), "");

  StreamDecoder cut(*tok);
  EXPECT_EQ(cut.push(id_of(*tok, "a")), "a");
  EXPECT_EQ(cut.push(id_of(*tok, "<0xE6>")), "");
  EXPECT_EQ(cut.push(id_of(*tok, "<0x97>")), "");
  EXPECT_EQ(cut.flush(), "\xE6\x97");  // an unfinished character comes out as it is at the end
  EXPECT_EQ(cut.flush(), "");
  // A stray continuation byte can never complete and is not held.
  EXPECT_EQ(cut.push(id_of(*tok, "<0x97>")), "\x97");
}

TEST(StreamDecoder, LeadingSpaceRule) {
  const auto tok = load_shared_tokenizer("vocab/ggml-vocab-llama-spm.gguf");
  ASSERT_NE(tok, nullptr);
  const int32_t hello = id_of(*tok, "\xE2\x96\x81Hello");
  StreamDecoder start(*tok);
  EXPECT_EQ(start.push(tok->bos_id()), "");
  EXPECT_EQ(start.push(hello), "Hello");
  EXPECT_EQ(start.push(hello), " Hello");
  StreamDecoder cont(*tok, /*at_text_start=*/false);
  EXPECT_EQ(cont.push(hello), " Hello");
  EXPECT_EQ(tok->decode({tok->bos_id(), hello, hello}), "Hello Hello");
  EXPECT_EQ(tok->decode({hello}), "Hello");
}

TEST(StreamDecoder, ByteLevelEmojiComesOutWhole) {
  const auto tok = load_shared_tokenizer("vocab/ggml-vocab-gpt-2.gguf");
  ASSERT_NE(tok, nullptr);
  const std::string text = "llama \xF0\x9F\xA6\x99 and \xE2\x9C\x93!";
  const std::vector<int32_t> ids = tok->encode(text, false);
  StreamDecoder s(*tok);
  std::string out;
  size_t n_held = 0;
  for (int32_t id : ids) {
    const std::string chunk = s.push(id);
    if (chunk.empty()) ++n_held;
    for (size_t i = 0; i < chunk.size();) {  // every chunk is whole characters
      const auto b = static_cast<uint8_t>(chunk[i]);
      const size_t len = b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
      ASSERT_LE(i + len, chunk.size()) << "chunk ends mid character";
      i += len;
    }
    out += chunk;
  }
  EXPECT_GT(n_held, 0u) << "the emoji should span several tokens";
  EXPECT_EQ(s.flush(), "");
  EXPECT_EQ(out, text);
}

TEST(SpecialTokens, ParsedOnlyWhenAsked) {
  const auto tok = load_shared_tokenizer("vocab/ggml-vocab-phi-3.gguf");
  ASSERT_NE(tok, nullptr);
  const int32_t user = id_of(*tok, "<|user|>");
  const int32_t end = id_of(*tok, "<|end|>");
  const std::vector<int32_t> parsed = tok->encode("<|user|>\nHi<|end|>", false, true);
  // Phi-3's special tokens strip the whitespace after them (llama.cpp's RSTRIP), and the text after a special
  // token gets the SentencePiece space prefix again.
  std::vector<int32_t> want{user};
  for (int32_t id : tok->encode("Hi", false)) want.push_back(id);
  want.push_back(end);
  EXPECT_EQ(parsed, want);
  const std::vector<int32_t> plain = tok->encode("<|user|>\nHi<|end|>", false, false);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), user), 0);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), end), 0);
  EXPECT_EQ(tok->decode(plain), "<|user|>\nHi<|end|>");
  EXPECT_EQ(tok->token_to_bytes(user), "");  // control tokens decode to nothing
}

TEST(EndOfGeneration, EosEotAndEndMarkers) {
  const auto spm = load_shared_tokenizer("vocab/ggml-vocab-llama-spm.gguf");
  ASSERT_NE(spm, nullptr);
  EXPECT_TRUE(spm->is_end_of_generation(2));
  EXPECT_FALSE(spm->is_end_of_generation(1));
  EXPECT_FALSE(spm->is_end_of_generation(13));
  EXPECT_EQ(spm->eot_id(), -1);

  const auto phi = load_shared_tokenizer("vocab/ggml-vocab-phi-3.gguf");
  ASSERT_NE(phi, nullptr);
  const int32_t end = id_of(*phi, "<|end|>");
  EXPECT_EQ(phi->eos_id(), 32000);
  EXPECT_EQ(phi->eot_id(), end);
  EXPECT_TRUE(phi->is_end_of_generation(32000));  // <|endoftext|>
  EXPECT_TRUE(phi->is_end_of_generation(end));
  EXPECT_TRUE(phi->is_end_of_generation(id_of(*phi, "</s>")));
  EXPECT_FALSE(phi->is_end_of_generation(id_of(*phi, "<|user|>")));

  const auto gpt2 = load_shared_tokenizer("vocab/ggml-vocab-gpt-2.gguf");
  ASSERT_NE(gpt2, nullptr);
  EXPECT_TRUE(gpt2->is_end_of_generation(50256));
  EXPECT_FALSE(gpt2->is_end_of_generation(0));
}

}  // namespace
}  // namespace preface::test
