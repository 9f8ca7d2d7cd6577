// Scenarios for kv::KvCache, the one door to the KV cache: lookups with precomputed block hashes, copy-on-write of
// a partial hit inside the cache (also when the copy throws), abandoning a lookup, and block events fanned out to
// several sinks in order. Every scenario ends with check_invariants().
#include "kv/kv_cache.h"

#include <gtest/gtest.h>

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "util/error.h"

namespace preface::kv {
namespace {

using Ids = std::vector<int32_t>;

constexpr int32_t kBlockSize = 4;
constexpr size_t kRowBytes = 3;  // bytes per token row in the fake storage

Digest demo_ns(std::string_view salt = "") { return namespace_digest("demo-model", "f16", kBlockSize, "rope", salt); }

Ids iota(int32_t first, int32_t n) {
  Ids v(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = first + i;
  return v;
}

std::span<const int32_t> block_of(const Ids& tokens, int32_t i) {
  return std::span<const int32_t>(tokens).subspan(static_cast<size_t>(i) * kBlockSize, kBlockSize);
}

// Host bytes per block: [n_blocks][block_size][kRowBytes]. fail_copies makes copy_block_rows throw.
class FakeStorage final : public BlockStorage {
 public:
  explicit FakeStorage(int32_t n_blocks) : bytes_(static_cast<size_t>(n_blocks) * block_bytes(), 0) {}
  void copy_block_rows(int32_t src, int32_t dst, int32_t n_rows) override {
    if (fail_copies) throw std::runtime_error("copy failed");
    std::copy_n(row(src, 0), static_cast<size_t>(n_rows) * kRowBytes, row(dst, 0));
  }
  size_t block_bytes() const override { return kBlockSize * kRowBytes; }
  void read_block(int32_t block, std::span<uint8_t> out) const override {
    std::copy_n(bytes_.begin() + static_cast<ptrdiff_t>(static_cast<size_t>(block) * block_bytes()), block_bytes(),
                out.begin());
  }
  void write_block(int32_t block, std::span<const uint8_t> in) override {
    std::copy(in.begin(), in.end(), row(block, 0));
  }
  // Fills block's rows with the value `v` (what a forward pass writing K/V would do).
  void fill(int32_t block, uint8_t v) { std::fill_n(row(block, 0), block_bytes(), v); }
  uint8_t at(int32_t block, int32_t slot) const {
    return bytes_[(static_cast<size_t>(block) * kBlockSize + static_cast<size_t>(slot)) * kRowBytes];
  }
  bool fail_copies = false;

 private:
  uint8_t* row(int32_t block, int32_t slot) {
    return bytes_.data() + (static_cast<size_t>(block) * kBlockSize + static_cast<size_t>(slot)) * kRowBytes;
  }
  std::vector<uint8_t> bytes_;
};

// Records every event as "kind:block" and, for Evicted, the first byte the block's storage holds at delivery.
class RecordingSink final : public BlockEventSink {
 public:
  explicit RecordingSink(std::vector<std::string>* log, const BlockStorage* storage = nullptr, std::string tag = "")
      : log_(log), storage_(storage), tag_(std::move(tag)) {}
  void on_block_event(const BlockEvent& e) override {
    std::string line = tag_ + block_event_name(e.kind) + ":" + std::to_string(e.block_id);
    if (storage_ != nullptr && e.kind == BlockEventKind::Evicted) {
      std::vector<uint8_t> record(storage_->block_bytes());
      storage_->read_block(e.block_id, record);
      line += "=" + std::to_string(record[0]);
    }
    log_->push_back(line);
  }

 private:
  std::vector<std::string>* log_;
  const BlockStorage* storage_;
  std::string tag_;
};

// Runs a whole prompt through the cache as the scheduler does: lookup, allocate the rest, copy-on-write, fill the
// computed blocks with `fill`, register the full ones. Returns the block table (held).
Ids admit_and_compute(KvCache& cache, FakeStorage& storage, const Digest& ns, const Ids& prompt, uint8_t fill) {
  const std::vector<Digest> hashes = block_hashes(ns, prompt, kBlockSize);
  const auto cap = static_cast<int32_t>(prompt.size()) - 1;
  const PrefixMatch m = cache.acquire_prefix(ns, prompt, hashes, cap);
  const int32_t n_start = m.n_cached_tokens + m.n_partial_tokens;
  const auto n_blocks = static_cast<int32_t>((prompt.size() + kBlockSize - 1) / kBlockSize);
  const auto fresh = cache.allocate(n_blocks - static_cast<int32_t>(m.block_ids.size()));
  if (!fresh) {
    cache.abandon(m);
    return {};
  }
  Ids table = m.block_ids;
  table.insert(table.end(), fresh->begin(), fresh->end());
  cache.copy_partial(m, fresh->front());
  for (size_t b = m.block_ids.size(); b < table.size(); ++b) {  // "compute": rows past the copied ones
    const int32_t first = b == m.block_ids.size() ? m.n_partial_tokens : 0;
    for (int32_t slot = first; slot < kBlockSize; ++slot) {
      std::vector<uint8_t> rec(storage.block_bytes());
      storage.read_block(table[b], rec);
      std::fill_n(rec.begin() + slot * static_cast<ptrdiff_t>(kRowBytes), kRowBytes, fill);
      storage.write_block(table[b], rec);
    }
  }
  (void)n_start;
  Digest parent = ns;
  for (size_t b = 0; b < hashes.size(); ++b) {
    cache.register_block(ns, table[b], parent, hashes[b], block_of(prompt, static_cast<int32_t>(b)));
    parent = hashes[b];
  }
  return table;
}

TEST(KvCache, FullAndPartialHitsCopyOnWriteInsideTheCache) {
  FakeStorage storage(8);
  KvCache cache(8, kBlockSize, storage);
  const Digest ns = demo_ns();
  const Ids a = iota(1, 10);  // blocks [1..4] [5..8] and a partial [9, 10]
  const Ids a_table = admit_and_compute(cache, storage, ns, a, 7);
  EXPECT_EQ(a_table, (Ids{0, 1, 2}));
  cache.release(a_table);
  cache.check_invariants();

  // B shares block 0 fully and 3 tokens of block 1: a full hit and a copy-on-write of 3 rows.
  Ids b = iota(1, 7);
  b.push_back(100);
  b.push_back(101);
  const std::vector<Digest> hashes = block_hashes(ns, b, kBlockSize);
  const PrefixMatch peek = cache.peek(ns, b, hashes, 8);
  EXPECT_EQ(peek.block_ids, Ids{0});
  EXPECT_EQ(cache.blocks().ref_count(0), 0);  // peek refs nothing
  const PrefixMatch m = cache.acquire_prefix(ns, b, hashes, 8);
  EXPECT_EQ(m.block_ids, Ids{0});
  EXPECT_EQ(m.partial_src_block, 1);
  EXPECT_EQ(m.n_partial_tokens, 3);
  EXPECT_EQ(cache.blocks().ref_count(1), 1);
  const auto fresh = cache.allocate(2);
  ASSERT_TRUE(fresh.has_value());
  storage.fill(fresh->front(), 0);
  cache.copy_partial(m, fresh->front());
  EXPECT_EQ(cache.blocks().ref_count(1), 0);  // the source's lookup ref is dropped
  for (int32_t slot = 0; slot < 3; ++slot) EXPECT_EQ(storage.at(fresh->front(), slot), 7);
  EXPECT_EQ(storage.at(fresh->front(), 3), 0);  // row 3 was not shared
  EXPECT_EQ(cache.stats().n_hit_tokens, 4);
  EXPECT_EQ(cache.stats().n_partial_hit_tokens, 3);
  Ids table = m.block_ids;
  table.insert(table.end(), fresh->begin(), fresh->end());
  cache.release(table);
  cache.check_invariants();
}

TEST(KvCache, LookupsUseTheGivenHashesWithoutRehashing) {
  FakeStorage storage(4);
  KvCache cache(4, kBlockSize, storage);
  const Digest ns = demo_ns();
  const Ids prompt = iota(1, 9);
  // Register block 0 under a hash that is not chain_hash(ns, tokens): only a lookup that trusts the given hashes
  // (instead of hashing the tokens itself) can find it.
  const Digest fake = chain_hash(demo_ns("other"), block_of(prompt, 0));
  const Ids held = *cache.allocate(1);
  EXPECT_TRUE(cache.register_block(ns, held[0], ns, fake, block_of(prompt, 0)));
  cache.release(held);

  const std::vector<Digest> given = {fake};  // covers block 0 only: block 1 is hashed by the cache
  EXPECT_EQ(cache.peek(ns, prompt, given, 8).block_ids, Ids{0});
  EXPECT_EQ(cache.peek(ns, prompt, {}, 8).block_ids, Ids{});  // hashing the tokens finds nothing
  const std::vector<Digest> real = block_hashes(ns, prompt, kBlockSize);
  EXPECT_EQ(cache.peek(ns, prompt, real, 8).block_ids, Ids{});
  cache.check_invariants();
}

TEST(KvCache, AbandonDropsTheLookupsReferences) {
  FakeStorage storage(4);
  KvCache cache(4, kBlockSize, storage);
  const Digest ns = demo_ns();
  const Ids a = iota(1, 9);
  cache.release(admit_and_compute(cache, storage, ns, a, 1));
  Ids b = iota(1, 6);
  b.push_back(50);
  b.push_back(51);
  const PrefixMatch m = cache.acquire_prefix(ns, b, block_hashes(ns, b, kBlockSize), 7);
  EXPECT_EQ(m.block_ids, Ids{0});
  EXPECT_EQ(m.partial_src_block, 1);
  EXPECT_EQ(cache.blocks().n_in_use(), 2);
  cache.abandon(m);
  EXPECT_EQ(cache.blocks().n_in_use(), 0);
  EXPECT_EQ(cache.blocks().n_cached(), 2);
  cache.check_invariants();
}

TEST(KvCache, FailedCopyOnWriteStillDropsTheSourceReference) {
  FakeStorage storage(6);
  KvCache cache(6, kBlockSize, storage);
  const Digest ns = demo_ns();
  cache.release(admit_and_compute(cache, storage, ns, iota(1, 9), 3));
  Ids b = iota(1, 6);
  b.push_back(60);
  b.push_back(61);
  const PrefixMatch m = cache.acquire_prefix(ns, b, block_hashes(ns, b, kBlockSize), 7);
  ASSERT_EQ(m.partial_src_block, 1);
  const auto fresh = cache.allocate(1);
  ASSERT_TRUE(fresh.has_value());
  storage.fail_copies = true;
  EXPECT_THROW(cache.copy_partial(m, fresh->front()), std::runtime_error);
  EXPECT_EQ(cache.blocks().ref_count(1), 0);
  Ids table = m.block_ids;
  table.push_back(fresh->front());
  cache.release(table);  // the caller still owns its table
  EXPECT_EQ(cache.blocks().n_in_use(), 0);
  cache.check_invariants();
}

TEST(KvCache, EventsReachEverySinkInOrder) {
  FakeStorage storage(3);
  KvCache cache(3, kBlockSize, storage);
  const Digest ns = demo_ns("x");
  std::vector<std::string> log;
  RecordingSink first(&log, &storage, "1.");
  RecordingSink second(&log, nullptr, "2.");
  cache.add_event_sink(&first);
  cache.add_event_sink(&second);
  cache.add_event_sink(&first);  // twice: delivered once

  cache.release(admit_and_compute(cache, storage, ns, iota(1, 9), 9));  // blocks 0, 1 registered; 2 free
  EXPECT_EQ(log, (std::vector<std::string>{"1.registered:0", "2.registered:0", "1.registered:1", "2.registered:1"}));
  log.clear();

  // Evict the LRU cached block: the sink reads its old rows (9) at delivery, before the block is reused.
  const auto taken = cache.allocate(2);
  ASSERT_TRUE(taken.has_value());
  EXPECT_EQ(*taken, (Ids{2, 1}));
  EXPECT_EQ(log, (std::vector<std::string>{"1.evicted:1=9", "2.evicted:1"}));
  cache.release(*taken);
  log.clear();

  cache.remove_event_sink(&second);
  cache.set_now(BlockPool::TimePoint{} + std::chrono::seconds(10));
  EXPECT_EQ(cache.expire_idle(BlockPool::TimePoint{} + std::chrono::seconds(5)), 1);  // block 0, idle since 0 s
  EXPECT_EQ(log, (std::vector<std::string>{"1.expired:0"}));
  log.clear();

  const Ids again = admit_and_compute(cache, storage, ns, iota(1, 5), 4);
  EXPECT_EQ(cache.purge_namespace(ns), 1);
  EXPECT_EQ(log, (std::vector<std::string>{"1.registered:" + std::to_string(again[0]),
                                           "1.purged:" + std::to_string(again[0])}));
  cache.release(again);
  cache.check_invariants();
}

TEST(KvCache, RejectsBadSizes) {
  FakeStorage storage(1);
  EXPECT_THROW(KvCache(0, kBlockSize, storage), Error);
  EXPECT_THROW(KvCache(1, 0, storage), Error);
  EXPECT_THROW(KvCache(1, kBlockSize, storage, nullptr, -1), Error);
}

// State slots for recurrent layers: the lowest free slot first, each held once, a double release refused; a cache
// built without slots (no state layers) never gives one.
TEST(KvCache, StateSlotsAreHeldOnceAndReused) {
  FakeStorage storage(4);
  KvCache none(4, kBlockSize, storage);
  EXPECT_EQ(none.acquire_state_slot(), std::nullopt);
  none.check_invariants();

  KvCache cache(4, kBlockSize, storage, nullptr, 3);
  EXPECT_EQ(cache.state_slots().n_slots(), 3);
  EXPECT_EQ(cache.acquire_state_slot(), 0);
  EXPECT_EQ(cache.acquire_state_slot(), 1);
  EXPECT_EQ(cache.acquire_state_slot(), 2);
  EXPECT_EQ(cache.acquire_state_slot(), std::nullopt);
  cache.check_invariants();
  cache.release_state_slot(1);
  cache.release_state_slot(0);
  EXPECT_THROW(cache.release_state_slot(0), std::logic_error);
  EXPECT_THROW(cache.release_state_slot(7), std::logic_error);
  EXPECT_EQ(cache.state_slots().n_free(), 2);
  EXPECT_TRUE(cache.state_slots().held(2));
  EXPECT_EQ(cache.acquire_state_slot(), 0);  // the lowest first
  EXPECT_EQ(cache.acquire_state_slot(), 1);
  cache.check_invariants();
  for (int32_t s : {0, 1, 2}) cache.release_state_slot(s);
  EXPECT_EQ(cache.state_slots().n_free(), 3);
  cache.check_invariants();
}

}  // namespace
}  // namespace preface::kv
