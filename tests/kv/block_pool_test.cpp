// Scenario tests for BlockPool: exact block ids and free-queue order (head = next allocated) after every step,
// plus a randomized run against a simple reference model of the queue.
#include "kv/block_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <map>
#include <cstdio>
#include <random>
#include <stdexcept>

#include "util/error.h"

namespace preface::kv {
namespace {

using Ids = std::vector<int32_t>;

constexpr int32_t kBlockSize = 4;

Digest digest_of(int32_t seed) {
  const int32_t t[1] = {seed};
  return chain_hash(Digest{}, t);
}

const Digest kRootA = digest_of(-1);
const Digest kRootB = digest_of(-2);

// A key whose hash is digest_of(seed), chained under parent_seed (-1 = the namespace root itself).
BlockKey key_of(int32_t seed, int32_t parent_seed = -1, const Digest& root = kRootA) {
  return BlockKey{digest_of(seed), parent_seed < 0 ? root : digest_of(parent_seed), root};
}

Ids tokens_of(int32_t seed) { return Ids{seed, seed + 1, seed + 2, seed + 3}; }

void expect_counts(const BlockPool& pool, int32_t n_free, int32_t n_cached, int32_t n_in_use) {
  EXPECT_EQ(pool.n_free(), n_free);
  EXPECT_EQ(pool.n_cached(), n_cached);
  EXPECT_EQ(pool.n_in_use(), n_in_use);
  EXPECT_NO_THROW(pool.check_invariants());
}

TEST(BlockPool, AllocateTakesHeadInOrderAndNeverPartially) {
  BlockPool pool(6, kBlockSize);
  EXPECT_EQ(pool.free_queue(), (Ids{0, 1, 2, 3, 4, 5}));
  expect_counts(pool, 6, 0, 0);

  EXPECT_EQ(pool.allocate(2), (Ids{0, 1}));
  EXPECT_EQ(pool.free_queue(), (Ids{2, 3, 4, 5}));
  EXPECT_EQ(pool.ref_count(0), 1);
  expect_counts(pool, 4, 0, 2);

  EXPECT_EQ(pool.allocate(5), std::nullopt);  // 4 left: nothing is taken
  EXPECT_EQ(pool.free_queue(), (Ids{2, 3, 4, 5}));
  EXPECT_EQ(pool.allocate(0), Ids{});
  EXPECT_THROW(pool.allocate(-1), Error);
  expect_counts(pool, 4, 0, 2);

  EXPECT_EQ(pool.allocate(4), (Ids{2, 3, 4, 5}));
  EXPECT_EQ(pool.free_queue(), Ids{});
  EXPECT_EQ(pool.allocate(1), std::nullopt);
  expect_counts(pool, 0, 0, 6);
  EXPECT_THROW(BlockPool(0, 4), Error);
  EXPECT_THROW(BlockPool(4, 0), Error);
}

TEST(BlockPool, ReleaseIsTailFirstAndEvictionIsLru) {
  BlockPool pool(6, kBlockSize);
  const Ids seq = *pool.allocate(4);  // blocks 0..2 full and registered, block 3 partial
  ASSERT_EQ(seq, (Ids{0, 1, 2, 3}));
  EXPECT_TRUE(pool.register_block(0, key_of(10), tokens_of(10)));
  EXPECT_TRUE(pool.register_block(1, key_of(11, 10), tokens_of(11)));
  EXPECT_TRUE(pool.register_block(2, key_of(12, 11), tokens_of(12)));
  EXPECT_EQ(pool.find(digest_of(11)), 1);
  expect_counts(pool, 2, 0, 4);

  pool.release(seq);
  // [unregistered 3 at the head] [never used 4, 5] [sequence tail-first: 2, 1, 0]
  EXPECT_EQ(pool.free_queue(), (Ids{3, 4, 5, 2, 1, 0}));
  expect_counts(pool, 3, 3, 0);

  EXPECT_EQ(pool.allocate(3), (Ids{3, 4, 5}));  // free blocks go first, no eviction
  EXPECT_EQ(pool.n_evictions(), 0);
  EXPECT_EQ(pool.allocate(1), (Ids{2}));  // the deepest block of the finished sequence is evicted first
  EXPECT_EQ(pool.n_evictions(), 1);
  EXPECT_FALSE(pool.is_registered(2));
  EXPECT_EQ(pool.find(digest_of(12)), -1);
  EXPECT_EQ(pool.children_of(digest_of(11)), Ids{});
  EXPECT_EQ(pool.find(digest_of(10)), 0);  // its prefix survives
  EXPECT_EQ(pool.free_queue(), (Ids{1, 0}));
  expect_counts(pool, 0, 2, 4);
}

TEST(BlockPool, TouchPullsCachedBlocksOutOfTheQueue) {
  BlockPool pool(4, kBlockSize);
  const Ids seq = *pool.allocate(2);
  pool.register_block(0, key_of(10), tokens_of(10));
  pool.register_block(1, key_of(11, 10), tokens_of(11));
  pool.release(seq);
  EXPECT_EQ(pool.free_queue(), (Ids{2, 3, 1, 0}));

  const Ids hit = {0};
  pool.touch(hit);  // a hit on a cached block in the middle of the queue
  EXPECT_EQ(pool.free_queue(), (Ids{2, 3, 1}));
  EXPECT_EQ(pool.ref_count(0), 1);
  expect_counts(pool, 2, 1, 1);
  pool.touch(hit);  // a second sharer
  EXPECT_EQ(pool.ref_count(0), 2);
  pool.release(hit);
  EXPECT_EQ(pool.free_queue(), (Ids{2, 3, 1}));
  expect_counts(pool, 2, 1, 1);
  pool.release(hit);
  EXPECT_EQ(pool.free_queue(), (Ids{2, 3, 1, 0}));  // most recently used: at the tail
  expect_counts(pool, 2, 2, 0);
  EXPECT_THROW(pool.touch(Ids{4}), Error);
}

TEST(BlockPool, DuplicateHashKeepsTheFirstBlockRegistered) {
  BlockPool pool(4, kBlockSize);
  const Ids a = *pool.allocate(1);
  const Ids b = *pool.allocate(1);
  EXPECT_TRUE(pool.register_block(a[0], key_of(10), tokens_of(10)));
  EXPECT_FALSE(pool.register_block(b[0], key_of(10), tokens_of(10)));
  EXPECT_EQ(pool.find(digest_of(10)), 0);
  EXPECT_FALSE(pool.is_registered(1));
  EXPECT_TRUE(pool.register_block(a[0], key_of(10), tokens_of(10)));  // same key again: no-op
  EXPECT_THROW(pool.register_block(a[0], key_of(99), tokens_of(99)), Error);
  expect_counts(pool, 2, 0, 2);
  pool.release(b);  // the duplicate holds nothing reusable: head
  pool.release(a);
  EXPECT_EQ(pool.free_queue(), (Ids{1, 2, 3, 0}));
  expect_counts(pool, 3, 1, 0);
}

TEST(BlockPool, ContractViolationsThrowAndChangeNothing) {
  BlockPool pool(4, kBlockSize);
  const Ids seq = *pool.allocate(2);
  EXPECT_THROW(pool.release(Ids{0, 2}), Error);  // 2 is free
  EXPECT_THROW(pool.release(Ids{0, 0}), Error);
  EXPECT_THROW(pool.release(Ids{0, 7}), Error);
  EXPECT_THROW(pool.release(Ids{-1}), Error);
  EXPECT_EQ(pool.ref_count(0), 1);
  EXPECT_THROW(pool.register_block(2, key_of(10), tokens_of(10)), Error);  // not in use
  EXPECT_THROW(pool.register_block(0, key_of(10), Ids{1, 2, 3}), Error);   // short block
  EXPECT_THROW(pool.pin(0), Error);                                         // not registered
  EXPECT_THROW(pool.unpin(0), Error);
  EXPECT_THROW(pool.ref_count(4), Error);
  EXPECT_EQ(pool.free_queue(), (Ids{2, 3}));
  expect_counts(pool, 2, 0, 2);
}

TEST(BlockPool, PinnedBlocksAreNotEvicted) {
  BlockPool pool(4, kBlockSize);
  const Ids seq = *pool.allocate(2);
  pool.register_block(0, key_of(10), tokens_of(10));
  pool.register_block(1, key_of(11, 10), tokens_of(11));
  pool.pin(0);  // pinned while in use
  pool.release(seq);
  EXPECT_EQ(pool.free_queue(), (Ids{2, 3, 1}));  // 0 stays out of the queue
  EXPECT_EQ(pool.n_allocatable(), 3);
  expect_counts(pool, 2, 2, 0);

  EXPECT_EQ(pool.allocate(4), std::nullopt);
  EXPECT_EQ(pool.allocate(3), (Ids{2, 3, 1}));  // evicts 1, skips pinned 0
  EXPECT_TRUE(pool.is_registered(0));
  EXPECT_EQ(pool.find(digest_of(10)), 0);
  EXPECT_EQ(pool.n_evictions(), 1);
  expect_counts(pool, 0, 1, 3);

  pool.touch(Ids{0});  // a hit on a pinned cached block
  EXPECT_EQ(pool.ref_count(0), 1);
  pool.release(Ids{0});
  EXPECT_EQ(pool.free_queue(), Ids{});
  pool.pin(0);
  pool.unpin(0);
  EXPECT_EQ(pool.free_queue(), Ids{});  // still pinned once
  pool.unpin(0);
  EXPECT_EQ(pool.free_queue(), (Ids{0}));
  EXPECT_EQ(pool.allocate(1), (Ids{0}));
  EXPECT_EQ(pool.n_evictions(), 2);
  expect_counts(pool, 0, 0, 4);
}

TEST(BlockPool, PurgeNamespaceUnregistersOnlyThatRoot) {
  BlockPool pool(6, kBlockSize);
  const Ids a = *pool.allocate(2);  // namespace A: 0, 1
  const Ids b = *pool.allocate(2);  // namespace B: 2, 3
  pool.register_block(0, key_of(10), tokens_of(10));
  pool.register_block(1, key_of(11, 10), tokens_of(11));
  pool.register_block(2, key_of(20, -1, kRootB), tokens_of(10));
  pool.register_block(3, key_of(21, 20, kRootB), tokens_of(11));
  pool.pin(0);
  pool.release(a);
  pool.release(Ids{3});
  EXPECT_EQ(pool.free_queue(), (Ids{4, 5, 1, 3}));
  expect_counts(pool, 2, 3, 1);

  EXPECT_EQ(pool.purge_namespace(kRootA), 2);
  EXPECT_EQ(pool.find(digest_of(10)), -1);
  EXPECT_EQ(pool.find(digest_of(11)), -1);
  EXPECT_EQ(pool.pin_count(0), 0);
  EXPECT_EQ(pool.free_queue(), (Ids{1, 0, 4, 5, 3}));  // purged blocks are reused first
  expect_counts(pool, 4, 1, 1);

  EXPECT_EQ(pool.purge_namespace(kRootB), 2);  // 2 is in use: unregistered, still held
  EXPECT_EQ(pool.ref_count(2), 1);
  EXPECT_FALSE(pool.is_registered(2));
  EXPECT_EQ(pool.free_queue(), (Ids{3, 1, 0, 4, 5}));
  expect_counts(pool, 5, 0, 1);
  EXPECT_EQ(pool.purge_namespace(kRootB), 0);
}

// Randomized operations on a tiny pool, mirrored by a reference model of the queue order, ref counts, pins and
// registrations; invariants and the model are checked after every step.
TEST(BlockPool, RandomizedAgainstReferenceModel) {
  constexpr int32_t kBlocks = 8;
  BlockPool pool(kBlocks, kBlockSize);
  std::mt19937 rng(1234);
  std::deque<int32_t> queue(kBlocks);  // head first
  for (int32_t i = 0; i < kBlocks; ++i) queue[i] = i;
  std::vector<int32_t> refs(kBlocks, 0), pins(kBlocks, 0);
  std::map<int32_t, int32_t> seed_of;   // registered block -> hash seed
  std::map<int32_t, int32_t> block_of;  // hash seed -> registered block
  std::vector<Ids> holders;             // sequences, each holding a list of distinct blocks
  int64_t n_evictions = 0, n_touches = 0, n_pin_ops = 0, n_purged = 0;
  auto pick = [&](int32_t n) { return static_cast<int32_t>(rng() % static_cast<uint32_t>(n)); };
  auto unregister = [&](int32_t id) {
    block_of.erase(seed_of[id]);
    seed_of.erase(id);
    pins[id] = 0;
  };

  for (int step = 0; step < 20000; ++step) {
    const int op = pick(9);
    if (op <= 1) {  // allocate a new sequence
      const int32_t n = pick(4);
      const auto got = pool.allocate(n);
      if (n > static_cast<int32_t>(queue.size())) {
        ASSERT_EQ(got, std::nullopt);
      } else {
        ASSERT_TRUE(got.has_value());
        const Ids want(queue.begin(), queue.begin() + n);
        ASSERT_EQ(*got, want);
        for (const int32_t id : want) {
          queue.pop_front();
          if (seed_of.contains(id)) {
            unregister(id);
            ++n_evictions;
          }
          refs[id] = 1;
        }
        holders.push_back(want);
      }
    } else if (op <= 3 && !holders.empty()) {  // finish a sequence
      const size_t h = static_cast<size_t>(pick(static_cast<int32_t>(holders.size())));
      const Ids seq = holders[h];
      holders.erase(holders.begin() + static_cast<ptrdiff_t>(h));
      pool.release(seq);
      for (auto it = seq.rbegin(); it != seq.rend(); ++it) {
        if (--refs[*it] > 0 || pins[*it] > 0) continue;
        if (seed_of.contains(*it)) queue.push_back(*it);
        else queue.push_front(*it);
      }
    } else if (op <= 5 && !holders.empty()) {  // register one block of a sequence under a small key space
      const Ids& seq = holders[static_cast<size_t>(pick(static_cast<int32_t>(holders.size())))];
      const int32_t id = seq.empty() ? -1 : seq[static_cast<size_t>(pick(static_cast<int32_t>(seq.size())))];
      if (id >= 0 && !seed_of.contains(id)) {
        const int32_t seed = pick(12);
        const Digest& root = seed % 2 ? kRootA : kRootB;
        const bool registered = pool.register_block(id, key_of(seed, -1, root), tokens_of(seed));
        ASSERT_EQ(registered, !block_of.contains(seed));
        if (registered) {
          seed_of[id] = seed;
          block_of[seed] = id;
        }
      }
    } else if (op == 6 && !block_of.empty()) {  // a hit on a registered block: a new one-block holder
      auto it = block_of.begin();
      std::advance(it, pick(static_cast<int32_t>(block_of.size())));
      const int32_t id = it->second;
      pool.touch(Ids{id});
      if (refs[id]++ == 0 && pins[id] == 0) queue.erase(std::find(queue.begin(), queue.end(), id));
      holders.push_back(Ids{id});
      ++n_touches;
    } else if (op == 7 && !seed_of.empty()) {  // pin or unpin a registered block
      auto it = seed_of.begin();
      std::advance(it, pick(static_cast<int32_t>(seed_of.size())));
      const int32_t id = it->first;
      ++n_pin_ops;
      if (pins[id] > 0 && pick(2) == 0) {
        pool.unpin(id);
        if (--pins[id] == 0 && refs[id] == 0) queue.push_back(id);
      } else {
        pool.pin(id);
        if (pins[id]++ == 0 && refs[id] == 0) queue.erase(std::find(queue.begin(), queue.end(), id));
      }
    } else if (op == 8 && pick(20) == 0) {  // purge a namespace
      const bool odd = pick(2) == 1;
      int32_t n_expected = 0;
      for (int32_t id = 0; id < kBlocks; ++id) {
        if (!seed_of.contains(id) || (seed_of[id] % 2 == 1) != odd) continue;
        ++n_expected;
        const bool was_idle = refs[id] == 0;
        const bool was_queued = was_idle && pins[id] == 0;
        unregister(id);
        if (!was_idle) continue;
        if (was_queued) queue.erase(std::find(queue.begin(), queue.end(), id));
        queue.push_front(id);
      }
      ASSERT_EQ(pool.purge_namespace(odd ? kRootA : kRootB), n_expected);
      n_purged += n_expected;
    }
    ASSERT_NO_THROW(pool.check_invariants()) << "step " << step;
    ASSERT_EQ(pool.free_queue(), Ids(queue.begin(), queue.end())) << "step " << step;
    ASSERT_EQ(pool.n_evictions(), n_evictions);
    for (int32_t id = 0; id < kBlocks; ++id) {
      ASSERT_EQ(pool.ref_count(id), refs[id]) << "block " << id << " step " << step;
      ASSERT_EQ(pool.pin_count(id), pins[id]);
      ASSERT_EQ(pool.is_registered(id), seed_of.contains(id));
    }
  }
  // The run exercised every path.
  EXPECT_GT(n_evictions, 100);
  EXPECT_GT(n_touches, 100);
  EXPECT_GT(n_pin_ops, 100);
  EXPECT_GT(n_purged, 10);
  std::printf("evictions %lld touches %lld pin ops %lld purged %lld\n", static_cast<long long>(n_evictions),
              static_cast<long long>(n_touches), static_cast<long long>(n_pin_ops), static_cast<long long>(n_purged));
}

}  // namespace
}  // namespace preface::kv
