// llama.cpp's tokenizer test vectors (../shared/vocab/ggml-vocab-X.gguf.inp/.out): every input must encode,
// without BOS and without parsing special tokens, to exactly the ids llama.cpp produced; and decode back.
#include <gtest/gtest.h>

#include "tok_test_util.h"

namespace preface::test {
namespace {

class VocabVectors : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    const std::string base = "vocab/ggml-vocab-" + GetParam() + ".gguf";
    tok_ = load_shared_tokenizer(base);
    ASSERT_NE(tok_, nullptr);
    const auto inp = shared_file(base + ".inp");
    const auto out = shared_file(base + ".out");
    ASSERT_FALSE(inp.empty());
    ASSERT_FALSE(out.empty());
    inputs_ = read_vocab_inputs(inp);
    expected_ = read_vocab_outputs(out);
    ASSERT_EQ(inputs_.size(), expected_.size()) << "inputs and expected outputs do not pair up";
    ASSERT_GE(inputs_.size(), 40u);
  }

  std::unique_ptr<Tokenizer> tok_;
  std::vector<std::string> inputs_;
  std::vector<std::vector<int32_t>> expected_;
};

std::string ids_str(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) {
    s.push_back(' ');
    s.append(std::to_string(id));
  }
  return s;
}

TEST_P(VocabVectors, EncodesLikeLlamaCpp) {
  size_t n_bad = 0;
  for (size_t i = 0; i < inputs_.size(); ++i) {
    const std::vector<int32_t> got = tok_->encode(inputs_[i], /*add_bos=*/false, /*parse_special=*/false);
    if (got != expected_[i]) ++n_bad;
    EXPECT_EQ(ids_str(got), ids_str(expected_[i])) << "input #" << i << ": '" << inputs_[i] << "'";
  }
  EXPECT_EQ(n_bad, 0u) << "of " << inputs_.size() << " inputs";
}

TEST_P(VocabVectors, DecodeRoundTrips) {
  for (size_t i = 0; i < inputs_.size(); ++i) {
    EXPECT_EQ(tok_->decode(expected_[i]), inputs_[i]) << "input #" << i;
    EXPECT_EQ(tok_->decode(tok_->encode(inputs_[i], true)), inputs_[i]) << "input #" << i << " with BOS";
  }
}

TEST_P(VocabVectors, StreamingEqualsWholeDecode) {
  for (size_t i = 0; i < inputs_.size(); ++i) {
    const std::vector<int32_t> ids = tok_->encode(inputs_[i], true);
    StreamDecoder stream(*tok_);
    std::string text;
    for (int32_t id : ids) text += stream.push(id);
    EXPECT_EQ(stream.flush(), "") << "input #" << i << " ended mid character";
    EXPECT_EQ(text, tok_->decode(ids)) << "input #" << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Vocab, VocabVectors,
                         ::testing::Values("llama-spm", "gpt-2", "phi-3", "deepseek-llm", "falcon", "starcoder",
                                           "qwen35", "gemma-4"),
                         [](const auto& info) { return param_name(info.param); });

}  // namespace
}  // namespace preface::test
