#include "kv/state_slots.h"

#include <algorithm>
#include <functional>
#include <stdexcept>
#include <string>

#include "util/error.h"

namespace preface::kv {

StateSlots::StateSlots(int32_t n_slots) {
  if (n_slots < 0) throw Error("state slots: a negative count (" + std::to_string(n_slots) + ")");
  held_.assign(static_cast<size_t>(n_slots), 0);
  for (int32_t s = n_slots - 1; s >= 0; --s) free_.push_back(s);
}

bool StateSlots::held(int32_t slot) const {
  return slot >= 0 && slot < n_slots() && held_[static_cast<size_t>(slot)] != 0;
}

std::optional<int32_t> StateSlots::acquire() {
  if (free_.empty()) return std::nullopt;
  const int32_t slot = free_.back();
  free_.pop_back();
  held_[static_cast<size_t>(slot)] = 1;
  return slot;
}

void StateSlots::release(int32_t slot) {
  if (!held(slot)) throw std::logic_error("state slots: release of slot " + std::to_string(slot) + ", not held");
  held_[static_cast<size_t>(slot)] = 0;
  // Keep the list descending: the lowest slot is reused first, so a lightly loaded server touches few slots.
  free_.insert(std::upper_bound(free_.begin(), free_.end(), slot, std::greater<>()), slot);
}

void StateSlots::check_invariants() const {
  std::vector<uint8_t> seen(held_.size(), 0);
  for (size_t i = 0; i < free_.size(); ++i) {
    const int32_t s = free_[i];
    const std::string name = "state slots: slot " + std::to_string(s);
    if (s < 0 || s >= n_slots()) throw std::logic_error(name + " is free and out of range");
    if (held_[static_cast<size_t>(s)] != 0) throw std::logic_error(name + " is free and held");
    if (seen[static_cast<size_t>(s)]++ != 0) throw std::logic_error(name + " is free twice");
    if (i > 0 && free_[i - 1] <= s) throw std::logic_error("state slots: free list out of order");
  }
  for (size_t s = 0; s < held_.size(); ++s) {
    if (held_[s] == 0 && seen[s] == 0) throw std::logic_error("state slots: slot " + std::to_string(s) + " lost");
  }
}

}  // namespace preface::kv
