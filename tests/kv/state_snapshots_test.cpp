// kv::StateSnapshots: filed under a block hash, least recently used out within the byte budget, purged by
// namespace; and KvStorage's state records (every State layer of a slot, in layer order) move a state verbatim.
#include <gtest/gtest.h>

#include <vector>

#include "kv/kv_storage.h"
#include "kv/state_snapshots.h"
#include "util/error.h"

namespace preface::kv {
namespace {

constexpr SnapshotKind P = SnapshotKind::Prompt;

Digest digest(int i) { return chain_hash(namespace_digest("m", "f16", 4, "rope", ""), std::vector<int32_t>{i}); }

TEST(StateSnapshots, LeastRecentlyUsedOutWithinTheBudget) {
  StateSnapshots s(300);
  const Digest ns = namespace_digest("m", "f16", 4, "rope", "tenant");
  const std::vector<uint8_t> a(100, 1), b(100, 2), c(100, 3), big(301, 4);
  EXPECT_TRUE(s.put(ns, digest(1), P, a));
  EXPECT_TRUE(s.put(ns, digest(2), P, b));
  EXPECT_TRUE(s.put(ns, digest(3), P, c));
  ASSERT_NE(s.get(digest(1)), nullptr);  // 1 becomes the most recent; 2 is now the least
  EXPECT_TRUE(s.put(ns, digest(4), P, a));
  EXPECT_FALSE(s.contains(digest(2)));
  EXPECT_TRUE(s.contains(digest(1)));
  EXPECT_EQ(*s.get(digest(3)), c);
  EXPECT_EQ(s.bytes(), 300u);
  EXPECT_EQ(s.n_evicted(), 1);
  EXPECT_FALSE(s.put(ns, digest(5), P, big));  // alone over the budget: not kept, nothing evicted for it
  EXPECT_EQ(s.n_snapshots(), 3u);
  EXPECT_TRUE(s.put(ns, digest(3), P, b));  // replaces
  EXPECT_EQ(*s.get(digest(3)), b);
  s.check_invariants();
  const Digest other = namespace_digest("m", "f16", 4, "rope", "other");
  EXPECT_TRUE(s.put(other, digest(6), P, std::vector<uint8_t>(10, 6)));
  EXPECT_EQ(s.purge_namespace(ns), 2);  // 3 and 4 (1 was evicted by 6)
  EXPECT_EQ(s.n_snapshots(), 1u);
  EXPECT_TRUE(s.contains(digest(6)));
  s.check_invariants();
  StateSnapshots none(0);
  EXPECT_FALSE(none.put(ns, digest(1), P, a));
  none.check_invariants();
}

// Breakpoint snapshots (a client asked for that prefix) are evicted only when no other kind is left; each kind's
// snapshots taken and hits are counted; erase drops one without counting an eviction.
TEST(StateSnapshots, BreakpointsGoLastAndKindsAreCounted) {
  StateSnapshots s(300);
  const Digest ns = namespace_digest("m", "f16", 4, "rope", "tenant");
  const std::vector<uint8_t> a(100, 1);
  EXPECT_TRUE(s.put(ns, digest(1), SnapshotKind::Breakpoint, a));
  EXPECT_TRUE(s.put(ns, digest(2), SnapshotKind::Reply, a));
  EXPECT_TRUE(s.put(ns, digest(3), SnapshotKind::Junction, a));
  ASSERT_NE(s.get(digest(2)), nullptr);
  EXPECT_TRUE(s.put(ns, digest(4), SnapshotKind::Interval, a));  // 3 goes (the least recent non-breakpoint)
  EXPECT_TRUE(s.contains(digest(1)));
  EXPECT_FALSE(s.contains(digest(3)));
  EXPECT_TRUE(s.put(ns, digest(5), SnapshotKind::Prompt, a));  // 2 goes
  EXPECT_TRUE(s.put(ns, digest(6), SnapshotKind::Prompt, a));  // 4 goes
  EXPECT_TRUE(s.contains(digest(1)));
  EXPECT_TRUE(s.put(ns, digest(7), SnapshotKind::Breakpoint, a));  // 5 goes
  EXPECT_TRUE(s.put(ns, digest(8), SnapshotKind::Breakpoint, a));  // 6 goes: the last non-breakpoint
  EXPECT_TRUE(s.put(ns, digest(9), SnapshotKind::Breakpoint, a));  // only breakpoints left: the oldest, 1, goes
  EXPECT_FALSE(s.contains(digest(1)));
  EXPECT_EQ(s.n_evicted(), 6);
  s.erase(digest(8));
  s.erase(digest(8));
  EXPECT_EQ(s.n_snapshots(), 2u);
  EXPECT_EQ(s.n_evicted(), 6);
  ASSERT_NE(s.get(digest(7)), nullptr);
  const auto idx = [](SnapshotKind k) { return static_cast<size_t>(k); };
  EXPECT_EQ(s.n_taken()[idx(SnapshotKind::Breakpoint)], 4);
  EXPECT_EQ(s.n_taken()[idx(SnapshotKind::Prompt)], 2);
  EXPECT_EQ(s.n_taken()[idx(SnapshotKind::Reply)], 1);
  EXPECT_EQ(s.n_hits()[idx(SnapshotKind::Reply)], 1);
  EXPECT_EQ(s.n_hits()[idx(SnapshotKind::Breakpoint)], 1);
  EXPECT_STREQ(snapshot_kind_name(SnapshotKind::Junction), "junction");
  s.check_invariants();
}

TEST(StateSnapshots, StorageStateRecordsMoveAStateVerbatim) {
  using model::MemorySpec;
  const model::MemoryLayout layout({MemorySpec::state(24), MemorySpec::paged(1, 8, 8), MemorySpec::state(40)});
  KvStorage st(layout, kernels::KvType::F32, 4, 2, /*n_state_slots=*/3);
  ASSERT_EQ(st.state_bytes(), 64u);
  std::vector<uint8_t> rec(64);
  for (size_t i = 0; i < rec.size(); ++i) rec[i] = static_cast<uint8_t>(i + 1);
  st.write_state(2, rec);
  EXPECT_EQ(st.view().state(0, 2)[0], 1);
  EXPECT_EQ(st.view().state(2, 2)[0], 25);  // layer 2's state follows layer 0's in the record
  EXPECT_EQ(st.view().state(0, 1)[0], 0);
  std::vector<uint8_t> back(64);
  st.read_state(2, back);
  EXPECT_EQ(back, rec);
  EXPECT_THROW(st.read_state(3, back), Error);
  std::vector<uint8_t> wrong(63);
  EXPECT_THROW(st.write_state(0, wrong), Error);
}

}  // namespace
}  // namespace preface::kv
