// Regression tests for findings of the tokenizer fuzz targets (fuzz/tokenizer_*_fuzz.cpp); their inputs are
// kept in fuzz/regress/<target>/.
#include <gtest/gtest.h>

#include "tok_test_util.h"

namespace preface::test {
namespace {

std::string stream_all(const Tokenizer& tok, const std::vector<int32_t>& ids) {
  StreamDecoder stream(tok);
  std::string out;
  for (const int32_t id : ids) out += stream.push(id);
  return out + stream.flush();
}

// Two leading BOS (the text starts with "<s>" and is encoded with add_bos and parse_special): decode() applies
// the leading-space rule to ids[1] (the second BOS, empty) and keeps the space of "▁special", while
// StreamDecoder skipped every BOS and removed it. tokenizer_spm_encode input: "\x01<s>special</s> <unk> text".
TEST(StreamDecoderRegress, RepeatedLeadingBosMatchesDecode) {
  const auto tok = load_shared_tokenizer("vocab/ggml-vocab-llama-spm.gguf");
  ASSERT_NE(tok, nullptr);
  const std::vector<int32_t> ids = tok->encode("<s>special</s> <unk> text", /*add_bos=*/true, /*parse_special=*/true);
  ASSERT_GE(ids.size(), 3u);
  ASSERT_EQ(ids[0], tok->bos_id());
  ASSERT_EQ(ids[1], tok->bos_id());
  EXPECT_EQ(stream_all(*tok, ids), tok->decode(ids));
  const std::vector<int32_t> bos_bos_text = {tok->bos_id(), tok->bos_id(), ids[2]};
  EXPECT_EQ(stream_all(*tok, bos_bos_text), tok->decode(bos_bos_text));
}

}  // namespace
}  // namespace preface::test
