// stories260K, greedy from BOS for 256 tokens, must reproduce the published continuation exactly
// (../shared/oracle/stories260K.greedy-from-bos-256.{ids,txt}); the oracle's 48-token greedy continuation of
// every prompt must match too (a trained model has clear logit gaps, unlike the random synthetic ones).
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/model.h"
#include "model_harness.h"
#include "support/shared_data.h"
#include "tokenizer/tokenizer.h"

namespace preface::test {
namespace {

std::vector<int32_t> read_ids(const std::filesystem::path& path) {
  std::ifstream in(path);
  return {std::istream_iterator<int32_t>(in), std::istream_iterator<int32_t>()};
}

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Greedy decoding of n tokens after `prompt`, one token per forward call.
std::vector<int32_t> greedy(model::Model& m, ThreadPool& pool, const std::vector<int32_t>& prompt, size_t n) {
  constexpr int32_t kBlockSize = 16;
  const size_t n_vocab = static_cast<size_t>(m.config().n_vocab);
  const int32_t n_blocks = static_cast<int32_t>((prompt.size() + n + kBlockSize - 1) / kBlockSize);
  TestKv kv(m.config(), kernels::KvType::F16, kBlockSize, n_blocks);
  const std::vector<int32_t> table = reversed_blocks(n_blocks);
  std::vector<float> logits = run_chunked(m, pool, kv.view, table, prompt, prompt.size());
  std::vector<float> last(logits.end() - static_cast<ptrdiff_t>(n_vocab), logits.end());
  std::vector<int32_t> out;
  model::ForwardBatch batch;
  batch.block_tables = {&table};
  while (out.size() < n) {
    out.push_back(static_cast<int32_t>(std::max_element(last.begin(), last.end()) - last.begin()));
    batch.clear();
    batch.add(out.back(), static_cast<int32_t>(prompt.size() + out.size() - 1), 0, true);
    if (out.size() < n) m.forward(batch, kv.view, pool, last.data());
  }
  return out;
}

TEST(Stories260K, GreedyFromBosMatchesPublishedText) {
  const auto model_path = shared_file("models/stories260K.gguf");
  const auto ids_path = shared_file("oracle/stories260K.greedy-from-bos-256.ids");
  const auto txt_path = shared_file("oracle/stories260K.greedy-from-bos-256.txt");
  if (model_path.empty() || ids_path.empty() || txt_path.empty()) return;
  auto m = model::Model::load(model_path.string());
  const auto tok = Tokenizer::from_gguf(m->file());
  const std::vector<int32_t> expected_ids = read_ids(ids_path);
  ASSERT_EQ(expected_ids.size(), 256u);
  ThreadPool pool(2);

  const std::vector<int32_t> ids = greedy(*m, pool, {tok->bos_id()}, 256);
  EXPECT_EQ(ids, expected_ids);

  // The .ids list the generated tokens (no BOS). The .txt is their decoded text plus a newline that ends the
  // file (the 256th token is "." mid-sentence); that one trailing newline is not part of the text.
  std::string expected_text = read_text(txt_path);
  ASSERT_FALSE(expected_text.empty());
  ASSERT_EQ(expected_text.back(), '\n');
  expected_text.pop_back();
  EXPECT_EQ(tok->decode(ids), expected_text);
}

TEST(Stories260K, GreedyContinuationsMatchOracle) {
  const auto model_path = shared_file("models/stories260K.gguf");
  const auto oracle_path = shared_file("oracle/stories260K.jsonl");
  if (model_path.empty() || oracle_path.empty()) return;
  auto m = model::Model::load(model_path.string());
  ThreadPool pool(2);
  std::ifstream in(oracle_path);
  std::string line;
  int n_cases = 0;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const auto j = nlohmann::json::parse(line);
    const auto prompt = j.at("tokens").get<std::vector<int32_t>>();
    const auto expected = j.at("greedy").get<std::vector<int32_t>>();
    EXPECT_EQ(greedy(*m, pool, prompt, expected.size()), expected) << j.at("prompt").get<std::string>();
    ++n_cases;
  }
  EXPECT_GT(n_cases, 0);
}

}  // namespace
}  // namespace preface::test
