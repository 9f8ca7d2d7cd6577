// A hybrid model's state snapshots in the disk tier (engine/kv_tiers.h): an engine that stops leaves its blocks and
// snapshots on disk, and the next engine on the directory resumes a prompt, and the next turn after a reply, from
// them, with logits memcmp-identical to a cold run; a damaged snapshot record is rejected, counted and never
// served (the request computes from position 0, with the same bits, and writes a sound record in its place).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "engine/kv_tiers.h"
#include "engine_harness.h"
#include "kv/hash.h"

namespace preface::test {
namespace {

namespace fs = std::filesystem;
constexpr int32_t kBlock = 16;
constexpr int32_t kReply = 24;

std::vector<int32_t> prompt_of(int32_t n, int32_t variant) {
  std::vector<int32_t> p(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) p[static_cast<size_t>(i)] = 1 + (i * 7 + 13 * variant + i * i * variant) % 300;
  return p;
}

engine::EngineConfig config_for(const LoadedModel& lm, const std::string& dir) {
  engine::EngineConfig c;
  c.kv_cache_bytes = 8ull << 20;
  c.n_threads = 2;
  c.state_snapshot_interval = 0;
  c.tiers.disk_dir = dir;
  c.tiers.disk_bytes = 1ull << 30;
  if (dir.empty()) c.prefix_cache = false;
  return engine::with_eog(c, *lm.tokenizer);
}

Outcome run(engine::Engine& eng, const std::vector<int32_t>& prompt, int32_t n_new) {
  auto stream = eng.submit(greedy_request(prompt, n_new));
  eng.run_until_idle();
  EXPECT_NO_THROW(eng.check_invariants());
  return collect(*stream);
}

class HybridTiers : public ::testing::Test {
 protected:
  void SetUp() override {
    lm_ = load_shared_model("synth-qwen35-d128-f16.gguf");
    ASSERT_TRUE(lm_.model) << "needs ../shared/models/synth-qwen35-d128-f16.gguf";
    dir_ = (temp_dir("hybrid-tiers") / ::testing::UnitTest::GetInstance()->current_test_info()->name()).string();
    fs::remove_all(dir_);
    prompt_ = prompt_of(6 * kBlock + 5, 1);
  }
  Outcome cold(const std::vector<int32_t>& prompt, int32_t n_new) {
    engine::Engine eng(*lm_.model, config_for(lm_, ""));
    return run(eng, prompt, n_new);
  }
  // An engine on dir_ answers prompt_ with a reply of kReply tokens and stops; returns the reply.
  std::vector<int32_t> populate() {
    engine::Engine eng(*lm_.model, config_for(lm_, dir_));
    const Outcome o = run(eng, prompt_, kReply);
    expect_identical(o, cold(prompt_, kReply), "populating run");
    eng.stop();
    return o.tokens;
  }
  // The snapshot record at the end of prompt_'s block b on disk.
  std::string snapshot_path(const std::vector<int32_t>& tokens, int32_t b) const {
    engine::Engine probe(*lm_.model, config_for(lm_, ""));
    const auto hashes = kv::block_hashes(probe.cache_namespace(""), tokens, kBlock);
    const kv::Digest parent = engine::state_parent(b == 0 ? probe.cache_namespace("") : hashes[b - 1]);
    const std::span<const int32_t> block(tokens.data() + static_cast<size_t>(b) * kBlock, kBlock);
    const std::string hex = kv::to_hex(kv::chain_hash(parent, block));
    return dir_ + "/" + hex.substr(0, 2) + "/" + hex + ".kvb";
  }
  LoadedModel lm_;
  std::string dir_;
  std::vector<int32_t> prompt_;
};

TEST_F(HybridTiers, RestartResumesThePromptAndTheNextTurnFromDisk) {
  const std::vector<int32_t> reply = populate();
  const int32_t prompt_point = (static_cast<int32_t>(prompt_.size()) - 1) / kBlock * kBlock;
  ASSERT_TRUE(fs::exists(snapshot_path(prompt_, prompt_point / kBlock - 1)));
  {
    engine::Engine eng(*lm_.model, config_for(lm_, dir_));
    const Outcome o = run(eng, prompt_, 4);
    expect_identical(o, cold(prompt_, 4), "the prompt again after a restart");
    EXPECT_EQ(o.stats.n_cached_tokens, prompt_point);
    EXPECT_GT(o.stats.n_tier_tokens, 0);
    eng.step();
    EXPECT_EQ(eng.counters().n_tier_loaded_snapshots, 1);
  }
  // The next turn: prompt, reply (all but its last token were computed), new tokens.
  std::vector<int32_t> turn2 = prompt_;
  turn2.insert(turn2.end(), reply.begin(), reply.end());
  const std::vector<int32_t> more = prompt_of(9, 2);
  turn2.insert(turn2.end(), more.begin(), more.end());
  const int32_t reply_end = (static_cast<int32_t>(prompt_.size()) + kReply - 1) / kBlock * kBlock;
  ASSERT_GT(reply_end, prompt_point);
  engine::Engine eng(*lm_.model, config_for(lm_, dir_));
  const Outcome o = run(eng, turn2, 4);
  expect_identical(o, cold(turn2, 4), "the next turn after a restart");
  EXPECT_EQ(o.stats.n_cached_tokens, reply_end);
}

TEST_F(HybridTiers, ADamagedSnapshotIsRejectedNeverServed) {
  populate();
  const int32_t prompt_point = (static_cast<int32_t>(prompt_.size()) - 1) / kBlock * kBlock;
  const std::string path = snapshot_path(prompt_, prompt_point / kBlock - 1);
  ASSERT_TRUE(fs::exists(path));
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(fs::file_size(path) - 100));
    f.put('\x5a');
  }
  engine::Engine eng(*lm_.model, config_for(lm_, dir_));
  const Outcome o = run(eng, prompt_, 4);
  expect_identical(o, cold(prompt_, 4), "a damaged snapshot on disk");
  EXPECT_EQ(o.stats.n_cached_tokens, 0);
  eng.step();
  const engine::EngineCounters c = eng.counters();
  EXPECT_EQ(c.n_tier_loaded_snapshots, 0);
  ASSERT_EQ(c.tiers.size(), 1u);
  EXPECT_EQ(c.tiers[0].n_rejected[static_cast<size_t>(kv::RecordStatus::PayloadChecksum)], 1);
  // The request filed its own snapshot there again, and a sound record replaced the rejected one.
  eng.stop();
  engine::Engine next(*lm_.model, config_for(lm_, dir_));
  const Outcome again = run(next, prompt_, 4);
  expect_identical(again, o, "the rewritten snapshot");
  EXPECT_EQ(again.stats.n_cached_tokens, prompt_point);
}

