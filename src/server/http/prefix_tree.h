// The dashboard's view of the cached prefixes: registered KV blocks (engine::Engine::cached_blocks) folded into a
// bounded tree. Each node is a chain of blocks where no branch happens (a block with exactly one cached child is
// merged with it), so a long shared system prompt is one node and a node's children are the ways prompts went on
// from there. Pure functions.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "engine/engine.h"

namespace preface::server {

struct PrefixNode {
  kv::Digest root;                 // the namespace (tenant x salt x model) of the chain
  std::vector<int32_t> tokens;     // the node's first tokens (at most PrefixTreeLimits::max_text_tokens)
  int32_t n_blocks = 0;            // blocks merged into this node
  int32_t n_tokens = 0;            // n_blocks x block size
  int64_t subtree_blocks = 0;      // blocks in this node and below (cached, whatever the limits show)
  int64_t hits = 0;                // prefix hits of the node's first block (a hit on a deeper block hit it too)
  double age_s = 0;                // since the first block was registered
  int32_t pins = 0;                // most pins on one of its blocks
  int32_t refs = 0;                // most sequences holding one of its blocks now
  std::vector<PrefixNode> children;  // most hits first
  int32_t n_hidden_children = 0;   // children left out by the limits
};

struct PrefixTreeLimits {
  size_t max_roots = 12;       // top-level nodes shown
  size_t max_children = 6;     // children per node shown
  size_t max_depth = 6;        // node levels below the roots
  size_t max_nodes = 96;       // nodes in all
  size_t max_text_tokens = 24; // tokens kept per node
};

struct PrefixTree {
  std::vector<PrefixNode> roots;  // most hits first
  int64_t n_root_chains = 0;      // visible first blocks, shown or not
  int64_t n_blocks = 0;           // visible registered blocks
  bool truncated = false;         // a limit left something out
};

// The tree of the blocks whose namespace `visible` accepts (all when empty). O(blocks log blocks).
PrefixTree build_prefix_tree(std::span<const engine::CachedBlockInfo> blocks,
                             const std::function<bool(const kv::Digest&)>& visible,
                             const PrefixTreeLimits& limits = {});

}  // namespace preface::server
