#include "server/http/prefix_tree.h"

#include <algorithm>
#include <unordered_map>

namespace preface::server {
namespace {

struct Builder {
  std::span<const engine::CachedBlockInfo> blocks;
  const PrefixTreeLimits& limits;
  std::unordered_multimap<kv::Digest, size_t, kv::DigestHash> children;  // parent hash -> block index
  std::vector<int64_t> subtree;                                          // [blocks] blocks at and below
  size_t n_nodes = 0;
  bool truncated = false;

  std::vector<size_t> children_of(size_t i) const {
    std::vector<size_t> out;
    auto [first, last] = children.equal_range(blocks[i].key.hash);
    for (auto it = first; it != last; ++it) out.push_back(it->second);
    return out;
  }

  // Most hits first, then the biggest subtree, then the oldest (a stable order for equal counts).
  void sort(std::vector<size_t>& ids) const {
    std::sort(ids.begin(), ids.end(), [&](size_t a, size_t b) {
      if (blocks[a].hits != blocks[b].hits) return blocks[a].hits > blocks[b].hits;
      if (subtree[a] != subtree[b]) return subtree[a] > subtree[b];
      return blocks[a].age_s > blocks[b].age_s;
    });
  }

  // Post-order without recursion (a chain is as deep as a prompt is long in blocks).
  void count_subtrees(const std::vector<size_t>& roots) {
    subtree.assign(blocks.size(), 1);
    std::vector<std::pair<size_t, bool>> stack;
    for (const size_t r : roots) stack.emplace_back(r, false);
    while (!stack.empty()) {
      auto [i, done] = stack.back();
      stack.pop_back();
      if (done) {
        for (const size_t c : children_of(i)) subtree[i] += subtree[c];
        continue;
      }
      stack.emplace_back(i, true);
      for (const size_t c : children_of(i)) stack.emplace_back(c, false);
    }
  }

  PrefixNode node(size_t first, size_t depth) {
    ++n_nodes;
    PrefixNode n;
    const engine::CachedBlockInfo& b0 = blocks[first];
    n.root = b0.key.root;
    n.hits = b0.hits;
    n.age_s = b0.age_s;
    n.subtree_blocks = subtree[first];
    size_t i = first;
    std::vector<size_t> next;
    for (;;) {
      const engine::CachedBlockInfo& b = blocks[i];
      n.n_blocks++;
      n.n_tokens += static_cast<int32_t>(b.tokens.size());
      n.pins = std::max(n.pins, b.pin_count);
      n.refs = std::max(n.refs, b.ref_count);
      for (const int32_t t : b.tokens) {
        if (n.tokens.size() < limits.max_text_tokens) n.tokens.push_back(t);
      }
      next = children_of(i);
      if (next.size() != 1) break;
      i = next[0];
    }
    sort(next);
    for (const size_t c : next) {
      if (depth >= limits.max_depth || n.children.size() >= limits.max_children || n_nodes >= limits.max_nodes) {
        n.n_hidden_children++;
        truncated = true;
        continue;
      }
      n.children.push_back(node(c, depth + 1));
    }
    return n;
  }
};

}  // namespace

PrefixTree build_prefix_tree(std::span<const engine::CachedBlockInfo> blocks,
                             const std::function<bool(const kv::Digest&)>& visible, const PrefixTreeLimits& limits) {
  Builder b{blocks, limits, {}, {}, 0, false};
  PrefixTree tree;
  std::vector<size_t> roots;
  for (size_t i = 0; i < blocks.size(); ++i) {
    const kv::BlockKey& k = blocks[i].key;
    if (visible && !visible(k.root)) continue;
    tree.n_blocks++;
    if (k.parent_hash == k.root) {
      roots.push_back(i);
    } else {
      b.children.emplace(k.parent_hash, i);
    }
  }
  tree.n_root_chains = static_cast<int64_t>(roots.size());
  b.count_subtrees(roots);
  b.sort(roots);
  for (const size_t r : roots) {
    if (tree.roots.size() >= limits.max_roots || b.n_nodes >= limits.max_nodes) {
      b.truncated = true;
      break;
    }
    tree.roots.push_back(b.node(r, 0));
  }
  tree.truncated = b.truncated;
  return tree;
}

}  // namespace preface::server
