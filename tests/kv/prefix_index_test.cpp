// Prefix-index scenarios with exact block ids and free-queue order after every step: hits, partial (copy-on-write)
// matches, the max_tokens cap, eviction, namespace isolation, forced collisions, duplicates and pins.
// WorkedExample is the story told in docs/design/kv-cache.md.
#include "kv/prefix_index.h"

#include <gtest/gtest.h>

#include "util/error.h"

namespace preface::kv {
namespace {

using Ids = std::vector<int32_t>;

constexpr int32_t kBlockSize = 4;
constexpr char kModel[] = "demo-model";
constexpr char kRope[] = "rope:neox,base=10000,dim=64";

Digest demo_ns(std::string_view salt = "") { return namespace_digest(kModel, "f16", kBlockSize, kRope, salt); }

Ids iota(int32_t first, int32_t n) {
  Ids v(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = first + i;
  return v;
}

std::span<const int32_t> block_of(const Ids& tokens, int32_t i) {
  return std::span<const int32_t>(tokens).subspan(static_cast<size_t>(i) * kBlockSize, kBlockSize);
}

TEST(PrefixIndex, WorkedExample) {
  BlockPool pool(8, kBlockSize);
  PrefixIndex index(pool);
  const Digest ns = demo_ns();

  // Time 1: A = [1..10] misses; prefill allocates 3 blocks and registers the 2 full ones.
  const Ids a_prompt = iota(1, 10);
  PrefixMatch a = index.match_and_acquire(ns, a_prompt, 9);
  EXPECT_EQ(a.block_ids, Ids{});
  EXPECT_EQ(a.n_cached_tokens, 0);
  EXPECT_EQ(a.last_hash, ns);
  EXPECT_EQ(a.partial_src_block, -1);
  const Ids a_blocks = *pool.allocate(3);
  EXPECT_EQ(a_blocks, (Ids{0, 1, 2}));
  Digest h = index.register_full_block(ns, 0, ns, block_of(a_prompt, 0));
  EXPECT_EQ(to_hex(h, 12), "7b739a00cebe");
  h = index.register_full_block(ns, 1, h, block_of(a_prompt, 1));
  EXPECT_EQ(to_hex(h, 12), "0a1821b79ad3");
  EXPECT_EQ(pool.free_queue(), (Ids{3, 4, 5, 6, 7}));
  pool.check_invariants();

  // Time 2: A decodes 11, 12; block 2 fills and is registered. A finishes: released tail-first.
  const Ids a_tokens = iota(1, 12);
  h = index.register_full_block(ns, 2, h, block_of(a_tokens, 2));
  EXPECT_EQ(to_hex(h, 12), "a1ad73d4716a");
  pool.release(a_blocks);
  EXPECT_EQ(pool.free_queue(), (Ids{3, 4, 5, 6, 7, 2, 1, 0}));
  EXPECT_EQ(pool.n_cached(), 3);
  pool.check_invariants();

  // Time 3: B = [1..10, 20, 21, 22] hits blocks 0, 1 and partially matches block 2 ([9, 10] of [9, 10, 11, 12]).
  const Ids b_prompt = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 20, 21, 22};
  PrefixMatch b = index.match_and_acquire(ns, b_prompt, 12);
  EXPECT_EQ(b.block_ids, (Ids{0, 1}));
  EXPECT_EQ(b.n_cached_tokens, 8);
  EXPECT_EQ(to_hex(b.last_hash, 12), "0a1821b79ad3");
  EXPECT_EQ(b.partial_src_block, 2);
  EXPECT_EQ(b.n_partial_tokens, 2);
  EXPECT_EQ(pool.free_queue(), (Ids{3, 4, 5, 6, 7}));
  const Ids b_new = *pool.allocate(2);  // 13 tokens = 4 blocks, 2 of them hits
  EXPECT_EQ(b_new, (Ids{3, 4}));
  pool.release(Ids{2});  // rows [9, 10] copied from block 2 into block 3
  EXPECT_EQ(pool.free_queue(), (Ids{5, 6, 7, 2}));
  h = index.register_full_block(ns, 3, b.last_hash, block_of(b_prompt, 2));
  EXPECT_EQ(to_hex(h, 12), "871a95402a10");
  EXPECT_EQ(pool.children_of(b.last_hash), (Ids{2, 3}));
  pool.check_invariants();

  // Time 4: C sends A's prompt under tenant salt "tenant-b": another namespace, no hit, no partial.
  PrefixMatch c = index.match_and_acquire(demo_ns("tenant-b"), a_prompt, 9);
  EXPECT_EQ(c.block_ids, Ids{});
  EXPECT_EQ(c.partial_src_block, -1);

  // Time 5: D needs 4 fresh blocks: 5, 6, 7 are free, then block 2 (A's tail) is evicted.
  const Ids d_blocks = *pool.allocate(4);
  EXPECT_EQ(d_blocks, (Ids{5, 6, 7, 2}));
  EXPECT_EQ(pool.n_evictions(), 1);
  EXPECT_EQ(pool.free_queue(), Ids{});
  pool.check_invariants();

  // Time 6: A's full prompt again hits only 0, 1 (held by B too): block 2's hash is gone. The child of h_2 left,
  // B's block 3 = [9, 10, 20, 21], is the partial source for [9, 10, 11].
  PrefixMatch a2 = index.match_and_acquire(ns, a_tokens, 11);
  EXPECT_EQ(a2.block_ids, (Ids{0, 1}));
  EXPECT_EQ(a2.partial_src_block, 3);
  EXPECT_EQ(a2.n_partial_tokens, 2);
  EXPECT_EQ(pool.ref_count(0), 2);
  EXPECT_EQ(pool.ref_count(3), 2);
  pool.check_invariants();

  const PrefixStats& s = index.stats();
  EXPECT_EQ(s.n_queries, 4);
  EXPECT_EQ(s.n_query_tokens, 9 + 12 + 9 + 11);
  EXPECT_EQ(s.n_hit_tokens, 16);
  EXPECT_EQ(s.n_partial_hit_tokens, 4);
  EXPECT_EQ(s.n_query_blocks, 2 + 3 + 2 + 2);
  EXPECT_EQ(s.n_hit_blocks, 4);
  EXPECT_EQ(s.n_collisions, 0);
}

// Registers every full block of tokens held in blocks (one sequence), returning the chain hashes.
std::vector<Digest> register_all(PrefixIndex& index, const Digest& ns, const Ids& blocks, const Ids& tokens) {
  std::vector<Digest> hashes;
  Digest parent = ns;
  for (int32_t i = 0; i < static_cast<int32_t>(tokens.size()) / kBlockSize; ++i) {
    parent = index.register_full_block(ns, blocks[static_cast<size_t>(i)], parent, block_of(tokens, i));
    hashes.push_back(parent);
  }
  return hashes;
}

TEST(PrefixIndex, MaxTokensCapsFullAndPartialMatches) {
  BlockPool pool(6, kBlockSize);
  PrefixIndex index(pool);
  const Digest ns = demo_ns();
  const Ids prompt = iota(1, 8);
  const Ids blocks = *pool.allocate(2);
  register_all(index, ns, blocks, prompt);
  pool.release(blocks);
  EXPECT_EQ(pool.free_queue(), (Ids{2, 3, 4, 5, 1, 0}));

  // The same 8-token prompt: the last token must be computed, so block 1 is only a 3-token partial match.
  PrefixMatch m = index.match(ns, prompt, 7);
  EXPECT_EQ(m.block_ids, (Ids{0}));
  EXPECT_EQ(m.partial_src_block, 1);
  EXPECT_EQ(m.n_partial_tokens, 3);
  EXPECT_EQ(pool.free_queue(), (Ids{2, 3, 4, 5, 1, 0}));  // match() changes nothing
  EXPECT_EQ(index.stats().n_queries, 0);

  m = index.match(ns, prompt, 8);  // without a cap both blocks hit
  EXPECT_EQ(m.block_ids, (Ids{0, 1}));
  EXPECT_EQ(m.partial_src_block, -1);
  m = index.match(ns, prompt, 2);  // within the first block
  EXPECT_EQ(m.block_ids, Ids{});
  EXPECT_EQ(m.partial_src_block, 0);
  EXPECT_EQ(m.n_partial_tokens, 2);
  m = index.match(ns, prompt, 0);
  EXPECT_EQ(m.block_ids, Ids{});
  EXPECT_EQ(m.partial_src_block, -1);
  m = index.match(ns, Ids{1, 2, 9}, 3);  // diverges inside the first block
  EXPECT_EQ(m.partial_src_block, 0);
  EXPECT_EQ(m.n_partial_tokens, 2);
  m = index.match(ns, Ids{7, 2, 3, 4}, 4);  // first token differs: no partial either
  EXPECT_EQ(m.partial_src_block, -1);
  EXPECT_EQ(m.n_partial_tokens, 0);
  EXPECT_THROW(index.match(ns, prompt, -1), Error);

  m = index.match_and_acquire(ns, prompt, 7);  // the partial source is ref'd until its rows are copied
  EXPECT_EQ(pool.free_queue(), (Ids{2, 3, 4, 5}));
  EXPECT_EQ(pool.ref_count(1), 1);
  pool.release(Ids{m.partial_src_block});
  pool.release(m.block_ids);
  EXPECT_EQ(pool.free_queue(), (Ids{2, 3, 4, 5, 1, 0}));
  pool.check_invariants();
}

TEST(PrefixIndex, PartialPicksTheLongestSharedPrefix) {
  BlockPool pool(8, kBlockSize);
  PrefixIndex index(pool);
  const Digest ns = demo_ns();
  // Four cached continuations of the block [1, 2, 3, 4] (blocks 1..4 are its children).
  const Ids held = *pool.allocate(5);
  const Digest h1 = index.register_full_block(ns, held[0], ns, Ids{1, 2, 3, 4});
  index.register_full_block(ns, held[1], h1, Ids{5, 6, 0, 0});
  index.register_full_block(ns, held[2], h1, Ids{5, 6, 7, 0});
  index.register_full_block(ns, held[3], h1, Ids{5, 6, 7, 1});
  index.register_full_block(ns, held[4], h1, Ids{9, 9, 9, 9});
  pool.release(held);
  EXPECT_EQ(pool.free_queue(), (Ids{5, 6, 7, 4, 3, 2, 1, 0}));

  PrefixMatch m = index.match(ns, Ids{1, 2, 3, 4, 5, 6, 7, 8, 0}, 8);
  EXPECT_EQ(m.block_ids, (Ids{0}));
  EXPECT_EQ(m.partial_src_block, 2);  // 3 shared tokens in blocks 2 and 3: the lower id
  EXPECT_EQ(m.n_partial_tokens, 3);
  m = index.match(ns, Ids{1, 2, 3, 4, 5, 6, 9}, 6);
  EXPECT_EQ(m.partial_src_block, 1);  // 2 shared tokens in blocks 1, 2, 3
  EXPECT_EQ(m.n_partial_tokens, 2);
  m = index.match(ns, Ids{1, 2, 3, 4, 9, 9, 9, 9, 9}, 8);
  EXPECT_EQ(m.block_ids, (Ids{0, 4}));  // a full hit, not a partial one
  EXPECT_EQ(m.partial_src_block, -1);

  // Even a child holding the whole next block (possible only with a forged hash) yields at most block_size - 1
  // tokens: a full block is either a hit or not reusable.
  const Ids forged = *pool.allocate(1);
  ASSERT_TRUE(pool.register_block(forged[0], BlockKey{sha256({}), h1, ns}, Ids{7, 7, 7, 7}));
  m = index.match(ns, Ids{1, 2, 3, 4, 7, 7, 7, 7, 7}, 8);
  EXPECT_EQ(m.block_ids, (Ids{0}));
  EXPECT_EQ(m.partial_src_block, forged[0]);
  EXPECT_EQ(m.n_partial_tokens, 3);
  pool.check_invariants();
}

TEST(PrefixIndex, EvictedHashNoLongerHits) {
  BlockPool pool(4, kBlockSize);
  PrefixIndex index(pool);
  const Digest ns = demo_ns();
  const Ids a = iota(1, 8), b = iota(101, 8);
  const Ids a_blocks = *pool.allocate(2);
  register_all(index, ns, a_blocks, a);
  pool.release(a_blocks);
  const Ids b_blocks = *pool.allocate(2);
  EXPECT_EQ(b_blocks, (Ids{2, 3}));
  register_all(index, ns, b_blocks, b);
  pool.release(b_blocks);
  EXPECT_EQ(pool.free_queue(), (Ids{1, 0, 3, 2}));  // A (older) first, each tail-first
  pool.check_invariants();

  EXPECT_EQ(index.match(ns, a, 8).block_ids, (Ids{0, 1}));
  const Ids c_blocks = *pool.allocate(1);  // evicts A's tail, block 1
  EXPECT_EQ(c_blocks, (Ids{1}));
  EXPECT_EQ(index.match(ns, a, 8).block_ids, (Ids{0}));
  EXPECT_EQ(index.match(ns, a, 8).partial_src_block, -1);
  EXPECT_EQ(pool.allocate(1), (Ids{0}));  // then A's head
  EXPECT_EQ(index.match(ns, a, 8).block_ids, Ids{});
  EXPECT_EQ(index.match(ns, b, 8).block_ids, (Ids{2, 3}));  // B untouched
  EXPECT_EQ(pool.free_queue(), (Ids{3, 2}));
  EXPECT_EQ(pool.n_evictions(), 2);
  pool.check_invariants();
}

TEST(PrefixIndex, NamespacesAreIsolated) {
  BlockPool pool(8, kBlockSize);
  PrefixIndex index(pool);
  const Digest ns = demo_ns();
  const Ids prompt = iota(1, 8);
  const Ids blocks = *pool.allocate(2);
  register_all(index, ns, blocks, prompt);
  pool.release(blocks);
  EXPECT_EQ(index.match(ns, prompt, 8).block_ids, (Ids{0, 1}));

  const Digest others[] = {
      demo_ns("tenant-b"),                                     // another salt
      namespace_digest("other-model", "f16", kBlockSize, kRope, ""),  // another model fingerprint
      namespace_digest(kModel, "bf16", kBlockSize, kRope, ""),        // another KV dtype
      namespace_digest(kModel, "f16", kBlockSize, "rope:norm,base=10000,dim=64", ""),
  };
  for (const Digest& other : others) {
    const PrefixMatch m = index.match_and_acquire(other, prompt, 8);
    EXPECT_EQ(m.block_ids, Ids{});
    EXPECT_EQ(m.partial_src_block, -1);
    EXPECT_EQ(m.last_hash, other);
  }
  EXPECT_EQ(pool.free_queue(), (Ids{2, 3, 4, 5, 6, 7, 1, 0}));

  // The same tokens under another namespace are cached separately; purging one namespace leaves the other.
  const Ids b_blocks = *pool.allocate(2);
  EXPECT_EQ(b_blocks, (Ids{2, 3}));
  register_all(index, others[0], b_blocks, prompt);
  pool.release(b_blocks);
  EXPECT_EQ(index.match(others[0], prompt, 8).block_ids, (Ids{2, 3}));
  EXPECT_EQ(pool.purge_namespace(ns), 2);
  EXPECT_EQ(index.match(ns, prompt, 8).block_ids, Ids{});
  EXPECT_EQ(index.match(others[0], prompt, 8).block_ids, (Ids{2, 3}));
  EXPECT_EQ(pool.free_queue(), (Ids{1, 0, 4, 5, 6, 7, 3, 2}));
  pool.check_invariants();
}

TEST(PrefixIndex, ForcedCollisionIsCaughtByTokenComparison) {
  BlockPool pool(4, kBlockSize);
  PrefixIndex index(pool);
  const Digest ns = demo_ns();
  const Ids query = iota(1, 8);
  const Digest h1 = chain_hash(ns, block_of(query, 0));
  // Block 0 claims the query's first hash but holds other tokens (a collision forced through the pool's
  // trusted-hash registration).
  const Ids held = *pool.allocate(1);
  ASSERT_TRUE(pool.register_block(held[0], BlockKey{h1, ns, ns}, Ids{1, 2, 3, 5}));
  pool.release(held);
  EXPECT_EQ(pool.find(h1), 0);

  PrefixMatch m = index.match_and_acquire(ns, query, 8);
  EXPECT_EQ(m.block_ids, Ids{});
  EXPECT_EQ(m.n_cached_tokens, 0);
  EXPECT_EQ(index.stats().n_collisions, 1);
  // It is still a genuine child of ns, so its first 3 tokens are a valid partial match.
  EXPECT_EQ(m.partial_src_block, 0);
  EXPECT_EQ(m.n_partial_tokens, 3);
  pool.release(Ids{0});

  // Same tokens, but stored under another parent: also rejected.
  const Ids held2 = *pool.allocate(1);
  EXPECT_EQ(held2, (Ids{1}));
  const Digest h2 = chain_hash(ns, Ids{9, 9, 9, 9});
  ASSERT_TRUE(pool.register_block(held2[0], BlockKey{h2, h1, ns}, Ids{9, 9, 9, 9}));
  pool.release(held2);
  EXPECT_EQ(index.match_and_acquire(ns, Ids{9, 9, 9, 9, 1}, 4).block_ids, Ids{});
  EXPECT_EQ(index.stats().n_collisions, 2);
  EXPECT_EQ(pool.ref_count(1), 0);
  pool.check_invariants();
}

TEST(PrefixIndex, DuplicateBlockStaysUnregistered) {
  BlockPool pool(4, kBlockSize);
  PrefixIndex index(pool);
  const Digest ns = demo_ns();
  const Ids prompt = iota(1, 4);
  const Ids a = *pool.allocate(1);
  const Ids b = *pool.allocate(1);  // computed the same block concurrently
  const Digest ha = index.register_full_block(ns, a[0], ns, prompt);
  const Digest hb = index.register_full_block(ns, b[0], ns, prompt);
  EXPECT_EQ(ha, hb);  // the next block chains from the same hash either way
  EXPECT_TRUE(pool.is_registered(0));
  EXPECT_FALSE(pool.is_registered(1));
  EXPECT_THROW(index.register_full_block(ns, a[0], ns, Ids{1, 2}), Error);
  pool.release(a);
  pool.release(b);
  EXPECT_EQ(pool.free_queue(), (Ids{1, 2, 3, 0}));
  EXPECT_EQ(index.match(ns, prompt, 4).block_ids, (Ids{0}));
  pool.check_invariants();
}

TEST(PrefixIndex, PinnedPrefixSurvivesPressure) {
  BlockPool pool(4, kBlockSize);
  PrefixIndex index(pool);
  const Digest ns = demo_ns();
  const Ids system_prompt = iota(1, 8);
  const Ids blocks = *pool.allocate(2);
  register_all(index, ns, blocks, system_prompt);
  for (const int32_t id : blocks) pool.pin(id);  // cache_control on the system prompt
  pool.release(blocks);
  EXPECT_EQ(pool.free_queue(), (Ids{2, 3}));
  EXPECT_EQ(pool.n_cached(), 2);

  const Ids other = *pool.allocate(2);
  EXPECT_EQ(pool.allocate(1), std::nullopt);  // the pinned blocks are not allocatable
  pool.release(other);
  EXPECT_EQ(index.match(ns, system_prompt, 8).block_ids, (Ids{0, 1}));
  pool.unpin(blocks[1]);  // the pin expired: unpinned tail-first, like release
  pool.unpin(blocks[0]);
  EXPECT_EQ(pool.free_queue(), (Ids{2, 3, 1, 0}));
  EXPECT_EQ(pool.allocate(4), (Ids{2, 3, 1, 0}));
  EXPECT_EQ(index.match(ns, system_prompt, 8).block_ids, Ids{});
  pool.check_invariants();
}

}  // namespace
}  // namespace preface::kv
