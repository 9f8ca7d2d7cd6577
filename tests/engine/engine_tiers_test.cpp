// The disk cache tier through the engine (engine/kv_tiers.h over kv/disk_tier.h): blocks written by one engine are
// loaded by the next one on the same directory, and the logits of a request served from disk equal a cold
// engine's bit for bit; every damaged, foreign or misplaced record is rejected and counted, never served.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "engine_harness.h"
#include "kv/disk_tier.h"
#include "kv/hash.h"

namespace preface::test {
namespace {

namespace fs = std::filesystem;
constexpr int32_t kBlock = 16;

std::vector<int32_t> prompt_of(int32_t n, int32_t variant) {
  std::vector<int32_t> p(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) p[static_cast<size_t>(i)] = 1 + (i * 7 + 13 * variant + i * i * variant) % 300;
  return p;
}

engine::EngineConfig config_for(const LoadedModel& lm, const std::string& dir, uint64_t kv_bytes = 8ull << 20) {
  engine::EngineConfig c;
  c.kv_cache_bytes = kv_bytes;
  c.n_threads = 1;
  c.tiers.disk_dir = dir;
  c.tiers.disk_bytes = 1ull << 30;
  return engine::with_eog(c, *lm.tokenizer);
}

Outcome run(engine::Engine& eng, const std::vector<int32_t>& prompt) {
  auto stream = eng.submit(greedy_request(prompt, 4));
  eng.run_until_idle();
  EXPECT_NO_THROW(eng.check_invariants());
  EXPECT_EQ(eng.counters().n_blocks_in_use, 0);
  return collect(*stream);
}

kv::TierStats disk_stats(engine::Engine& eng) {
  eng.step();  // publishes the counters
  const auto c = eng.counters();
  EXPECT_EQ(c.tiers.size(), 1u);
  return c.tiers.empty() ? kv::TierStats{} : c.tiers[0];
}

int64_t rejected(const kv::TierStats& s, kv::RecordStatus r) { return s.n_rejected[static_cast<size_t>(r)]; }

class EngineTiers : public ::testing::Test {
 protected:
  void SetUp() override {
    lm_ = load_shared_model("stories260K.gguf");
    if (!lm_.model) GTEST_SKIP() << "stories260K.gguf not available";
    dir_ = (temp_dir("engine-tiers") / ::testing::UnitTest::GetInstance()->current_test_info()->name()).string();
    fs::remove_all(dir_);
    prompt_ = prompt_of(12 * kBlock + 5, 1);
    engine::EngineConfig cold = config_for(lm_, "");
    cold.tiers = {};
    engine::Engine eng(*lm_.model, cold);
    cold_ = run(eng, prompt_);
  }

  // An engine on dir_ computes prompt_ and stops (an orderly stop writes its cached blocks).
  void populate() {
    engine::Engine eng(*lm_.model, config_for(lm_, dir_));
    const Outcome o = run(eng, prompt_);
    expect_identical(cold_, o, "populating run");
    eng.stop();
    EXPECT_GE(disk_stats(eng).n_written_records, 12);
  }

  std::string block_path(int32_t b) const {
    engine::Engine probe(*lm_.model, config_for(lm_, ""));
    const auto hashes = kv::block_hashes(probe.cache_namespace(""), prompt_, kBlock);
    const std::string hex = kv::to_hex(hashes[static_cast<size_t>(b)]);
    return dir_ + "/" + hex.substr(0, 2) + "/" + hex + ".kvb";
  }

