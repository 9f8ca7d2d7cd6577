#include "engine/scheduler.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "util/error.h"

namespace preface::engine {
namespace {

int32_t blocks_for(int32_t n_positions, int32_t block_size) {
  return (n_positions + block_size - 1) / block_size;
}

}  // namespace

Scheduler::Scheduler(kv::KvCache& cache, bool prefix_cache, int32_t max_running, int32_t snapshot_interval)
    : cache_(cache),
      window_(cache.window_pool()),
      prefix_cache_(prefix_cache),
      recurrent_(cache.state_slots().n_slots() > 0),
      snapshot_interval_(snapshot_interval <= 0 ? 0
                                                : std::max(snapshot_interval / cache.block_size(), 1) *
                                                      cache.block_size()),
      max_running_(max_running) {}

void Scheduler::trim_to_window(Sequence& seq, std::span<const kv::Digest> hashes, kv::PrefixMatch& match) {
  const int32_t k =
      window_->longest_hit(seq.ns, seq.tokens, hashes, static_cast<int32_t>(match.block_ids.size()));
  cut_match(seq, hashes, match, static_cast<size_t>(k));
  window_->acquire_hit(hashes, k, seq.window_table);
}

bool Scheduler::extend_window(Sequence& seq, int32_t n_positions, const Sequence* except) {
  while (!window_->extend(seq.window_table, n_positions)) {
    Sequence* victim = pick_victim(except);
    if (victim == nullptr) return false;
    preempt(*victim);
  }
  return true;
}

void Scheduler::cut_match(const Sequence& seq, std::span<const kv::Digest> hashes, kv::PrefixMatch& match, size_t k) {
  kv::PrefixMatch dropped;
  dropped.block_ids.assign(match.block_ids.begin() + static_cast<std::ptrdiff_t>(k), match.block_ids.end());
  dropped.partial_src_block = match.partial_src_block;
  cache_.abandon(dropped);
  match.block_ids.resize(k);
  match.n_cached_tokens = static_cast<int32_t>(k) * cache_.block_size();
  match.partial_src_block = -1;
  match.n_partial_tokens = 0;
  match.last_hash = k > 0 ? hashes[k - 1] : seq.ns;
}

void Scheduler::add(std::unique_ptr<Sequence> seq) {
  seq->last_hash = seq->ns;
  waiting_.push_back(seq.get());
  owned_.push_back(std::move(seq));
}

std::vector<ScheduledChunk> Scheduler::schedule(int32_t budget) {
  ++step_id_;
  std::vector<ScheduledChunk> plan;
  // Passes 1 and 2: decodes first so a long prefill never stalls them, then prefill chunks. running_ may shrink
  // as sequences are preempted, so iterate over a snapshot and skip the ones no longer running.
  for (int pass = 0; pass < 2; ++pass) {
    const std::vector<Sequence*> snapshot = running_;
    for (Sequence* seq : snapshot) {
      if (budget <= 0) break;
      if (!seq->running || seq->planned_step == step_id_) continue;
      const bool is_decode = seq->n_remaining() == 1;
      if (is_decode != (pass == 0)) continue;
      const int32_t n = chunk_size(*seq, seq->n_computed, std::min(seq->n_remaining(), budget));
      if (!ensure_blocks(*seq, seq->n_computed + n)) continue;
      seq->planned_step = step_id_;
      plan.push_back({seq, n});
      budget -= n;
    }
  }
  // Pass 3: admit waiting sequences in order; a deferred one (waiting on another's prefix) lets later ones by,
  // a lack of memory stops admission (so later requests cannot starve an earlier large one).
  for (size_t i = 0; i < waiting_.size() && budget > 0 && n_running() < max_running_;) {
    Sequence* seq = waiting_[i];
    const Admit result = try_admit(*seq, budget, plan);
    if (result == Admit::NoRoom) break;
    if (result == Admit::Deferred) {
      ++i;
      continue;
    }
    budget -= plan.back().n_tokens;
    // Preemptions during admission push victims to the front, so find seq again; the victims stay behind it.
    const auto it = std::find(waiting_.begin(), waiting_.end(), seq);
    i = static_cast<size_t>(it - waiting_.begin());
    waiting_.erase(it);
  }
  return plan;
}

Scheduler::Admit Scheduler::try_admit(Sequence& seq, int32_t budget, std::vector<ScheduledChunk>& plan) {
  const int32_t block_size = cache_.block_size();
  const int32_t max_cached = seq.n_tokens() - 1;  // the last token is always computed, to produce logits
  kv::PrefixMatch match;
  match.last_hash = seq.ns;
  int32_t n_junction = 0;  // recurrent models: where the cached blocks end when no snapshot does
  // A prompt_logits or cache_bypass request computes every position.
  if (prefix_cache_ && !seq.params.prompt_logits && !seq.params.cache_bypass) {
    const std::span<const kv::Digest> hashes = seq.block_hashes(block_size);  // computed once per block
    const kv::PrefixMatch peek = cache_.peek(seq.ns, seq.tokens, hashes, max_cached);
    const size_t next_block = peek.block_ids.size();
    if (next_block < seq.prompt_hashes().size()) {
      const auto it = pending_.find(seq.prompt_hashes()[next_block]);
      if (it != pending_.end() && it->second > 0) return Admit::Deferred;
    }
    // Once per prompt: continue the chain in the tiers below RAM; what they hold becomes ordinary cached blocks.
    const auto n_full = std::min<int32_t>(max_cached / block_size, static_cast<int32_t>(seq.prompt_hashes().size()));
    const auto n_ram = static_cast<int32_t>(next_block);
    if (tiers_ != nullptr && !seq.tiers_checked && n_ram < n_full) {
      seq.tiers_checked = true;
      const int32_t n_loaded = tiers_->load(seq.ns, seq.tokens, seq.prompt_hashes(), n_ram, n_full - n_ram,
                                            peek.block_ids);
      if (!seq.admitted_once) seq.stats.n_tier_tokens = n_loaded * block_size;
    }
    match = cache_.acquire_prefix(seq.ns, seq.tokens, hashes, max_cached);
    if (match.partial_src_block >= 0 && match.n_partial_tokens % hit_granularity_ != 0) {
      const int32_t keep = match.n_partial_tokens / hit_granularity_ * hit_granularity_;
      if (keep == 0) {
        cut_match(seq, hashes, match, match.block_ids.size());
      } else {
        match.n_partial_tokens = keep;
      }
    }
    if (recurrent_) {
      const auto n_blocks = static_cast<int32_t>(match.block_ids.size());
      if (tiers_ != nullptr && !seq.state_tiers_checked && n_blocks > 0) load_snapshot(seq, hashes, match.block_ids.size());
      trim_to_snapshot(seq, hashes, match);
      if (static_cast<int32_t>(match.block_ids.size()) < n_blocks) n_junction = n_blocks * block_size;
    }
    if (window_ != nullptr) trim_to_window(seq, hashes, match);
  }
  // A recurrent state to compute into (models with State layers): the snapshot where the hit ends, else zeros.
  if (recurrent_) {
    plan_snapshots(seq, n_junction);
    const std::optional<int32_t> slot = cache_.acquire_state_slot();
    if (!slot) {
      cache_.abandon(match);
      return Admit::NoRoom;
    }
    seq.state_slot = *slot;
    if (match.n_cached_tokens > 0 && !cache_.restore_state(match.last_hash, seq.state_slot)) {
      throw std::logic_error("scheduler: the snapshot a hit was cut back to is gone");
    }
  }
  const int32_t n_start = match.n_cached_tokens + match.n_partial_tokens;
  const int32_t n_chunk = chunk_size(seq, n_start, std::min(seq.n_tokens() - n_start, budget));
  const int32_t n_need = blocks_for(n_start + n_chunk, block_size) - static_cast<int32_t>(match.block_ids.size());
  std::optional<std::vector<int32_t>> fresh;
  while (!(fresh = cache_.allocate(n_need))) {
    Sequence* victim = pick_victim(nullptr);
    if (victim == nullptr) {  // undo the lookup's references and wait for memory
      cache_.abandon(match);
      if (window_ != nullptr) window_->release(seq.window_table);
      release_state_slot(seq);
      return Admit::NoRoom;
    }
    preempt(*victim);
  }
  if (window_ != nullptr && !extend_window(seq, n_start + n_chunk, nullptr)) {
    cache_.release(*fresh);
    cache_.abandon(match);
    window_->release(seq.window_table);
    release_state_slot(seq);
    return Admit::NoRoom;
  }
  seq.block_table = match.block_ids;
  seq.block_table.insert(seq.block_table.end(), fresh->begin(), fresh->end());
  // Copy-on-write: the shared rows go into our own fresh block (on a throw, the table's blocks go with seq).
  if (match.partial_src_block >= 0) cache_.copy_partial(match, fresh->front());
  seq.n_computed = n_start;
  seq.n_hashed_blocks = static_cast<int32_t>(match.block_ids.size());
  seq.n_hit_blocks = seq.n_hashed_blocks;
  seq.n_partial_rows = match.n_partial_tokens;
  seq.last_hash = match.last_hash;
  if (!seq.admitted_once) {
    seq.admitted_once = true;
    seq.stats.n_cached_tokens = n_start;
    seq.t_first_scheduled = Clock::now();
  }
  if (prefix_cache_) announce_pending(seq, seq.n_hashed_blocks);
  seq.running = true;
  seq.planned_step = step_id_;
  running_.push_back(&seq);
  plan.push_back({&seq, n_chunk});
  return Admit::Ok;
}

bool Scheduler::ensure_blocks(Sequence& seq, int32_t n_positions) {
  const int32_t n_need = blocks_for(n_positions, cache_.block_size()) - static_cast<int32_t>(seq.block_table.size());
  while (n_need > 0) {
    if (auto fresh = cache_.allocate(n_need)) {
      seq.block_table.insert(seq.block_table.end(), fresh->begin(), fresh->end());
      break;
    }
    Sequence* victim = pick_victim(&seq);
    if (victim == nullptr) {
      preempt(seq);  // nobody else to take from: step back and retry when memory frees up
      return false;
    }
    preempt(*victim);
  }
  if (window_ != nullptr && !extend_window(seq, n_positions, &seq)) {
    preempt(seq);
    return false;
  }
  return true;
}

Sequence* Scheduler::pick_victim(const Sequence* except) const {
  for (auto it = running_.rbegin(); it != running_.rend(); ++it) {
    if (*it != except && (*it)->planned_step != step_id_) return *it;
  }
  return nullptr;
}

void Scheduler::preempt(Sequence& seq) {
  release_blocks(seq);
  seq.n_computed = 0;
  seq.n_hashed_blocks = 0;
  seq.n_hit_blocks = 0;
  seq.n_partial_rows = 0;
  seq.last_hash = seq.ns;
  seq.running = false;
  seq.stats.n_preemptions++;
  ++n_preemptions_;
  running_.erase(std::find(running_.begin(), running_.end(), &seq));
  waiting_.push_front(&seq);
}

void Scheduler::release_blocks(Sequence& seq) {
  retract_pending(seq);
  cache_.release(seq.block_table);  // back to front: the deepest block is evicted first
  seq.block_table.clear();
  if (window_ != nullptr) window_->release(seq.window_table);
  release_state_slot(seq);
}

void Scheduler::release_state_slot(Sequence& seq) {
  if (seq.state_slot < 0) return;
  cache_.release_state_slot(seq.state_slot);
  seq.state_slot = -1;
}

void Scheduler::announce_pending(Sequence& seq, int32_t lo) {
  seq.pending_lo = lo;
  seq.pending_hi = std::max(lo, static_cast<int32_t>(seq.prompt_hashes().size()));
  for (int32_t b = seq.pending_lo; b < seq.pending_hi; ++b) pending_[seq.prompt_hashes()[b]]++;
}

void Scheduler::retract_pending(Sequence& seq) {
  for (int32_t b = seq.pending_lo; b < seq.pending_hi; ++b) {
    auto it = pending_.find(seq.prompt_hashes()[b]);
    if (--it->second == 0) pending_.erase(it);
  }
  seq.pending_lo = seq.pending_hi = 0;
}

void Scheduler::on_computed(const ScheduledChunk& chunk) {
  Sequence& seq = *chunk.seq;
  seq.n_computed += chunk.n_tokens;
  if (!prefix_cache_) {
    if (window_ != nullptr) window_->reclaim(seq.window_table, seq.n_computed);
    return;
  }
  const int32_t block_size = cache_.block_size();
  // Register each block as soon as it is full, so concurrent requests with the same prefix can share it.
  while ((seq.n_hashed_blocks + 1) * block_size <= seq.n_computed) {
    const int32_t b = seq.n_hashed_blocks;
    const int32_t block_id = seq.block_table[b];
    const std::span<const int32_t> tokens(seq.tokens.data() + static_cast<size_t>(b) * block_size, block_size);
    const kv::Digest hash = seq.block_hashes(block_size)[static_cast<size_t>(b)];  // chains from seq.last_hash
    const bool ours = cache_.register_block(seq.ns, block_id, seq.last_hash, hash, tokens);
    if (window_ != nullptr) {
      window_->register_block(seq.window_table[static_cast<size_t>(b)], kv::BlockKey{hash, seq.last_hash, seq.ns},
                              tokens);
    }
    if (ours && b >= seq.n_hit_blocks && (b + 1) * block_size <= seq.n_prompt) {
      // Rows copied from a partial hit were read from the cache, not written by this request.
      seq.stats.n_written_tokens += block_size - (b == seq.n_hit_blocks ? seq.n_partial_rows : 0);
    }
    if (b == seq.pending_lo && seq.pending_lo < seq.pending_hi) {
      auto it = pending_.find(seq.prompt_hashes()[b]);
      if (--it->second == 0) pending_.erase(it);
      seq.pending_lo++;
    }
    seq.last_hash = hash;
    seq.n_hashed_blocks++;
  }
  // Registered first: what the window no longer reaches stays cached in the window pool.
  if (window_ != nullptr) window_->reclaim(seq.window_table, seq.n_computed);
  // Models with recurrent layers: the state where the computed tokens end, filed under the block that ends there.
  if (recurrent_ && seq.state_slot >= 0) take_snapshot(seq);
}

std::unique_ptr<Sequence> Scheduler::remove(Sequence* seq) {
  // The sequence's last reply snapshot (the end of prompt + reply, where its next turn resumes) to the tiers.
  if (seq->reply_snapshot_at > 0) offer_snapshot(*seq, seq->reply_snapshot_at);
  release_blocks(*seq);
  if (seq->running) {
    running_.erase(std::find(running_.begin(), running_.end(), seq));
  } else if (auto it = std::find(waiting_.begin(), waiting_.end(), seq); it != waiting_.end()) {
    waiting_.erase(it);
  }
  seq->running = false;
  auto owned = std::find_if(owned_.begin(), owned_.end(), [&](const auto& p) { return p.get() == seq; });
  std::unique_ptr<Sequence> out = std::move(*owned);
  owned_.erase(owned);
  return out;
}

std::vector<Sequence*> Scheduler::all() const {
  std::vector<Sequence*> out(running_.begin(), running_.end());
  out.insert(out.end(), waiting_.begin(), waiting_.end());
  return out;
}

// Each block of `pool` has as many references as the sequences' `table`s name it (-1 entries name none), and a
// waiting sequence names none.
void Scheduler::check_refs(const kv::BlockPool& pool, std::vector<int32_t> Sequence::*table, const char* what) const {
  std::vector<int32_t> refs(static_cast<size_t>(pool.n_blocks()), 0);
  for (const auto& seq : owned_) {
    if (!seq->running && !((*seq).*table).empty()) {
      throw std::logic_error("scheduler: waiting sequence " + std::to_string(seq->id) + " holds " + what + "s");
    }
    for (int32_t id : (*seq).*table) {
      if (id >= 0) refs[static_cast<size_t>(id)]++;
    }
  }
  for (int32_t id = 0; id < pool.n_blocks(); ++id) {
    if (refs[static_cast<size_t>(id)] != pool.ref_count(id)) {
      throw std::logic_error("scheduler: " + std::string(what) + " " + std::to_string(id) + " has ref count " +
                             std::to_string(pool.ref_count(id)) + " but sequences hold it " +
                             std::to_string(refs[static_cast<size_t>(id)]) + " times");
    }
  }
}

void Scheduler::check_invariants() const {
  cache_.check_invariants();
  check_refs(cache_.blocks(), &Sequence::block_table, "block");
  if (window_ != nullptr) check_refs(window_->blocks(), &Sequence::window_table, "window block");
  std::unordered_map<kv::Digest, int32_t, kv::DigestHash> expected;
  for (const auto& seq : owned_) {
    for (int32_t b = seq->pending_lo; b < seq->pending_hi; ++b) expected[seq->prompt_hashes()[b]]++;
  }
  if (expected != pending_) throw std::logic_error("scheduler: pending block counts inconsistent");
  if (running_.size() + waiting_.size() != owned_.size()) {
    throw std::logic_error("scheduler: running + waiting != live sequences");
  }
  // State slots: each running sequence holds one (when the model has state layers), a waiting one none.
  int32_t n_held = 0;
  for (const auto& seq : owned_) {
    const bool wants = seq->running && recurrent_;
    if (wants != (seq->state_slot >= 0) || (seq->state_slot >= 0 && !cache_.state_slots().held(seq->state_slot))) {
      throw std::logic_error("scheduler: sequence " + std::to_string(seq->id) + " state slot " +
                             std::to_string(seq->state_slot) + " does not match its state");
    }
    n_held += seq->state_slot >= 0 ? 1 : 0;
  }
  if (n_held != cache_.state_slots().n_slots() - cache_.state_slots().n_free()) {
    throw std::logic_error("scheduler: held state slots differ from the running sequences'");
  }
}

}  // namespace preface::engine
