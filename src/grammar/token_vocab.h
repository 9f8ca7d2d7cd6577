// The model's vocabulary as the grammar matcher sees it: each token's decoded bytes, in a byte trie, and the
// end-of-generation ids. Control, unknown and unused tokens have no bytes and are never allowed by a grammar
// (save the control tokens a caller names, which then stand for their text); end-of-generation tokens are allowed
// exactly where the grammar accepts.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace preface::grammar {

class TokenVocab {
 public:
  // bytes: [n_vocab] (empty: never allowed by a grammar); eog_ids: end-of-generation ids; space_prefix: the
  // tokenizer drops one leading ' ' of the first token of a text (Tokenizer::adds_space_prefix).
  TokenVocab(std::vector<std::string> bytes, std::vector<int32_t> eog_ids, bool space_prefix);
  // shown_control: control tokens that stand for their text (a tool-call format's markers).
  static std::shared_ptr<const TokenVocab> from_tokenizer(const Tokenizer& tok,
                                                          const std::vector<int32_t>& shown_control = {});

  int32_t n_vocab() const { return static_cast<int32_t>(bytes_.size()); }
  const std::string& bytes(int32_t id) const { return bytes_[static_cast<size_t>(id)]; }
  const std::vector<int32_t>& eog_ids() const { return eog_ids_; }
  bool is_eog(int32_t id) const;
  bool space_prefix() const { return space_prefix_; }

  // The trie: node 0 is the root (the empty prefix). Children of node n are edges[first_edge, first_edge +
  // n_edges), byte ascending; the tokens whose bytes end at n are token_ids[first_token, first_token + n_tokens).
  struct Node {
    int32_t first_edge = 0, n_edges = 0, first_token = 0, n_tokens = 0;
  };
  struct Edge {
    uint8_t byte = 0;
    int32_t child = 0;
  };
  const std::vector<Node>& nodes() const { return nodes_; }
  const std::vector<Edge>& edges() const { return edges_; }
  const std::vector<int32_t>& token_ids() const { return token_ids_; }

 private:
  std::vector<std::string> bytes_;
  std::vector<int32_t> eog_ids_;  // sorted
  bool space_prefix_ = false;
  std::vector<Node> nodes_;
  std::vector<Edge> edges_;
  std::vector<int32_t> token_ids_;
};

}  // namespace preface::grammar
