#include "kv/state_snapshots.h"

#include <stdexcept>
#include <utility>

namespace preface::kv {

const char* snapshot_kind_name(SnapshotKind k) {
  switch (k) {
    case SnapshotKind::Breakpoint: return "breakpoint";
    case SnapshotKind::Prompt: return "prompt";
    case SnapshotKind::Reply: return "reply";
    case SnapshotKind::Interval: return "interval";
    case SnapshotKind::Junction: return "junction";
  }
  return "unknown";
}

void StateSnapshots::erase(List::iterator it) {
  bytes_ -= it->bytes.size();
  map_.erase(it->hash);
  lru_[class_of(it->kind)].erase(it);
}

void StateSnapshots::erase(const Digest& hash) {
  if (const auto it = map_.find(hash); it != map_.end()) erase(it->second);
}

bool StateSnapshots::put(const Digest& ns, const Digest& hash, SnapshotKind kind, std::vector<uint8_t> bytes) {
  erase(hash);
  if (bytes.size() > budget_) return false;
  while (bytes_ + bytes.size() > budget_) {
    List& victims = lru_[0].empty() ? lru_[1] : lru_[0];
    erase(std::prev(victims.end()));
    ++n_evicted_;
  }
  bytes_ += bytes.size();
  List& list = lru_[class_of(kind)];
  list.push_front(Entry{hash, ns, kind, std::move(bytes)});
  map_[hash] = list.begin();
  ++n_taken_[static_cast<size_t>(kind)];
  return true;
}

const std::vector<uint8_t>* StateSnapshots::get(const Digest& hash) {
  const auto it = map_.find(hash);
  if (it == map_.end()) return nullptr;
  List& list = lru_[class_of(it->second->kind)];
  list.splice(list.begin(), list, it->second);
  ++n_hits_[static_cast<size_t>(it->second->kind)];
  return &it->second->bytes;
}

const std::vector<uint8_t>* StateSnapshots::peek(const Digest& hash) const {
  const auto it = map_.find(hash);
  return it == map_.end() ? nullptr : &it->second->bytes;
}

std::optional<SnapshotKind> StateSnapshots::kind_of(const Digest& hash) const {
  const auto it = map_.find(hash);
  if (it == map_.end()) return std::nullopt;
  return it->second->kind;
}

int32_t StateSnapshots::purge_namespace(const Digest& ns) {
  int32_t n = 0;
  for (List& list : lru_) {
    for (auto it = list.begin(); it != list.end();) {
      const auto next = std::next(it);
      if (it->ns == ns) {
        erase(it);
        ++n;
      }
      it = next;
    }
  }
  return n;
}

void StateSnapshots::check_invariants() const {
  uint64_t total = 0;
  size_t n = 0;
  for (size_t c = 0; c < lru_.size(); ++c) {
    for (auto it = lru_[c].begin(); it != lru_[c].end(); ++it) {
      const auto m = map_.find(it->hash);
      if (m == map_.end() || m->second != it) throw std::logic_error("state snapshots: LRU entry not in the map");
      if (class_of(it->kind) != c) throw std::logic_error("state snapshots: a snapshot in another kind's list");
      total += it->bytes.size();
      ++n;
    }
  }
  if (n != map_.size()) throw std::logic_error("state snapshots: map and LRU lists differ in size");
  if (total != bytes_) throw std::logic_error("state snapshots: byte count differs from the snapshots'");
  if (bytes_ > budget_) throw std::logic_error("state snapshots: over budget");
}

}  // namespace preface::kv