  LoadedModel lm_;
  std::string dir_;
  std::vector<int32_t> prompt_;
  Outcome cold_;
};

TEST_F(EngineTiers, RestartServesThePrefixFromDiskBitExact) {
  populate();
  engine::Engine eng(*lm_.model, config_for(lm_, dir_));
  const engine::CacheExplanation before = eng.explain_cache(prompt_, "");
  EXPECT_EQ(before.prefix.miss_block, 0);
  EXPECT_EQ(before.tier, "disk") << "the explainer names the tier that holds the missing block";
  const Outcome o = run(eng, prompt_);
  expect_identical(cold_, o, "served from disk");
  EXPECT_EQ(eng.explain_cache(prompt_, "").tier, "") << "a full RAM hit has no missing block";
  EXPECT_EQ(o.stats.n_cached_tokens, 12 * kBlock);
  EXPECT_EQ(o.stats.n_tier_tokens, 12 * kBlock);
  const kv::TierStats s = disk_stats(eng);
  EXPECT_EQ(s.n_hit_blocks, 12);
  EXPECT_GT(s.n_read_bytes, 0);
  EXPECT_EQ(eng.counters().n_tier_loaded_blocks, 12);
  // The second request is an ordinary RAM hit.
  const Outcome again = run(eng, prompt_);
  expect_identical(cold_, again, "RAM hit after the disk load");
  EXPECT_EQ(again.stats.n_tier_tokens, 0);
}

TEST_F(EngineTiers, EvictedBlocksAreWrittenAndLoadedBack) {
  // A pool of 16 blocks: the second prompt evicts the first one's blocks, which go to disk (no stop in between).
  uint64_t block_bytes = 0;
  {
    engine::Engine probe(*lm_.model, config_for(lm_, ""));
    block_bytes = probe.describe().kv_bytes / static_cast<uint64_t>(probe.describe().n_kv_blocks);
  }
  engine::Engine eng(*lm_.model, config_for(lm_, dir_, 16 * block_bytes));
  ASSERT_EQ(eng.describe().n_kv_blocks, 16);
  expect_identical(cold_, run(eng, prompt_), "first run");
  const Outcome other = run(eng, prompt_of(12 * kBlock + 5, 2));
  EXPECT_EQ(other.stats.n_cached_tokens, 0);
  EXPECT_GT(eng.counters().n_evictions, 0);
  const Outcome o = run(eng, prompt_);
  expect_identical(cold_, o, "evicted blocks loaded back");
  EXPECT_EQ(o.stats.n_cached_tokens, 12 * kBlock);
  EXPECT_GT(o.stats.n_tier_tokens, 0);
  EXPECT_LT(o.stats.n_tier_tokens, 12 * kBlock) << "the shallow blocks were still in RAM";
}

TEST_F(EngineTiers, CorruptPayloadIsRejectedAndTheChainStopsThere) {
  populate();
  {
    std::fstream f(block_path(3), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-7, std::ios::end);
    f.put('\x5a');
  }
  engine::Engine eng(*lm_.model, config_for(lm_, dir_));
  const Outcome o = run(eng, prompt_);
  expect_identical(cold_, o, "corrupt payload");
  EXPECT_EQ(o.stats.n_tier_tokens, 3 * kBlock);
  const kv::TierStats s = disk_stats(eng);
  EXPECT_EQ(rejected(s, kv::RecordStatus::PayloadChecksum), 1);
  EXPECT_FALSE(fs::exists(block_path(3))) << "a rejected record is removed";
}

TEST_F(EngineTiers, TruncatedTornAndSwappedRecordsAreRejectedAtStartUp) {
  populate();
  fs::resize_file(block_path(5), fs::file_size(block_path(5)) - 100);  // truncated payload
  fs::resize_file(block_path(7), 150);                                  // torn inside the header
  {
    std::fstream f(block_path(9), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(210);  // inside the token ids
    f.put('\x01');
  }
  fs::rename(block_path(1), dir_ + "/swap.tmp");  // blocks 1 and 2 swapped
  fs::rename(block_path(2), block_path(1));
  fs::rename(dir_ + "/swap.tmp", block_path(2));
  engine::Engine eng(*lm_.model, config_for(lm_, dir_));
  const Outcome o = run(eng, prompt_);
  expect_identical(cold_, o, "damaged records");
  EXPECT_EQ(o.stats.n_tier_tokens, 1 * kBlock);  // block 0 only: block 1 is a misplaced record
  const kv::TierStats s = disk_stats(eng);
  EXPECT_EQ(rejected(s, kv::RecordStatus::Truncated), 2);
  EXPECT_EQ(rejected(s, kv::RecordStatus::HeaderChecksum), 1);
  EXPECT_EQ(rejected(s, kv::RecordStatus::Mismatch), 2);
}

TEST_F(EngineTiers, AnotherModelIgnoresTheRecordsAndCountsThem) {
  populate();
  LoadedModel other = load_shared_model("synth-llama-d256-f16.gguf");
  if (!other.model) GTEST_SKIP() << "synth-llama-d256-f16.gguf not available";
  const auto prompt = prompt_of(12 * kBlock + 5, 1);
  engine::EngineConfig cold = config_for(other, "");
  cold.tiers = {};
  Outcome expected;
  {
    engine::Engine eng(*other.model, cold);
    expected = run(eng, prompt);
  }
  engine::Engine eng(*other.model, config_for(other, dir_));
  const Outcome o = run(eng, prompt);
  expect_identical(expected, o, "another model on the directory");
  EXPECT_EQ(o.stats.n_tier_tokens, 0);
  const kv::TierStats s = disk_stats(eng);
  EXPECT_GE(rejected(s, kv::RecordStatus::OtherModel), 12);
  EXPECT_EQ(s.n_hit_blocks, 0);
}

// The cache namespace and every record carry the KV format: an engine of the same model with other K/V types
// finds none of the f16 records (it computes cold, bit-identical to a tier-less run of its format), counts them
// at the scan, and serves its own records back after a restart.
TEST_F(EngineTiers, AnotherKvFormatIgnoresTheRecordsAndCountsThem) {
  populate();
  const kernels::KvFormat q(kernels::KvType::Q8_0, kernels::KvType::Q4_0);  // stories260K's rows: one block each
  engine::EngineConfig cold = config_for(lm_, "");
  cold.tiers = {};
  cold.kv_format = q;
  Outcome expected;
  {
    engine::Engine eng(*lm_.model, cold);
    expected = run(eng, prompt_);
  }
  engine::EngineConfig on_disk = config_for(lm_, dir_);
  on_disk.kv_format = q;
  {
    engine::Engine eng(*lm_.model, on_disk);
    const Outcome o = run(eng, prompt_);
    expect_identical(expected, o, "q8_0/q4_0 on an f16 directory");
    EXPECT_EQ(o.stats.n_tier_tokens, 0);
    EXPECT_GE(rejected(disk_stats(eng), kv::RecordStatus::KvLayout), 12);
    eng.stop();
  }
  engine::Engine eng(*lm_.model, on_disk);
  const Outcome o = run(eng, prompt_);
  expect_identical(expected, o, "q8_0/q4_0 records served back");
  EXPECT_EQ(o.stats.n_tier_tokens, 12 * kBlock);
}

TEST_F(EngineTiers, APurgeRemovesTheNamespaceFromDisk) {
  populate();
  {
    engine::Engine eng(*lm_.model, config_for(lm_, dir_));
    EXPECT_EQ(eng.purge_namespace(""), 0);  // nothing in RAM yet; the disk records go all the same
    EXPECT_EQ(disk_stats(eng).n_records, 0);
  }
  engine::Engine eng(*lm_.model, config_for(lm_, dir_));
  const Outcome o = run(eng, prompt_);
  expect_identical(cold_, o, "after a purge");
  EXPECT_EQ(o.stats.n_tier_tokens, 0);
}

}  // namespace
}  // namespace preface::test
