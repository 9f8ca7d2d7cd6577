#include "grammar/token_vocab.h"

#include <algorithm>
#include <numeric>

namespace preface::grammar {

TokenVocab::TokenVocab(std::vector<std::string> bytes, std::vector<int32_t> eog_ids, bool space_prefix)
    : bytes_(std::move(bytes)), eog_ids_(std::move(eog_ids)), space_prefix_(space_prefix) {
  std::sort(eog_ids_.begin(), eog_ids_.end());
  eog_ids_.erase(std::unique(eog_ids_.begin(), eog_ids_.end()), eog_ids_.end());
  for (int32_t id : eog_ids_) {
    if (id >= 0 && id < n_vocab()) bytes_[static_cast<size_t>(id)].clear();
  }
  // Tokens sorted by bytes: each trie node's subtree is a contiguous run, built depth-first in one pass.
  std::vector<int32_t> order(bytes_.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return bytes_[static_cast<size_t>(a)] < bytes_[static_cast<size_t>(b)];
  });
  size_t skip = 0;
  while (skip < order.size() && bytes_[static_cast<size_t>(order[skip])].empty()) ++skip;
  // Build children lists per node, then lay them out (node ids in creation order).
  struct Build {
    std::vector<std::pair<uint8_t, int32_t>> children;
    std::vector<int32_t> tokens;
  };
  std::vector<Build> build(1);
  for (size_t k = skip; k < order.size(); ++k) {
    const std::string& b = bytes_[static_cast<size_t>(order[k])];
    int32_t n = 0;
    for (const char ch : b) {
      const auto byte = static_cast<uint8_t>(ch);
      auto& ch_list = build[static_cast<size_t>(n)].children;
      if (!ch_list.empty() && ch_list.back().first == byte) {
        n = ch_list.back().second;
      } else {
        const auto child = static_cast<int32_t>(build.size());
        ch_list.emplace_back(byte, child);
        build.emplace_back();
        n = child;
      }
    }
    build[static_cast<size_t>(n)].tokens.push_back(order[k]);
  }
  nodes_.resize(build.size());
  for (size_t n = 0; n < build.size(); ++n) {
    Node& node = nodes_[n];
    node.first_edge = static_cast<int32_t>(edges_.size());
    node.n_edges = static_cast<int32_t>(build[n].children.size());
    for (const auto& [byte, child] : build[n].children) edges_.push_back({byte, child});
    node.first_token = static_cast<int32_t>(token_ids_.size());
    node.n_tokens = static_cast<int32_t>(build[n].tokens.size());
    token_ids_.insert(token_ids_.end(), build[n].tokens.begin(), build[n].tokens.end());
  }
}

std::shared_ptr<const TokenVocab> TokenVocab::from_tokenizer(const Tokenizer& tok,
                                                             const std::vector<int32_t>& shown_control) {
  std::vector<std::string> bytes(static_cast<size_t>(tok.n_vocab()));
  for (int32_t id = 0; id < tok.n_vocab(); ++id) {
    const TokenAttr a = tok.attr(id);
    if (a == TokenAttr::Control || a == TokenAttr::Unknown || a == TokenAttr::Unused) continue;
    bytes[static_cast<size_t>(id)] = tok.token_to_bytes(id);
  }
  for (const int32_t id : shown_control) {
    if (id >= 0 && id < tok.n_vocab() && !tok.is_end_of_generation(id)) bytes[static_cast<size_t>(id)] = tok.piece(id);
  }
  return std::make_shared<TokenVocab>(std::move(bytes), tok.end_of_generation_ids(), tok.adds_space_prefix());
}

bool TokenVocab::is_eog(int32_t id) const { return std::binary_search(eog_ids_.begin(), eog_ids_.end(), id); }

}  // namespace preface::grammar
