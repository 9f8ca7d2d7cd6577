// PrefixIndex::explain and the pool's RemovalLog: each miss reason produced by a scenario, with the positions and
// tokens reported, and the log's bound.
#include <gtest/gtest.h>

#include <chrono>

#include "kv/prefix_index.h"

namespace preface::kv {
namespace {

using Ids = std::vector<int32_t>;
using namespace std::chrono_literals;

constexpr int32_t kBlockSize = 4;

Digest ns_of(std::string_view salt) { return namespace_digest("explain-model", "f16", kBlockSize, "rope", salt); }

Ids iota(int32_t first, int32_t n) {
  Ids v(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = first + i;
  return v;
}

// Computes `tokens` as a sequence would: allocates its blocks, registers the full ones, releases them (cached).
void compute(PrefixIndex& index, const Digest& ns, const Ids& tokens) {
  BlockPool& pool = index.pool();
  const auto n_blocks = static_cast<int32_t>((tokens.size() + kBlockSize - 1) / kBlockSize);
  const Ids ids = *pool.allocate(n_blocks);
  Digest parent = ns;
  for (size_t i = 0; i + kBlockSize <= tokens.size(); i += kBlockSize) {
    parent = index.register_full_block(ns, ids[i / kBlockSize], parent,
                                       std::span<const int32_t>(tokens).subspan(i, kBlockSize));
  }
  pool.release(ids);
}

int32_t cap(const Ids& tokens) { return static_cast<int32_t>(tokens.size()) - 1; }

TEST(PrefixExplain, FullHitAndPartialBlock) {
  BlockPool pool(16, kBlockSize);
  PrefixIndex index(pool);
  const Digest ns = ns_of("");
  compute(index, ns, iota(1, 9));
  // 9 tokens, cap 8: blocks 0 and 1 cached, nothing else below the cap.
  PrefixExplanation e = index.explain(ns, iota(1, 9), cap(iota(1, 9)));
  EXPECT_EQ(e.reason, MissReason::FullHit);
  EXPECT_EQ(e.n_cached_tokens, 8);
  EXPECT_EQ(e.miss_block, -1);
  // 11 tokens, cap 10: blocks 0, 1 cached; tokens 8, 9 sit in block 2, not full.
  e = index.explain(ns, iota(1, 11), 10);
  EXPECT_EQ(e.reason, MissReason::PartialBlock);
  EXPECT_EQ(e.n_full_hit_tokens, 8);
  EXPECT_STREQ(miss_reason_name(e.reason), "partial_block");
  pool.check_invariants();
}

TEST(PrefixExplain, AnEditedTokenIsNeverSeenAndNamesBothTokens) {
  BlockPool pool(16, kBlockSize);
  PrefixIndex index(pool);
  const Digest ns = ns_of("");
  const Ids original = iota(10, 14);
  compute(index, ns, original);
  Ids edited = original;
  edited[6] = 99;  // block 1, offset 2
  const PrefixExplanation e = index.explain(ns, edited, cap(edited));
  EXPECT_EQ(e.reason, MissReason::NeverSeen);
  EXPECT_EQ(e.n_full_hit_tokens, 4);
  EXPECT_EQ(e.n_cached_tokens, 6);  // block 0, plus 2 copy-on-write tokens of block 1
  EXPECT_EQ(e.miss_block, 1);
  EXPECT_EQ(e.diverged_at, 6);
  EXPECT_EQ(e.cached_token, 16);
  EXPECT_EQ(e.new_token, 99);
  // A prompt that simply continues past the cached chain diverges from nothing.
  BlockPool pool2(16, kBlockSize);
  PrefixIndex index2(pool2);
  compute(index2, ns, iota(10, 8));
  const PrefixExplanation longer = index2.explain(ns, iota(10, 14), 13);
  EXPECT_EQ(longer.reason, MissReason::NeverSeen);
  EXPECT_EQ(longer.diverged_at, 8);
  EXPECT_EQ(longer.cached_token, -1);
  EXPECT_EQ(longer.new_token, 18);
}

TEST(PrefixExplain, EvictedUnderPressureSaysWhenAndHowFull) {
  BlockPool pool(4, kBlockSize);
  PrefixIndex index(pool);
  const Digest ns = ns_of("");
  pool.set_now(BlockPool::TimePoint{} + 10s);
  compute(index, ns, iota(1, 8));           // blocks 0, 1 cached
  const Ids held = *pool.allocate(2);       // two free blocks, nothing evicted
  pool.set_now(BlockPool::TimePoint{} + 25s);
  const Ids more = *pool.allocate(1);       // evicts block 1's hash (the deeper block leaves first)
  EXPECT_EQ(pool.n_evictions(), 1);
  const PrefixExplanation e = index.explain(ns, iota(1, 9), 8);
  EXPECT_EQ(e.reason, MissReason::Evicted);
  EXPECT_EQ(e.n_cached_tokens, 4);
  EXPECT_EQ(e.miss_block, 1);
  EXPECT_EQ(e.diverged_at, 4);
  EXPECT_EQ(e.cached_token, -1);
  ASSERT_TRUE(e.removal.has_value());
  EXPECT_EQ(e.removal->when, BlockPool::TimePoint{} + 25s);
  EXPECT_EQ(e.removal->n_in_use, 2);  // the pressure: two blocks held when the third was asked for
  pool.release(held);
  pool.release(more);
  // Computing it again forgets the record: the next miss on it would not be an old eviction.
  compute(index, ns, iota(1, 8));
  EXPECT_EQ(index.explain(ns, iota(1, 9), 8).reason, MissReason::FullHit);
  pool.check_invariants();
}

TEST(PrefixExplain, ExpiredAndPurged) {
  BlockPool pool(16, kBlockSize);
  PrefixIndex index(pool);
  const Digest a = ns_of("a"), b = ns_of("b");
  pool.set_now(BlockPool::TimePoint{} + 1s);
  compute(index, a, iota(1, 8));
  compute(index, b, iota(1, 8));
  pool.set_now(BlockPool::TimePoint{} + 100s);
  EXPECT_EQ(pool.purge_namespace(b), 2);
  EXPECT_EQ(pool.expire_idle(BlockPool::TimePoint{} + 50s), 2);  // a's blocks, idle since 1 s
  EXPECT_EQ(index.explain(a, iota(1, 9), 8).reason, MissReason::Expired);
  EXPECT_EQ(index.explain(b, iota(1, 9), 8).reason, MissReason::Purged);
  EXPECT_STREQ(removal_reason_name(index.explain(a, iota(1, 9), 8).removal->reason), "expired");
  pool.check_invariants();
}

// Another namespace is reported only when the caller offers it (its own other salts); otherwise the miss is
// never_seen, exactly as if the other namespace held nothing, so no tenant learns another's content.
TEST(PrefixExplain, OtherNamespaceOnlyAmongTheSiblingsOffered) {
  BlockPool pool(16, kBlockSize);
  PrefixIndex index(pool);
  const Digest mine = ns_of("tenant-a:1"), mine_other_salt = ns_of("tenant-a:2"), theirs = ns_of("tenant-b");
  compute(index, theirs, iota(1, 12));
  const PrefixExplanation hidden = index.explain(mine, iota(1, 13), 12);
  EXPECT_EQ(hidden.reason, MissReason::NeverSeen);
  EXPECT_EQ(hidden.cached_token, -1);
  EXPECT_EQ(hidden.n_cached_tokens, 0);
  compute(index, mine_other_salt, iota(1, 12));
  const Digest siblings[] = {mine, mine_other_salt};
  const PrefixExplanation e = index.explain(mine, iota(1, 13), 12, siblings);
  EXPECT_EQ(e.reason, MissReason::OtherNamespace);
  EXPECT_EQ(e.sibling, 1);
  EXPECT_EQ(e.miss_block, 0);
}

TEST(RemovalLog, KeepsTheNewestWithinItsCapacity) {
  RemovalLog log(4);
  std::vector<Digest> hashes;
  for (int i = 0; i < 10; ++i) {
    hashes.push_back(sha256(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(&i), sizeof i)));
    log.record(hashes.back(), Removal{RemovalReason::Evicted, {}, i});
  }
  EXPECT_EQ(log.size(), 4u);
  EXPECT_FALSE(log.find(hashes[5]).has_value());
  ASSERT_TRUE(log.find(hashes[6]).has_value());
  EXPECT_EQ(log.find(hashes[9])->n_in_use, 9);
  log.forget(hashes[9]);
  EXPECT_FALSE(log.find(hashes[9]).has_value());
  // Forgetting and re-recording many times keeps the FIFO bounded too.
  for (int round = 0; round < 100; ++round) {
    log.record(hashes[0], Removal{RemovalReason::Expired, {}, round});
    log.forget(hashes[0]);
  }
  EXPECT_LE(log.memory_bytes(), 4096u);
  EXPECT_GT(log.memory_bytes(), 0u);
}

}  // namespace
}  // namespace preface::kv
