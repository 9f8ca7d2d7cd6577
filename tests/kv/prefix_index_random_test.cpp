// A randomized serving loop over PrefixIndex + BlockPool, checking invariants, ref counts and every match.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <utility>

#include "kv/prefix_index.h"

namespace preface::kv {
namespace {

using Ids = std::vector<int32_t>;

constexpr int32_t kBlockSize = 4;
constexpr char kModel[] = "demo-model";
constexpr char kRope[] = "rope:neox,base=10000,dim=64";

Digest demo_ns(std::string_view salt = "") { return namespace_digest(kModel, "f16", kBlockSize, kRope, salt); }

std::span<const int32_t> block_of(const Ids& tokens, int32_t i) {
  return std::span<const int32_t>(tokens).subspan(static_cast<size_t>(i) * kBlockSize, kBlockSize);
}

// A serving loop in miniature on a tiny pool with a 3-token vocabulary (so prefixes are shared often): sequences
// start with a prefix match, decode, finish or get preempted; blocks are pinned, unpinned and purged. After each
// step: the pool invariants, every ref count equal to the number of running sequences holding the block, and every
// match verified against the prompt.
TEST(PrefixIndex, RandomizedServingKeepsInvariants) {
  constexpr int32_t kBlocks = 12;
  constexpr int32_t kMaxLen = 40;
  BlockPool pool(kBlocks, kBlockSize);
  PrefixIndex index(pool);
  const Digest namespaces[2] = {demo_ns(), demo_ns("tenant-b")};
  std::mt19937 rng(42);
  auto pick = [&](int32_t n) { return static_cast<int32_t>(rng() % static_cast<uint32_t>(n)); };

  struct Seq {
    int ns = 0;
    Ids tokens;
    Ids blocks;        // [ceil(tokens / block_size)]
    Digest last_hash;  // chain hash of block n_registered - 1 (the namespace when 0)
    int32_t n_registered = 0;
  };
  std::vector<Seq> running;
  std::vector<std::pair<int, Ids>> history;  // recent prompts, to share prefixes with
  std::vector<int32_t> pinned;               // one entry per pin the test holds
  int64_t n_rejected = 0, n_preempted = 0;

  auto register_filled = [&](Seq& seq) {
    while ((seq.n_registered + 1) * kBlockSize <= static_cast<int32_t>(seq.tokens.size())) {
      seq.last_hash = index.register_full_block(namespaces[seq.ns], seq.blocks[static_cast<size_t>(seq.n_registered)],
                                                seq.last_hash, block_of(seq.tokens, seq.n_registered));
      ++seq.n_registered;
    }
  };
  auto finish = [&](size_t i) {
    pool.release(running[i].blocks);
    running.erase(running.begin() + static_cast<ptrdiff_t>(i));
  };

  for (int step = 0; step < 6000; ++step) {
    const int op = pick(10);
    if (op <= 2) {  // a new request
      int ns = pick(2);
      Ids prompt;
      if (!history.empty() && pick(4) != 0) {
        const auto& [h_ns, h_prompt] = history[static_cast<size_t>(pick(static_cast<int32_t>(history.size())))];
        prompt.assign(h_prompt.begin(), h_prompt.begin() + pick(static_cast<int32_t>(h_prompt.size()) + 1));
        if (pick(4) != 0) ns = h_ns;
      }
      for (int32_t n_extra = 1 + pick(8); n_extra > 0; --n_extra) prompt.push_back(pick(3));
      const int32_t cap = static_cast<int32_t>(prompt.size()) - 1;
      const PrefixMatch m = index.match_and_acquire(namespaces[ns], prompt, cap);

      const auto k = static_cast<int32_t>(m.block_ids.size());
      const auto hashes = block_hashes(namespaces[ns], prompt, kBlockSize);
      ASSERT_EQ(m.n_cached_tokens, k * kBlockSize);
      for (int32_t i = 0; i < k; ++i) {
        const int32_t id = m.block_ids[static_cast<size_t>(i)];
        const auto stored = pool.block_tokens(id);
        ASSERT_TRUE(std::equal(stored.begin(), stored.end(), block_of(prompt, i).begin()));
        ASSERT_EQ(pool.key(id).hash, hashes[static_cast<size_t>(i)]);
      }
      ASSERT_EQ(m.last_hash, k == 0 ? namespaces[ns] : hashes[static_cast<size_t>(k - 1)]);
      if ((k + 1) * kBlockSize <= cap) {  // longest: block k is not a confirmed hit
        const int32_t id = pool.find(hashes[static_cast<size_t>(k)]);
        if (id >= 0) {
          const auto stored = pool.block_tokens(id);
          ASSERT_FALSE(std::equal(stored.begin(), stored.end(), block_of(prompt, k).begin()));
        }
      }
      ASSERT_LE(m.n_cached_tokens + m.n_partial_tokens, cap);
      ASSERT_LT(m.n_partial_tokens, kBlockSize);
      if (m.partial_src_block >= 0) {
        ASSERT_GT(m.n_partial_tokens, 0);
        ASSERT_EQ(pool.key(m.partial_src_block).parent_hash, m.last_hash);
        const auto stored = pool.block_tokens(m.partial_src_block);
        ASSERT_TRUE(std::equal(stored.begin(), stored.begin() + m.n_partial_tokens,
                               prompt.begin() + m.n_cached_tokens));
      } else {
        ASSERT_EQ(m.n_partial_tokens, 0);
      }

      const auto n_needed = static_cast<int32_t>(prompt.size() + kBlockSize - 1) / kBlockSize;
      const auto fresh = pool.allocate(n_needed - k);
      if (m.partial_src_block >= 0) pool.release(Ids{m.partial_src_block});  // rows copied (or not needed)
      if (!fresh) {
        pool.release(m.block_ids);
        ++n_rejected;
      } else {
        Seq seq{ns, prompt, m.block_ids, m.last_hash, k};
        seq.blocks.insert(seq.blocks.end(), fresh->begin(), fresh->end());
        register_filled(seq);
        running.push_back(std::move(seq));
        history.emplace_back(ns, prompt);
        if (history.size() > 16) history.erase(history.begin());
      }
    } else if (op <= 5 && !running.empty()) {  // decode one token
      const size_t i = static_cast<size_t>(pick(static_cast<int32_t>(running.size())));
      Seq& seq = running[i];
      seq.tokens.push_back(pick(3));
      bool ok = static_cast<int32_t>(seq.tokens.size()) <= kMaxLen;
      if (ok && seq.tokens.size() > seq.blocks.size() * kBlockSize) {
        const auto more = pool.allocate(1);
        ok = more.has_value();
        if (ok) seq.blocks.push_back((*more)[0]);
        else ++n_preempted;
      }
      if (ok) register_filled(seq);
      else finish(i);
    } else if (op <= 7 && !running.empty()) {
      finish(static_cast<size_t>(pick(static_cast<int32_t>(running.size()))));
    } else if (op == 8) {  // pin a registered block, or drop a pin
      if (!pinned.empty() && pick(2) == 0) {
        const size_t j = static_cast<size_t>(pick(static_cast<int32_t>(pinned.size())));
        pool.unpin(pinned[j]);
        pinned.erase(pinned.begin() + static_cast<ptrdiff_t>(j));
      } else if (const int32_t id = pick(kBlocks); pool.is_registered(id) && pinned.size() < 4) {
        pool.pin(id);
        pinned.push_back(id);
      }
    } else if (op == 9 && pick(30) == 0) {
      pool.purge_namespace(namespaces[pick(2)]);
      std::erase_if(pinned, [&](int32_t id) { return pool.pin_count(id) == 0; });
    }

    ASSERT_NO_THROW(pool.check_invariants()) << "step " << step;
    std::vector<int32_t> refs(kBlocks, 0), pins(kBlocks, 0);
    for (const Seq& seq : running) {
      for (const int32_t id : seq.blocks) ++refs[static_cast<size_t>(id)];
    }
    for (const int32_t id : pinned) ++pins[static_cast<size_t>(id)];
    for (int32_t id = 0; id < kBlocks; ++id) {
      ASSERT_EQ(pool.ref_count(id), refs[static_cast<size_t>(id)]) << "block " << id << " step " << step;
      ASSERT_EQ(pool.pin_count(id), pins[static_cast<size_t>(id)]) << "block " << id << " step " << step;
    }
  }
  const PrefixStats& s = index.stats();
  std::printf("queries %lld hit blocks %lld/%lld partial tokens %lld evictions %lld rejected %lld preempted %lld\n",
              static_cast<long long>(s.n_queries), static_cast<long long>(s.n_hit_blocks),
              static_cast<long long>(s.n_query_blocks), static_cast<long long>(s.n_partial_hit_tokens),
              static_cast<long long>(pool.n_evictions()), static_cast<long long>(n_rejected),
              static_cast<long long>(n_preempted));
  EXPECT_GT(s.n_hit_blocks, 200);
  EXPECT_GT(s.n_partial_hit_tokens, 100);
  EXPECT_GT(pool.n_evictions(), 100);
  EXPECT_GT(n_rejected + n_preempted, 10);
  EXPECT_EQ(s.n_collisions, 0);
}

}  // namespace
}  // namespace preface::kv
