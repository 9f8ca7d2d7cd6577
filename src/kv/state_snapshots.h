// Snapshots of the recurrent state of a sequence at a block boundary (models with State layers,
// model/base/memory.h): the bytes of every State layer's slot after the last token of a full block, filed under
// that block's chain hash (so, like a block, under the model, KV type, RoPE settings and tenant of its namespace).
// A prefix hit on such a model can only resume where a snapshot exists: the state there is restored into the
// sequence's slot, and the blocks before it are ordinary cached blocks. A snapshot is a pure function of the tokens
// before its boundary (the state is updated token by token in one fixed order), so a resumed sequence computes the
// same bits as a cold one.
//
// Each snapshot carries the kind of point it was taken at (engine/scheduler.h places them). Held within a byte
// budget, least recently used first out, except that snapshots at explicit breakpoints (cache_control, pins) go
// only when no other kind is left: a client asked for that prefix to stay. Single-threaded, as kv::KvCache, which
// owns it. Invariants (check_invariants): the bytes held are the sum of the snapshots' sizes and within the budget;
// the LRU lists and the map hold the same snapshots, each in the list of its kind's class.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <list>
#include <optional>
#include <unordered_map>
#include <vector>

#include "kv/hash.h"

namespace preface::kv {

// Where a snapshot was placed (see engine/scheduler.h for when each is taken).
enum class SnapshotKind : uint8_t {
  Breakpoint,  // an explicit breakpoint: Anthropic cache_control, OpenAI prompt_cache_breakpoint / retention pins
  Prompt,      // the last full-block boundary before a prompt's last token
  Reply,       // the last full-block boundary of prompt + generated reply (the next turn resumes there)
  Interval,    // every --state-snapshot-interval tokens inside a long prompt
  Junction,    // where a prompt's cached blocks end with no snapshot (the next prompt diverging there hits)
};
inline constexpr size_t kSnapshotKinds = 5;
const char* snapshot_kind_name(SnapshotKind k);  // "breakpoint" | "prompt" | "reply" | "interval" | "junction"

class StateSnapshots {
 public:
  // budget_bytes: at most this many bytes of snapshots (0: none are kept).
  explicit StateSnapshots(uint64_t budget_bytes) : budget_(budget_bytes) {}

  // Files bytes under hash (namespace ns, for purges), replacing any snapshot there, evicting least recently used
  // ones to fit; false (nothing kept) when the snapshot alone exceeds the budget. Counted as taken of its kind.
  bool put(const Digest& ns, const Digest& hash, SnapshotKind kind, std::vector<uint8_t> bytes);
  // The snapshot under hash, now the most recently used, counted as a hit of its kind; nullptr when none.
  const std::vector<uint8_t>* get(const Digest& hash);
  bool contains(const Digest& hash) const { return map_.count(hash) != 0; }
  // The snapshot under hash without touching the LRU order or the counters; nullptr when none.
  const std::vector<uint8_t>* peek(const Digest& hash) const;
  std::optional<SnapshotKind> kind_of(const Digest& hash) const;
  // Drops the snapshot under hash (none: nothing); not counted as evicted.
  void erase(const Digest& hash);
  // Drops every snapshot of namespace ns; returns how many.
  int32_t purge_namespace(const Digest& ns);

  size_t n_snapshots() const { return map_.size(); }
  uint64_t bytes() const { return bytes_; }
  uint64_t budget_bytes() const { return budget_; }
  int64_t n_evicted() const { return n_evicted_; }
  // Per SnapshotKind: snapshots filed, and restored for a hit.
  const std::array<int64_t, kSnapshotKinds>& n_taken() const { return n_taken_; }
  const std::array<int64_t, kSnapshotKinds>& n_hits() const { return n_hits_; }

  // Throws std::logic_error naming the first violated invariant.
  void check_invariants() const;

 private:
  struct Entry {
    Digest hash;
    Digest ns;
    SnapshotKind kind;
    std::vector<uint8_t> bytes;
  };
  using List = std::list<Entry>;
  static size_t class_of(SnapshotKind k) { return k == SnapshotKind::Breakpoint ? 1 : 0; }
  void erase(List::iterator it);

  uint64_t budget_;
  uint64_t bytes_ = 0;
  int64_t n_evicted_ = 0;
  std::array<int64_t, kSnapshotKinds> n_taken_{}, n_hits_{};
  std::array<List, 2> lru_;  // [0] other kinds, [1] breakpoints (evicted last); most recently used first
  std::unordered_map<Digest, List::iterator, DigestHash> map_;
};

}  // namespace preface::kv
