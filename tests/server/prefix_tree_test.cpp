// The dashboard's prefix tree: chains without branches fold into one node, branches sort by hits, the namespace
// filter hides other tenants' blocks, and the limits bound the output.
#include "server/http/prefix_tree.h"

#include <gtest/gtest.h>

namespace preface::server {
namespace {

kv::Digest digest(uint8_t v) {
  kv::Digest d{};
  d.bytes[0] = v;
  d.bytes[1] = 0xAB;
  return d;
}

// A block of 2 tokens {t, t} with hash h under parent p in namespace root.
engine::CachedBlockInfo block(uint8_t h, uint8_t parent, uint8_t root, int64_t hits, int32_t t) {
  engine::CachedBlockInfo b;
  b.id = h;
  b.key = {digest(h), digest(parent), digest(root)};
  b.tokens = {t, t};
  b.hits = hits;
  b.age_s = 10.0 - h;
  return b;
}

TEST(PrefixTree, FoldsChainsAndSortsBranchesByHits) {
  // Namespace 100: 1 -> 2 -> {3 (1 hit), 4 (5 hits) -> 5}. Namespace 101: 6 (9 hits).
  const std::vector<engine::CachedBlockInfo> blocks = {
      block(1, 100, 100, 7, 1), block(2, 1, 100, 6, 2), block(3, 2, 100, 1, 3),
      block(4, 2, 100, 5, 4),   block(5, 4, 100, 0, 5), block(6, 101, 101, 9, 6),
  };
  const PrefixTree tree = build_prefix_tree(blocks, {});
  EXPECT_EQ(tree.n_blocks, 6);
  EXPECT_EQ(tree.n_root_chains, 2);
  EXPECT_FALSE(tree.truncated);
  ASSERT_EQ(tree.roots.size(), 2u);
  EXPECT_EQ(tree.roots[0].hits, 9);  // most hits first
  const PrefixNode& a = tree.roots[1];
  EXPECT_EQ(a.n_blocks, 2);          // 1 and 2 folded: 2 has two children
  EXPECT_EQ(a.n_tokens, 4);
  EXPECT_EQ(a.subtree_blocks, 5);
  EXPECT_EQ(a.tokens, (std::vector<int32_t>{1, 1, 2, 2}));
  ASSERT_EQ(a.children.size(), 2u);
  EXPECT_EQ(a.children[0].hits, 5);  // block 4 (folded with 5) before block 3
  EXPECT_EQ(a.children[0].n_blocks, 2);
  EXPECT_EQ(a.children[1].hits, 1);
}

TEST(PrefixTree, NamespaceFilterHidesOtherNamespaces) {
  const std::vector<engine::CachedBlockInfo> blocks = {block(1, 100, 100, 1, 1), block(2, 1, 100, 1, 2),
                                                       block(6, 101, 101, 9, 6)};
  const PrefixTree tree = build_prefix_tree(blocks, [](const kv::Digest& r) { return r == digest(100); });
  EXPECT_EQ(tree.n_blocks, 2);
  ASSERT_EQ(tree.roots.size(), 1u);
  EXPECT_EQ(tree.roots[0].root, digest(100));
  for (const int32_t t : tree.roots[0].tokens) EXPECT_NE(t, 6);
}

TEST(PrefixTree, LimitsBoundTheOutput) {
  std::vector<engine::CachedBlockInfo> blocks = {block(1, 100, 100, 50, 1)};
  for (uint8_t c = 2; c < 30; ++c) blocks.push_back(block(c, 1, 100, c, c));  // 28 branches under block 1
  for (uint8_t r = 30; r < 60; ++r) blocks.push_back(block(r, r + 100, r + 100, 0, r));  // 30 more roots
  PrefixTreeLimits limits;
  limits.max_roots = 4;
  limits.max_children = 3;
  limits.max_text_tokens = 1;
  const PrefixTree tree = build_prefix_tree(blocks, {}, limits);
  EXPECT_TRUE(tree.truncated);
  ASSERT_EQ(tree.roots.size(), 4u);
  ASSERT_EQ(tree.roots[0].children.size(), 3u);
  EXPECT_EQ(tree.roots[0].n_hidden_children, 25);
  EXPECT_EQ(tree.roots[0].children[0].hits, 29);
  EXPECT_EQ(tree.roots[0].tokens.size(), 1u);
  EXPECT_EQ(tree.n_root_chains, 31);
}

TEST(PrefixTree, LongChainIsOneNode) {
  std::vector<engine::CachedBlockInfo> blocks;
  for (int i = 1; i <= 250; ++i) {
    engine::CachedBlockInfo b = block(1, 0, 0, 1, i);
    b.key.hash = digest(0);
    b.key.hash.bytes[2] = static_cast<uint8_t>(i);
    b.key.parent_hash = digest(0);
    if (i > 1) b.key.parent_hash.bytes[2] = static_cast<uint8_t>(i - 1);
    blocks.push_back(b);
  }
  const PrefixTree tree = build_prefix_tree(blocks, {});
  ASSERT_EQ(tree.roots.size(), 1u);
  EXPECT_EQ(tree.roots[0].n_blocks, 250);
  EXPECT_EQ(tree.roots[0].subtree_blocks, 250);
}

}  // namespace
}  // namespace preface::server
