// The scheduler's state snapshots for models with recurrent layers (engine/scheduler.h): where a sequence's
// snapshots go, the prefill chunks cut to end there, filing and offering them, and a hit cut back to one.
#include <algorithm>

#include "engine/scheduler.h"

namespace preface::engine {

void Scheduler::plan_snapshots(Sequence& seq, int32_t n_junction) const {
  if (!recurrent_ || !prefix_cache_) return;
  const int32_t block_size = cache_.block_size();
  std::vector<SnapshotPoint>& points = seq.snapshot_points;
  if (!seq.snapshot_points_set) {
    seq.snapshot_points_set = true;
    for (const CachePin& pin : seq.params.cache_pins) {
      points.push_back({std::min(pin.n_tokens, seq.n_prompt) / block_size * block_size, kv::SnapshotKind::Breakpoint});
    }
    points.push_back({(seq.n_prompt - 1) / block_size * block_size, kv::SnapshotKind::Prompt});
    for (int32_t p = snapshot_interval_; p > 0 && p < seq.n_prompt; p += snapshot_interval_) {
      points.push_back({p, kv::SnapshotKind::Interval});
    }
  }
  if (n_junction > 0) points.push_back({n_junction, kv::SnapshotKind::Junction});
  // Ascending positions; of points at one position the first kind in SnapshotKind's order names it.
  std::sort(points.begin(), points.end(), [](const SnapshotPoint& a, const SnapshotPoint& b) {
    return a.pos != b.pos ? a.pos < b.pos : a.kind < b.kind;
  });
  points.erase(std::unique(points.begin(), points.end(),
                           [](const SnapshotPoint& a, const SnapshotPoint& b) { return a.pos == b.pos; }),
               points.end());
  if (!points.empty() && points.front().pos == 0) points.erase(points.begin());
}

int32_t Scheduler::chunk_size(const Sequence& seq, int32_t from, int32_t n) const {
  for (const SnapshotPoint& p : seq.snapshot_points) {
    if (p.pos > from) return from + n > p.pos ? p.pos - from : n;
  }
  return n;
}

void Scheduler::take_snapshot(Sequence& seq) {
  const int32_t block_size = cache_.block_size();
  const int32_t at = seq.n_computed;
  if (at == 0 || at % block_size != 0 || seq.n_hashed_blocks < at / block_size) return;
  const kv::Digest& hash = seq.hashes[static_cast<size_t>(at / block_size - 1)];
  if (cache_.has_snapshot(hash)) return;
  const auto point = std::find_if(seq.snapshot_points.begin(), seq.snapshot_points.end(),
                                  [&](const SnapshotPoint& p) { return p.pos == at; });
  if (point != seq.snapshot_points.end()) {
    if (cache_.snapshot_state(seq.ns, hash, point->kind, seq.state_slot)) offer_snapshot(seq, at);
  } else if (at >= seq.n_prompt) {
    // The previous reply snapshot goes first, so that making room for this one never evicts another's. The last
    // one goes to the tiers when the sequence ends.
    if (seq.reply_snapshot_at > 0) {
      cache_.drop_snapshot(seq.hashes[static_cast<size_t>(seq.reply_snapshot_at / block_size - 1)]);
    }
    const bool kept = cache_.snapshot_state(seq.ns, hash, kv::SnapshotKind::Reply, seq.state_slot);
    seq.reply_snapshot_at = kept ? at : 0;
  }
}

void Scheduler::offer_snapshot(const Sequence& seq, int32_t at) {
  if (tiers_ == nullptr) return;
  const int32_t block_size = cache_.block_size();
  const auto b = static_cast<size_t>(at / block_size - 1);
  tiers_->offer_snapshot(seq.ns, seq.hashes[b], b == 0 ? seq.ns : seq.hashes[b - 1],
                         std::span<const int32_t>(seq.tokens).subspan(b * block_size, block_size));
}

void Scheduler::load_snapshot(Sequence& seq, std::span<const kv::Digest> hashes, size_t n_blocks) {
  seq.state_tiers_checked = true;
  const int32_t block_size = cache_.block_size();
  for (size_t k = n_blocks; k > 0; --k) {
    if (cache_.has_snapshot(hashes[k - 1])) return;
    const auto tokens = std::span<const int32_t>(seq.tokens).subspan((k - 1) * block_size, block_size);
    if (tiers_->load_snapshot(seq.ns, hashes[k - 1], k == 1 ? seq.ns : hashes[k - 2], tokens, k == n_blocks)) return;
  }
}

void Scheduler::trim_to_snapshot(const Sequence& seq, std::span<const kv::Digest> hashes, kv::PrefixMatch& match) {
  size_t k = match.block_ids.size();
  while (k > 0 && !cache_.has_snapshot(hashes[k - 1])) --k;
  cut_match(seq, hashes, match, k);
}

}  // namespace preface::engine
