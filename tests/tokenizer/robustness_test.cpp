// Random input: encoding never fails, ids stay in range, and decoding gives valid UTF-8 text back exactly
// (except U+2581, which SentencePiece decodes as a space). Malformed UTF-8 is tokenized as llama.cpp does:
// SentencePiece cuts characters by the lead byte alone (so a bad lead can swallow the bytes of an escaped
// space) and byte-level BPE reads bad bytes as U+FFFD, so neither round-trips it.
#include <gtest/gtest.h>

#include <random>

#include "tok_test_util.h"

namespace preface::test {
namespace {

std::string random_bytes(std::mt19937& rng, size_t max_len) {
  std::uniform_int_distribution<size_t> len(0, max_len);
  std::uniform_int_distribution<int> byte(0, 255);
  std::string s(len(rng), '\0');
  for (char& c : s) c = static_cast<char>(byte(rng));
  return s;
}

// Valid UTF-8 mixing ASCII (often spaces, digits, punctuation) and code points from every plane.
std::string random_utf8(std::mt19937& rng, size_t max_chars) {
  std::uniform_int_distribution<size_t> len(0, max_chars);
  std::uniform_int_distribution<int> kind(0, 3);
  std::uniform_int_distribution<uint32_t> ascii(0x01, 0x7F), bmp(0x80, 0xFFFF), astral(0x10000, 0x10FFFF);
  std::string s;
  for (size_t i = len(rng); i > 0; --i) {
    uint32_t cpt = kind(rng) < 2 ? ascii(rng) : kind(rng) < 3 ? bmp(rng) : astral(rng);
    if (cpt >= 0xD800 && cpt <= 0xDFFF) cpt = ' ';
    if (cpt < 0x80) {
      s.push_back(static_cast<char>(cpt));
    } else if (cpt < 0x800) {
      s += {static_cast<char>(0xC0 | (cpt >> 6)), static_cast<char>(0x80 | (cpt & 0x3F))};
    } else if (cpt < 0x10000) {
      s += {static_cast<char>(0xE0 | (cpt >> 12)), static_cast<char>(0x80 | ((cpt >> 6) & 0x3F)),
            static_cast<char>(0x80 | (cpt & 0x3F))};
    } else {
      s += {static_cast<char>(0xF0 | (cpt >> 18)), static_cast<char>(0x80 | ((cpt >> 12) & 0x3F)),
            static_cast<char>(0x80 | ((cpt >> 6) & 0x3F)), static_cast<char>(0x80 | (cpt & 0x3F))};
    }
  }
  return s;
}

void expect_ids_in_range(const Tokenizer& tok, const std::vector<int32_t>& ids) {
  for (int32_t id : ids) ASSERT_TRUE(id >= 0 && id < tok.n_vocab()) << id;
}

TEST(Robustness, SentencePieceIsLosslessOnValidUtf8) {
  const auto tok = load_shared_tokenizer("vocab/ggml-vocab-llama-spm.gguf");
  ASSERT_NE(tok, nullptr);
  std::mt19937 rng(7);
  for (int i = 0; i < 300; ++i) {
    expect_ids_in_range(*tok, tok->encode(random_bytes(rng, 48), true, i % 2 == 0));
    const std::string text = random_utf8(rng, 24);
    if (text.find("\xE2\x96\x81") != std::string::npos) continue;  // U+2581 decodes to a space
    for (bool special : {false, true}) {
      const std::vector<int32_t> ids = tok->encode(text, true, special);
      expect_ids_in_range(*tok, ids);
      EXPECT_EQ(tok->decode(ids), text) << "case " << i;
      StreamDecoder s(*tok);
      std::string streamed;
      for (int32_t id : ids) streamed += s.push(id);
      streamed += s.flush();
      EXPECT_EQ(streamed, text) << "case " << i;
    }
  }
}

TEST(Robustness, ByteLevelBpeIsLosslessOnValidUtf8) {
  // falcon and starcoder lack some of the 256 byte characters (e.g. 0x03, 0xF2); llama.cpp then drops those
  // bytes, so only the range of their ids is checked.
  for (const char* vocab : {"gpt-2", "deepseek-llm", "falcon", "starcoder"}) {
    const bool lossless = std::string(vocab) == "gpt-2" || std::string(vocab) == "deepseek-llm";
    const auto tok = load_shared_tokenizer(std::string("vocab/ggml-vocab-") + vocab + ".gguf");
    ASSERT_NE(tok, nullptr);
    std::mt19937 rng(11);
    for (int i = 0; i < 150; ++i) {
      const std::string text = random_utf8(rng, 24);
      const std::vector<int32_t> ids = tok->encode(text, false);
      expect_ids_in_range(*tok, ids);
      if (lossless) {
        EXPECT_EQ(tok->decode(ids), text) << vocab << " case " << i;
      }
      // Malformed input is tokenized (as U+FFFD, like llama.cpp) rather than rejected.
      expect_ids_in_range(*tok, tok->encode(random_bytes(rng, 32), true, true));
    }
  }
}

}  // namespace
}  // namespace preface::test
