// PrefixIndex::explain: where a prompt's cached prefix ends, and why (kv/prefix_index.h).
#include <algorithm>

#include "kv/prefix_index.h"

namespace preface::kv {

const char* miss_reason_name(MissReason r) {
  switch (r) {
    case MissReason::FullHit: return "full_hit";
    case MissReason::PartialBlock: return "partial_block";
    case MissReason::NeverSeen: return "never_seen";
    case MissReason::Evicted: return "evicted";
    case MissReason::Expired: return "expired";
    case MissReason::Purged: return "purged";
    case MissReason::OtherNamespace: return "other_namespace";
  }
  return "never_seen";
}

namespace {

MissReason from_removal(RemovalReason r) {
  switch (r) {
    case RemovalReason::Evicted: return MissReason::Evicted;
    case RemovalReason::Expired: return MissReason::Expired;
    case RemovalReason::Purged: return MissReason::Purged;
  }
  return MissReason::Evicted;
}

}  // namespace

PrefixExplanation PrefixIndex::explain(const Digest& ns, std::span<const int32_t> tokens, int32_t max_tokens,
                                       std::span<const Digest> siblings) const {
  const PrefixMatch m = match(ns, tokens, max_tokens);
  const size_t b = static_cast<size_t>(pool_.block_size());
  const size_t limit = std::min(tokens.size(), static_cast<size_t>(max_tokens));
  const size_t k = m.block_ids.size();

  PrefixExplanation e;
  e.n_full_hit_tokens = m.n_cached_tokens;
  e.n_cached_tokens = m.n_cached_tokens + m.n_partial_tokens;
  if (k == limit / b) {  // nothing below the cap is missing but the unfilled tail
    e.reason = limit % b == 0 ? MissReason::FullHit : MissReason::PartialBlock;
    return e;
  }
  e.miss_block = static_cast<int32_t>(k);
  const Digest missing = chain_hash(m.last_hash, tokens.subspan(k * b, b));
  if (const auto removal = pool_.removals().find(missing)) {
    e.reason = from_removal(removal->reason);
    e.removal = removal;
  } else {
    e.reason = MissReason::NeverSeen;
    for (size_t s = 0; s < siblings.size(); ++s) {
      // Blocks 0..k all hit under the sibling (the same check as admission's).
      if (siblings[s] != ns &&
          match(siblings[s], tokens, static_cast<int32_t>((k + 1) * b)).block_ids.size() == k + 1) {
        e.reason = MissReason::OtherNamespace;
        e.sibling = static_cast<int32_t>(s);
        break;
      }
    }
  }
  // Divergence from the cached children of h_k (this namespace only), over the whole block, not the cap. A removed
  // or sibling block held these very tokens: the prompt diverges from nothing, the cache lost (or never had) them.
  e.diverged_at = static_cast<int32_t>(k * b);
  const auto next = tokens.subspan(k * b, b);
  int32_t best_common = -1, best_child = -1;
  if (e.reason == MissReason::NeverSeen) {
    for (const int32_t child : pool_.children_of(m.last_hash)) {
      const auto stored = pool_.block_tokens(child);
      const auto common = static_cast<int32_t>(std::mismatch(next.begin(), next.end(), stored.begin()).first -
                                               next.begin());
      if (common > best_common) best_common = common, best_child = child;
    }
  }
  if (best_child >= 0 && best_common < static_cast<int32_t>(b)) {
    e.diverged_at = static_cast<int32_t>(k * b) + best_common;
    e.cached_token = pool_.block_tokens(best_child)[static_cast<size_t>(best_common)];
  }
  e.new_token = tokens[static_cast<size_t>(e.diverged_at)];
  return e;
}

}  // namespace preface::kv
