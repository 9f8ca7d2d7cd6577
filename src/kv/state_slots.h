// The per-sequence slots of recurrent state (layers whose model::MemorySpec is State: a fixed number of bytes per
// sequence, kept in kv::KvStorage's state regions, n_slots per layer): which slot each running sequence holds. Pure
// bookkeeping, like the block pool: the bytes are the storage's. A sequence takes a slot when its blocks are first
// allocated and gives it back when it releases them (finished or preempted); snapshots of a state at a prefix
// boundary, which a prefix hit needs, are the hybrid-model issue's.
//
// Invariants (check_invariants): every slot is exactly one of free / held; the free list has no duplicates.
// Single-threaded, as kv::KvCache.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

namespace preface::kv {

class StateSlots {
 public:
  // n_slots >= 0 (0: the model has no state layers and acquire() never succeeds). Throws preface::Error when
  // negative.
  explicit StateSlots(int32_t n_slots);

  int32_t n_slots() const { return static_cast<int32_t>(held_.size()); }
  int32_t n_free() const { return static_cast<int32_t>(free_.size()); }
  bool held(int32_t slot) const;

  // The lowest free slot, now held; nullopt when every slot is held.
  std::optional<int32_t> acquire();
  // Gives back a held slot. Throws std::logic_error for a slot out of range or not held (a double release).
  void release(int32_t slot);

  // Throws std::logic_error naming the first violated invariant.
  void check_invariants() const;

 private:
  std::vector<int32_t> free_;  // descending, so back() is the lowest free slot
  std::vector<uint8_t> held_;  // [n_slots] 1 = held
};

}  // namespace preface::kv
