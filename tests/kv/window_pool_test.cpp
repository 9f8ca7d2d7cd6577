// kv::WindowPool: which blocks a window needs, giving back what no query reads, and the longest hit whose window
// is still cached.
#include "kv/window_pool.h"

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "util/error.h"

namespace preface::kv {
namespace {

constexpr int32_t kBlock = 16;

// Chain hashes of n blocks of tokens 0, 1, 2, ...
struct Chain {
  Digest ns = namespace_digest("model", "f16", kBlock, "rope", "");
  std::vector<int32_t> tokens;
  std::vector<Digest> hashes;
  explicit Chain(int32_t n_blocks, int32_t first_token = 0) : tokens(static_cast<size_t>(n_blocks) * kBlock) {
    std::iota(tokens.begin(), tokens.end(), first_token);
    hashes = block_hashes(ns, tokens, kBlock);
  }
  std::span<const int32_t> block(int32_t b) const {
    return std::span<const int32_t>(tokens).subspan(static_cast<size_t>(b) * kBlock, kBlock);
  }
  BlockKey key(int32_t b) const { return {hashes[static_cast<size_t>(b)], b == 0 ? ns : hashes[b - 1], ns}; }
};

TEST(WindowPool, FirstBlockFollowsTheAttentionChunkOfTheOldestVisiblePosition) {
  const WindowPool pool(8, kBlock, 16);
  // The next query at n sees n - 15 .. n; attention loads from that position's 32-position chunk.
  EXPECT_EQ(pool.first_block(0), 0);
  EXPECT_EQ(pool.first_block(46), 0);  // first visible 31: chunk 0
  EXPECT_EQ(pool.first_block(47), 2);  // first visible 32: chunk 32 = block 2
  EXPECT_EQ(pool.first_block(100), 4);  // 85: chunk 64
  const WindowPool wide(8, kBlock, 1024);
  EXPECT_EQ(wide.first_block(1023), 0);
  EXPECT_EQ(wide.first_block(1024 + 64), 4);  // 65: chunk 64
  EXPECT_THROW(WindowPool(8, kBlock, 0), Error);
}

TEST(WindowPool, ReclaimGivesBackWhatNoQueryReadsAndRegisteredBlocksStayCached) {
  WindowPool pool(8, kBlock, 16);
  const Chain chain(6);
  std::vector<int32_t> table;
  ASSERT_TRUE(pool.extend(table, 96));
  ASSERT_EQ(table.size(), 6u);
  for (int32_t b = 0; b < 6; ++b) ASSERT_TRUE(pool.register_block(table[b], chain.key(b), chain.block(b)));
  const std::vector<int32_t> ids = table;
  EXPECT_EQ(pool.reclaim(table, 96), 4);  // the next query (96) reads from 64 = block 4
  EXPECT_EQ(table, (std::vector<int32_t>{-1, -1, -1, -1, ids[4], ids[5]}));
  EXPECT_EQ(pool.blocks().n_in_use(), 2);
  EXPECT_EQ(pool.blocks().n_cached(), 4);
  EXPECT_EQ(pool.reclaim(table, 96), 0);
  // Growing after a reclaim appends; the given-back entries stay -1.
  ASSERT_TRUE(pool.extend(table, 100));
  EXPECT_EQ(table.size(), 7u);
  EXPECT_FALSE(pool.extend(table, 16 * 20));  // 13 more blocks: the pool has 8
  EXPECT_EQ(table.size(), 7u);
  pool.release(table);
  EXPECT_TRUE(table.empty());
  EXPECT_EQ(pool.blocks().n_in_use(), 0);
  pool.blocks().check_invariants();
}

TEST(WindowPool, LongestHitNeedsEveryBlockOfTheWindowBeforeIt) {
  WindowPool pool(16, kBlock, 16);
  const Chain chain(8);
  std::vector<int32_t> table;
  ASSERT_TRUE(pool.extend(table, 8 * kBlock));
  for (int32_t b = 0; b < 8; ++b) ASSERT_TRUE(pool.register_block(table[b], chain.key(b), chain.block(b)));
  pool.release(table);
  EXPECT_EQ(pool.longest_hit(chain.ns, chain.tokens, chain.hashes, 8), 8);
  EXPECT_EQ(pool.longest_hit(chain.ns, chain.tokens, chain.hashes, 5), 5);
  // Evict them all: allocation takes the free blocks, then the cached ones.
  auto all = pool.blocks().allocate(16);
  ASSERT_TRUE(all);
  EXPECT_EQ(pool.longest_hit(chain.ns, chain.tokens, chain.hashes, 8), 0);
  pool.blocks().release(*all);
  // Rebuild blocks 2..7 only: a hit at 8 blocks needs [first_block(128) = 6, 8); at 3 blocks [2, 3); at 2 blocks
  // [0, 2), which are missing.
  ASSERT_TRUE(pool.extend(table, 8 * kBlock));
  for (int32_t b = 2; b < 8; ++b) ASSERT_TRUE(pool.register_block(table[b], chain.key(b), chain.block(b)));
  pool.release(table);
  EXPECT_EQ(pool.longest_hit(chain.ns, chain.tokens, chain.hashes, 8), 8);
  EXPECT_EQ(pool.longest_hit(chain.ns, chain.tokens, chain.hashes, 3), 3);
  EXPECT_EQ(pool.longest_hit(chain.ns, chain.tokens, chain.hashes, 2), 0);
  // Other tokens under the same hashes (a forged or colliding key) are a miss.
  Chain other(8, 1000);
  other.hashes = chain.hashes;
  EXPECT_EQ(pool.longest_hit(other.ns, other.tokens, other.hashes, 8), 0);

  std::vector<int32_t> hit;
  pool.acquire_hit(chain.hashes, 8, hit);
  ASSERT_EQ(hit.size(), 8u);
  for (int32_t b = 0; b < 6; ++b) EXPECT_EQ(hit[b], -1);
  EXPECT_GE(hit[6], 0);
  EXPECT_GE(hit[7], 0);
  EXPECT_EQ(pool.blocks().n_in_use(), 2);
  pool.release(hit);
  pool.blocks().check_invariants();
}

}  // namespace
}  // namespace preface::kv
