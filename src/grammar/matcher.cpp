#include "grammar/matcher.h"

#include <algorithm>
#include <cstring>

namespace preface::grammar {
namespace {

// The byte-transition memo is a cache (each entry is a pure function of its key): past this many entries it is
// dropped and rebuilt as needed, which bounds it at ~64 MiB.
constexpr size_t kMaxMemoSteps = 1u << 21;

}  // namespace

Constraint::Constraint(Grammar grammar, std::shared_ptr<const TokenVocab> vocab)
    : grammar_(std::move(grammar)), vocab_(std::move(vocab)) {
  std::lock_guard lock(mu_);
  std::vector<int32_t> stacks;
  for (int32_t alt : grammar_.rules[static_cast<size_t>(grammar_.root)]) expand(node(alt, -1), stacks);
  start_ = intern(stacks);
}

int32_t Constraint::node(int32_t pos, int32_t parent) {
  const uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(pos)) << 32) | static_cast<uint32_t>(parent + 1);
  const auto [it, fresh] = node_ids_.emplace(key, static_cast<int32_t>(nodes_.size()));
  if (fresh) {
    if (nodes_.size() >= kMaxArenaNodes) {
      node_ids_.erase(it);
      throw Error("the grammar's parse state grew beyond " + std::to_string(kMaxArenaNodes) + " stack nodes");
    }
    nodes_.push_back({pos, parent});
  }
  return it->second;
}

// Pushes the stacks `stack` expands to: each with a Bytes element on top, or -1 (the empty stack) where the
// grammar can end. Terminates because no rule reaches itself without consuming a byte (grammar.h).
void Constraint::expand(int32_t stack, std::vector<int32_t>& out) {
  std::vector<int32_t> work{stack};
  while (!work.empty()) {
    const int32_t s = work.back();
    work.pop_back();
    if (s < 0) {
      out.push_back(-1);
      continue;
    }
    const Node n = nodes_[static_cast<size_t>(s)];
    const Element& e = grammar_.elements[static_cast<size_t>(n.pos)];
    if (e.kind == Element::Bytes) {
      out.push_back(s);
    } else if (e.kind == Element::End) {
      work.push_back(n.parent);
    } else {
      const int32_t ret = node(n.pos + 1, n.parent);
      for (int32_t alt : grammar_.rules[static_cast<size_t>(e.value)]) work.push_back(node(alt, ret));
    }
    if (out.size() + work.size() > kMaxStacksPerState * 4) {
      throw Error("the grammar is too ambiguous (more than " + std::to_string(kMaxStacksPerState) +
                  " parse stacks at once)");
    }
  }
}

int32_t Constraint::intern(std::vector<int32_t>& stacks) {
  std::sort(stacks.begin(), stacks.end());
  stacks.erase(std::unique(stacks.begin(), stacks.end()), stacks.end());
  if (stacks.empty()) return -1;
  if (stacks.size() > kMaxStacksPerState) {
    throw Error("the grammar is too ambiguous (more than " + std::to_string(kMaxStacksPerState) +
                " parse stacks at once)");
  }
  std::string key(reinterpret_cast<const char*>(stacks.data()), stacks.size() * sizeof(int32_t));
  const auto [it, fresh] = state_ids_.emplace(std::move(key), static_cast<int32_t>(states_.size()));
  if (fresh) {
    if (states_.size() >= kMaxStates) {
      state_ids_.erase(it);
      throw Error("the grammar's parse state grew beyond " + std::to_string(kMaxStates) + " states");
    }
    states_.push_back(stacks);
  }
  return it->second;
}

int32_t Constraint::step(int32_t state, uint8_t byte) {
  const uint64_t key = (static_cast<uint64_t>(state) << 8) | byte;
  if (const auto it = steps_.find(key); it != steps_.end()) return it->second;
  std::vector<int32_t> next;
  // states_ may grow (reallocate) inside expand(): iterate over a copy of the ids.
  const std::vector<int32_t> stacks = states_[static_cast<size_t>(state)];
  for (const int32_t s : stacks) {
    if (s < 0) continue;
    const Node n = nodes_[static_cast<size_t>(s)];
    const Element& e = grammar_.elements[static_cast<size_t>(n.pos)];
    if (!grammar_.terminals[static_cast<size_t>(e.value)].test(byte)) continue;
    expand(node(n.pos + 1, n.parent), next);
  }
  const int32_t to = intern(next);
  if (steps_.size() >= kMaxMemoSteps) steps_.clear();
  steps_.emplace(key, to);
  return to;
}

int32_t Constraint::advance(int32_t state, std::string_view bytes) {
  std::lock_guard lock(mu_);
  for (const char ch : bytes) {
    if (state < 0) return -1;
    state = step(state, static_cast<uint8_t>(ch));
  }
  return state;
}