// A purge of the namespace (DELETE /v1/cache) drops its snapshots with its blocks, in RAM and on disk: the next
// request, and the next engine on the directory, compute cold.
TEST_F(HybridTiers, APurgeDropsTheSnapshotsInRamAndOnDisk) {
  engine::EngineConfig cfg = config_for(lm_, dir_);
  cfg.tiers.write_through = true;  // blocks on disk as they are computed, as snapshots are
  {
    engine::Engine eng(*lm_.model, cfg);
    run(eng, prompt_, 4);
    const int32_t prompt_point = (static_cast<int32_t>(prompt_.size()) - 1) / kBlock * kBlock;
    EXPECT_EQ(run(eng, prompt_, 4).stats.n_cached_tokens, prompt_point);
    eng.step();
    ASSERT_GT(eng.counters().n_state_snapshots, 0);
    EXPECT_GT(eng.purge_namespace(""), 0);
    eng.step();
    EXPECT_EQ(eng.counters().n_state_snapshots, 0);
    eng.stop();
    const engine::EngineCounters c = eng.counters();
    ASSERT_EQ(c.tiers.size(), 1u);
    EXPECT_EQ(c.tiers[0].n_records, 0) << "the disk tier keeps no record of the purged namespace";
  }
  engine::Engine next(*lm_.model, cfg);
  const Outcome o = run(next, prompt_, 4);
  expect_identical(o, cold(prompt_, 4), "after the purge and a restart");
  EXPECT_EQ(o.stats.n_cached_tokens, 0) << "nothing of the purged namespace is left on disk";
  next.step();
  EXPECT_EQ(next.counters().n_tier_loaded_snapshots, 0);
}

}  // namespace
}  // namespace preface::test
