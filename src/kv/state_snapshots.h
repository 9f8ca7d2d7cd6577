// Snapshots of the recurrent state of a sequence at a block boundary (models with State layers,
// model/base/memory.h): the bytes of every State layer's slot after the last token of a full block, filed under
// that block's chain hash (so, like a block, under the model, KV type, RoPE settings and tenant of its namespace).
// A prefix hit on such a model can only resume where a snapshot exists: the state there is restored into the
// sequence's slot, and the blocks before it are ordinary cached blocks. A snapshot is a pure function of the tokens
// before its boundary (the state is updated token by token in one fixed order), so a resumed sequence computes the
// same bits as a cold one.
//
// Held within a byte budget, least recently used first out. Single-threaded, as kv::KvCache, which owns it.
// Invariants (check_invariants): the bytes held are the sum of the snapshots' sizes and within the budget; the
// LRU list and the map hold the same snapshots.
#pragma once
#include <cstddef>
#include <cstdint>
#include <list>
#include <unordered_map>
#include <vector>

#include "kv/hash.h"

namespace preface::kv {

class StateSnapshots {
 public:
  // budget_bytes: at most this many bytes of snapshots (0: none are kept).
  explicit StateSnapshots(uint64_t budget_bytes) : budget_(budget_bytes) {}

  // Files bytes under hash (namespace ns, for purges), replacing any snapshot there, evicting least recently used
  // ones to fit; false (nothing kept) when the snapshot alone exceeds the budget.
  bool put(const Digest& ns, const Digest& hash, std::vector<uint8_t> bytes);
  // The snapshot under hash, now the most recently used; nullptr when none.
  const std::vector<uint8_t>* get(const Digest& hash);
  bool contains(const Digest& hash) const { return map_.count(hash) != 0; }
  // Drops every snapshot of namespace ns; returns how many.
  int32_t purge_namespace(const Digest& ns);

  size_t n_snapshots() const { return map_.size(); }
  uint64_t bytes() const { return bytes_; }
  uint64_t budget_bytes() const { return budget_; }
  int64_t n_evicted() const { return n_evicted_; }

  // Throws std::logic_error naming the first violated invariant.
  void check_invariants() const;

 private:
  struct Entry {
    Digest hash;
    Digest ns;
    std::vector<uint8_t> bytes;
  };
  void erase(std::list<Entry>::iterator it);

  uint64_t budget_;
  uint64_t bytes_ = 0;
  int64_t n_evicted_ = 0;
  std::list<Entry> lru_;  // most recently used first
  std::unordered_map<Digest, std::list<Entry>::iterator, DigestHash> map_;
};

}  // namespace preface::kv
