// Token-level matching of a Grammar over a TokenVocab.
//
// A matcher state is a set of parse stacks (llama.cpp's llama_grammar stacks): each stack lists grammar
// positions, the top one a byte-set element still to match; the empty stack means the input so far is a
// sentence. Stacks are hash-consed into a node arena (a node is (position, parent node)), and stack sets are
// interned, so a state is one int and equal states have equal ids. Byte transitions between states are
// memoized: the states reached so far form a lazily built DFA.
//
// The allowed-token mask of a state is computed by walking the vocabulary trie from that state (a token is
// allowed when all its bytes can be consumed) and cached per state in the Constraint, so every request with the
// same compiled grammar reuses it. A mask is a pure function of the grammar, the vocabulary and the state:
// batching, timing and cache hits never change which tokens are allowed.
//
// Threading: a Constraint may be shared by many sequences and threads; its caches are guarded by a mutex. Mask
// computation is meant for the engine thread (see engine/model_runner.cpp), never an HTTP thread.
#pragma once
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/token_vocab.h"

namespace preface::grammar {

// Allowed tokens, one bit per token id.
struct TokenMask {
  std::vector<uint64_t> bits;  // [ceil(n_vocab / 64)]
  int32_t n_allowed = 0;
  bool test(int32_t id) const { return (bits[static_cast<size_t>(id) >> 6] >> (id & 63)) & 1u; }
};

// Bounds of one constraint's state space; a request that exceeds them fails with preface::Error.
inline constexpr size_t kMaxStacksPerState = 4096;
inline constexpr size_t kMaxArenaNodes = 1u << 22;
inline constexpr size_t kMaxStates = 1u << 20;
inline constexpr size_t kMaxMaskCacheBytes = 64u << 20;

class Constraint {
 public:
  Constraint(Grammar grammar, std::shared_ptr<const TokenVocab> vocab);
  Constraint(const Constraint&) = delete;
  Constraint& operator=(const Constraint&) = delete;

  const Grammar& grammar() const { return grammar_; }
  const TokenVocab& vocab() const { return *vocab_; }
  int32_t start_state() const { return start_; }

  // The state after `bytes` from `state`; -1 when the bytes leave the grammar.
  int32_t advance(int32_t state, std::string_view bytes);
  bool accepting(int32_t state);
  // A sentence no byte can extend.
  bool complete(int32_t state);
  // The tokens allowed in `state` (end-of-generation ids when accepting). strip_space: the token is the first of
  // a text whose leading ' ' the tokenizer drops, so a token's bytes count without one leading space.
  std::shared_ptr<const TokenMask> mask(int32_t state, bool strip_space);

  struct Stats {
    size_t n_states = 0, n_nodes = 0, n_masks_cached = 0;
    int64_t n_mask_hits = 0, n_mask_misses = 0;
  };
  Stats stats() const;

 private:
  int32_t node(int32_t pos, int32_t parent);  // hash-consed
  void expand(int32_t stack, std::vector<int32_t>& out);
  int32_t intern(std::vector<int32_t>& stacks);  // sorts and dedups
  int32_t step(int32_t state, uint8_t byte);      // memoized, mu_ held
  std::shared_ptr<TokenMask> compute_mask(int32_t state, bool strip_space);

  const Grammar grammar_;
  const std::shared_ptr<const TokenVocab> vocab_;
  int32_t start_ = -1;

  mutable std::mutex mu_;
  struct Node {
    int32_t pos, parent;  // parent -1: the bottom
  };
  std::vector<Node> nodes_;
  std::unordered_map<uint64_t, int32_t> node_ids_;
  std::vector<std::vector<int32_t>> states_;      // sorted stack ids; -1 is the empty stack
  std::unordered_map<std::string, int32_t> state_ids_;
  std::unordered_map<uint64_t, int32_t> steps_;   // (state << 8 | byte) -> state or -1
  std::unordered_map<int64_t, std::shared_ptr<const TokenMask>> masks_;  // (state << 1 | strip) -> mask
  size_t mask_bytes_ = 0;
  int64_t n_mask_hits_ = 0, n_mask_misses_ = 0;
};

// One sequence's position in a Constraint.
class Matcher {
 public:
  // strip_leading_space: the output starts a text (a chat reply) and the vocabulary's tokenizer drops one leading
  // space of the first token there (as Tokenizer::decode and StreamDecoder do).
  Matcher(std::shared_ptr<Constraint> constraint, bool strip_leading_space);

  std::shared_ptr<const TokenMask> allowed();
  // Advances by a token allowed() allowed; an end-of-generation token is accepted only in an accepting state and
  // leaves the state as it is. Returns false (state unchanged) for a token that the grammar does not allow.
  bool accept(int32_t token);
  bool accepting() const { return constraint_->accepting(state_); }
  bool complete() const { return constraint_->complete(state_); }
  int32_t state() const { return state_; }

 private:
  std::shared_ptr<Constraint> constraint_;
  int32_t state_;
  bool strip_space_;
};

}  // namespace preface::grammar
