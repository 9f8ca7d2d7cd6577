// Idle expiry of cached blocks (BlockPool::set_now / expire_idle, behind --cache-ttl): exactly the cached blocks
// idle since the cutoff or earlier lose their hash, a hit (touch + release) refreshes a block, pinned and in-use
// blocks never expire, and the invariants hold after every step.
#include <gtest/gtest.h>

#include <chrono>
#include <random>
#include <vector>

#include "kv/block_pool.h"

namespace preface::kv {
namespace {

using Ids = std::vector<int32_t>;
using std::chrono::seconds;

constexpr int32_t kBlockSize = 2;
const BlockPool::TimePoint kT0{};  // the pool's clock starts at the epoch

Digest digest_of(int32_t seed) {
  const int32_t t[1] = {seed};
  return chain_hash(Digest{}, t);
}

const Digest kRoot = digest_of(-1);

// Allocates one block and registers it under digest_of(seed).
int32_t cached_block(BlockPool& pool, int32_t seed) {
  const int32_t id = pool.allocate(1).value().at(0);
  const Ids tokens = {seed, seed};
  EXPECT_TRUE(pool.register_block(id, BlockKey{digest_of(seed), kRoot, kRoot}, tokens));
  return id;
}

void release_one(BlockPool& pool, int32_t id) { pool.release(Ids{id}); }

TEST(BlockPoolTtl, ExactlyTheBlocksIdleSinceTheCutoffExpire) {
  BlockPool pool(6, kBlockSize);
  const int32_t a = cached_block(pool, 10), b = cached_block(pool, 11), c = cached_block(pool, 12);
  pool.set_now(kT0 + seconds(1));
  release_one(pool, a);
  pool.set_now(kT0 + seconds(2));
  release_one(pool, b);
  pool.set_now(kT0 + seconds(3));
  release_one(pool, c);
  pool.check_invariants();
  EXPECT_EQ(pool.free_queue(), (Ids{3, 4, 5, a, b, c}));

  EXPECT_EQ(pool.expire_idle(kT0), 0);  // nothing idle since t=0
  EXPECT_EQ(pool.n_cached(), 3);
  EXPECT_EQ(pool.expire_idle(kT0 + seconds(2)), 2);  // a (t=1) and b (t=2, cutoff inclusive)
  pool.check_invariants();
  EXPECT_FALSE(pool.is_registered(a));
  EXPECT_FALSE(pool.is_registered(b));
  EXPECT_TRUE(pool.is_registered(c));
  EXPECT_EQ(pool.find(digest_of(10)), -1);
  EXPECT_EQ(pool.find(digest_of(11)), -1);
  EXPECT_EQ(pool.find(digest_of(12)), c);
  EXPECT_EQ(pool.n_free(), 5);
  EXPECT_EQ(pool.n_cached(), 1);
  EXPECT_EQ(pool.n_expired(), 2);
  EXPECT_EQ(pool.n_evictions(), 0);  // expiry is not an allocation eviction
  // Expired blocks are plain free blocks at the head (reused before the remaining cached one).
  EXPECT_EQ(pool.free_queue(), (Ids{b, a, 3, 4, 5, c}));
  EXPECT_EQ(pool.expire_idle(kT0 + seconds(2)), 0);  // idempotent
  EXPECT_EQ(pool.expire_idle(kT0 + seconds(3)), 1);
  EXPECT_EQ(pool.n_cached(), 0);
  pool.check_invariants();
}

TEST(BlockPoolTtl, AHitRefreshesTheBlock) {
  BlockPool pool(4, kBlockSize);
  const int32_t a = cached_block(pool, 20), b = cached_block(pool, 21);
  release_one(pool, a);  // both idle since t=0
  release_one(pool, b);
  pool.set_now(kT0 + seconds(5));
  pool.touch(Ids{a});  // a prefix hit on a at t=5 ...
  pool.check_invariants();
  EXPECT_EQ(pool.expire_idle(kT0 + seconds(4)), 1);  // ... so only b expires while a is held
  EXPECT_TRUE(pool.is_registered(a));
  EXPECT_FALSE(pool.is_registered(b));
  pool.set_now(kT0 + seconds(6));
  release_one(pool, a);  // idle again since t=6
  pool.check_invariants();
  EXPECT_EQ(pool.expire_idle(kT0 + seconds(5)), 0);
  EXPECT_TRUE(pool.is_registered(a));
  EXPECT_EQ(pool.expire_idle(kT0 + seconds(6)), 1);
  EXPECT_FALSE(pool.is_registered(a));
  pool.check_invariants();
}

TEST(BlockPoolTtl, PinnedAndInUseBlocksNeverExpire) {
  BlockPool pool(4, kBlockSize);
  const int32_t pinned = cached_block(pool, 30), held = cached_block(pool, 31);
  pool.pin(pinned);
  release_one(pool, pinned);
  EXPECT_EQ(pool.expire_idle(kT0 + seconds(1000)), 0);
  EXPECT_TRUE(pool.is_registered(pinned));
  EXPECT_TRUE(pool.is_registered(held));
  EXPECT_EQ(pool.ref_count(held), 1);
  pool.check_invariants();
  // Unpinning makes the block idle from the unpin time on.
  pool.set_now(kT0 + seconds(50));
  pool.unpin(pinned);
  EXPECT_EQ(pool.expire_idle(kT0 + seconds(49)), 0);
  EXPECT_EQ(pool.expire_idle(kT0 + seconds(50)), 1);
  EXPECT_FALSE(pool.is_registered(pinned));
  EXPECT_TRUE(pool.is_registered(held));
  pool.check_invariants();
}

TEST(BlockPoolTtl, ClockNeverMovesBackwards) {
  BlockPool pool(2, kBlockSize);
  pool.set_now(kT0 + seconds(10));
  pool.set_now(kT0 + seconds(3));
  EXPECT_EQ(pool.now(), kT0 + seconds(10));
  const int32_t a = cached_block(pool, 40);
  release_one(pool, a);
  EXPECT_EQ(pool.expire_idle(kT0 + seconds(9)), 0);
  EXPECT_EQ(pool.expire_idle(kT0 + seconds(10)), 1);
}

// Random operations with a clock that advances; after each expiry exactly the idle registered blocks older than
// the cutoff are gone (checked against the stamps this test records itself).
TEST(BlockPoolTtl, RandomizedExpiryMatchesRecordedStamps) {
  constexpr int32_t kBlocks = 12;
  BlockPool pool(kBlocks, kBlockSize);
  std::mt19937 rng(7);
  std::vector<Ids> held;  // each entry: blocks one "sequence" holds
  std::vector<BlockPool::TimePoint> idle_since(kBlocks, kT0);
  int32_t next_seed = 100;
  auto t = kT0;
  for (int step = 0; step < 2000; ++step) {
    t += seconds(rng() % 3);
    pool.set_now(t);
    const int op = static_cast<int>(rng() % 4);
    if (op == 0) {
      if (auto ids = pool.allocate(1 + static_cast<int32_t>(rng() % 2))) {
        for (int32_t id : *ids) {
          const Ids tokens = {next_seed, next_seed};
          pool.register_block(id, BlockKey{digest_of(next_seed), kRoot, kRoot}, tokens);
          ++next_seed;
        }
        held.push_back(*ids);
      }
    } else if (op == 1 && !held.empty()) {
      const size_t i = rng() % held.size();
      pool.release(held[i]);
      for (int32_t id : held[i]) {
        if (pool.ref_count(id) == 0) idle_since[static_cast<size_t>(id)] = t;
      }
      held.erase(held.begin() + static_cast<ptrdiff_t>(i));
    } else if (op == 2) {  // a hit on a random cached block
      const int32_t id = static_cast<int32_t>(rng() % kBlocks);
      if (pool.is_registered(id) && pool.ref_count(id) == 0) {
        pool.touch(Ids{id});
        held.push_back(Ids{id});
      }
    } else {
      const auto cutoff = t - seconds(4);
      std::vector<bool> should_expire(kBlocks);
      int32_t n_expected = 0;
      for (int32_t id = 0; id < kBlocks; ++id) {
        should_expire[static_cast<size_t>(id)] = pool.is_registered(id) && pool.ref_count(id) == 0 &&
                                                 idle_since[static_cast<size_t>(id)] <= cutoff;
        n_expected += should_expire[static_cast<size_t>(id)] ? 1 : 0;
      }
      ASSERT_EQ(pool.expire_idle(cutoff), n_expected) << "step " << step;
      for (int32_t id = 0; id < kBlocks; ++id) {
        if (should_expire[static_cast<size_t>(id)]) {
          ASSERT_FALSE(pool.is_registered(id)) << "block " << id;
        }
      }
    }
    ASSERT_NO_THROW(pool.check_invariants()) << "step " << step;
  }
  EXPECT_GT(pool.n_expired(), 0);
}

}  // namespace
}  // namespace preface::kv