bool Constraint::accepting(int32_t state) {
  if (state < 0) return false;
  std::lock_guard lock(mu_);
  const auto& s = states_[static_cast<size_t>(state)];
  return !s.empty() && s.front() == -1;  // sorted: the empty stack (-1) comes first
}

bool Constraint::complete(int32_t state) {
  if (state < 0) return false;
  std::lock_guard lock(mu_);
  const auto& s = states_[static_cast<size_t>(state)];
  return s.size() == 1 && s.front() == -1;
}

std::shared_ptr<const TokenMask> Constraint::mask(int32_t state, bool strip_space) {
  strip_space = strip_space && vocab_->space_prefix();
  const int64_t key = (static_cast<int64_t>(state) << 1) | (strip_space ? 1 : 0);
  std::lock_guard lock(mu_);
  if (const auto it = masks_.find(key); it != masks_.end()) {
    ++n_mask_hits_;
    return it->second;
  }
  ++n_mask_misses_;
  std::shared_ptr<const TokenMask> m = compute_mask(state, strip_space);
  const size_t bytes = m->bits.size() * sizeof(uint64_t) + sizeof(TokenMask);
  if (mask_bytes_ + bytes > kMaxMaskCacheBytes) {  // full: start over (a mask is a pure function of its key)
    masks_.clear();
    mask_bytes_ = 0;
  }
  masks_.emplace(key, m);
  mask_bytes_ += bytes;
  return m;
}

std::shared_ptr<TokenMask> Constraint::compute_mask(int32_t state, bool strip_space) {
  const TokenVocab& v = *vocab_;
  auto m = std::make_shared<TokenMask>();
  m->bits.assign((static_cast<size_t>(v.n_vocab()) + 63) / 64, 0);
  if (state < 0) return m;
  auto allow = [&](int32_t id) {
    m->bits[static_cast<size_t>(id) >> 6] |= uint64_t{1} << (id & 63);
    ++m->n_allowed;
  };
  const auto& nodes = v.nodes();
  const auto& edges = v.edges();
  const auto& ids = v.token_ids();
  auto allow_node = [&](int32_t n) {
    const auto& node = nodes[static_cast<size_t>(n)];
    for (int32_t k = 0; k < node.n_tokens; ++k) allow(ids[static_cast<size_t>(node.first_token + k)]);
  };
  // Depth-first over the trie: (trie node, state after the node's bytes); only live states are entered.
  std::vector<std::pair<int32_t, int32_t>> work;
  auto push_children = [&](int32_t n, int32_t s) {
    const auto& node = nodes[static_cast<size_t>(n)];
    for (int32_t k = node.n_edges - 1; k >= 0; --k) {
      const auto& e = edges[static_cast<size_t>(node.first_edge + k)];
      const int32_t next = step(s, e.byte);
      if (next < 0) continue;
      allow_node(e.child);
      work.emplace_back(e.child, next);
    }
  };
  const auto& root = nodes[0];
  for (int32_t k = 0; k < root.n_edges; ++k) {
    const auto& e = edges[static_cast<size_t>(root.first_edge + k)];
    if (strip_space && e.byte == ' ') {
      // The dropped space: the token " x" counts as "x"; the lone-space token (nothing left) is not allowed.
      push_children(e.child, state);
      continue;
    }
    const int32_t next = step(state, e.byte);
    if (next < 0) continue;
    allow_node(e.child);
    work.emplace_back(e.child, next);
  }
  while (!work.empty()) {
    const auto [n, s] = work.back();
    work.pop_back();
    push_children(n, s);
  }
  const auto& st = states_[static_cast<size_t>(state)];
  if (!st.empty() && st.front() == -1) {
    for (int32_t id : v.eog_ids()) {
      if (id >= 0 && id < v.n_vocab() && !m->test(id)) allow(id);
    }
  }
  return m;
}

Constraint::Stats Constraint::stats() const {
  std::lock_guard lock(mu_);
  return {states_.size(), nodes_.size(), masks_.size(), n_mask_hits_, n_mask_misses_};
}

Matcher::Matcher(std::shared_ptr<Constraint> constraint, bool strip_leading_space)
    : constraint_(std::move(constraint)), state_(constraint_->start_state()), strip_space_(strip_leading_space) {}

std::shared_ptr<const TokenMask> Matcher::allowed() { return constraint_->mask(state_, strip_space_); }

bool Matcher::accept(int32_t token) {
  const TokenVocab& v = constraint_->vocab();
  if (token < 0 || token >= v.n_vocab()) return false;
  if (v.is_eog(token)) return accepting();
  std::string_view bytes = v.bytes(token);
  if (bytes.empty()) return false;
  if (strip_space_ && v.space_prefix() && bytes.front() == ' ') {
    bytes.remove_prefix(1);
    if (bytes.empty()) return false;
  }
  const int32_t next = constraint_->advance(state_, bytes);
  if (next < 0) return false;
  state_ = next;
  strip_space_ = false;
  return true;
}

}  // namespace preface::grammar
