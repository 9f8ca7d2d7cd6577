// Micro-benchmarks: attention over paged F16 blocks (a decode tile, a prefill tile, one decode token's KV heads
// together), RMSNorm, RoPE and SwiGLU at the 125M model's sizes. items_per_second: multiply-adds (attention) or
// values (others) per second.
// The dispatched kernels run (PREFACE_KERNELS=scalar|avx2|vnni selects a narrower path).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "kernels/attention.h"
#include "kernels/ops.h"
#include "util/fp16.h"

namespace preface::kernels {
namespace {

std::vector<float> random_values(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  std::vector<float> v(n);  // [n]
  for (float& f : v) f = uni(rng);
  return v;
}

// The 125M model's attention shape: 4 KV heads of 64 values, 3 query heads each, F16 rows in blocks of 16.
constexpr size_t kHeadDim = 64, kKvHeads = 4, kGroup = 3;
constexpr int32_t kBlock = 16;
constexpr size_t kRowBytes = kKvHeads * kHeadDim * 2;

// Random F16 K and V rows of n_pos positions, each [n_blocks][kBlock][kKvHeads][kHeadDim], and a block table.
struct F16Pages {
  F16Pages(int32_t n_pos, uint32_t seed) : n_blocks((n_pos + kBlock - 1) / kBlock) {
    const size_t n = static_cast<size_t>(n_blocks) * kBlock * kRowBytes / 2;
    const auto values = random_values(2 * n, seed);  // K then V
    k.resize(n);
    v.resize(n);
    for (size_t i = 0; i < n; ++i) {
      k[i] = f32_to_f16(values[i]);
      v[i] = f32_to_f16(values[n + i]);
    }
  }
  // KV head `head` of these rows, block b at table[b].
  KvPages pages(const std::vector<int32_t>& table, size_t head) const {
    KvPages p;
    p.k_type = KvType::F16;
    p.v_type = KvType::F16;
    p.k_base = reinterpret_cast<const uint8_t*>(k.data());
    p.v_base = reinterpret_cast<const uint8_t*>(v.data());
    p.block_table = table.data();
    p.block_size = kBlock;
    p.k_row_bytes = kRowBytes;
    p.v_row_bytes = kRowBytes;
    p.head_value = head * kHeadDim;
    return p;
  }
  int32_t n_blocks;
  std::vector<uint16_t> k, v;
};

// args: context positions, tokens in the tile (x 3 query heads per KV head, as the 125M model's GQA).
void BM_AttentionTile(benchmark::State& state) {
  const int32_t n_pos = static_cast<int32_t>(state.range(0));
  const size_t n_tokens = static_cast<size_t>(state.range(1));
  const F16Pages kv(n_pos, 1);
  std::vector<int32_t> table(static_cast<size_t>(kv.n_blocks));  // blocks in reverse order
  for (int32_t b = 0; b < kv.n_blocks; ++b) table[static_cast<size_t>(b)] = kv.n_blocks - 1 - b;
  const size_t n_queries = n_tokens * kGroup;
  const auto q = random_values(n_queries * kHeadDim, 2);
  std::vector<float> out(n_queries * kHeadDim);  // [n_queries][kHeadDim]
  std::vector<AttnQuery> queries;
  for (size_t j = 0; j < n_queries; ++j) {
    queries.push_back({q.data() + j * kHeadDim, out.data() + j * kHeadDim,
                       n_pos - static_cast<int32_t>(n_tokens - 1 - j / kGroup)});
  }
  AttnTile tile;
  tile.kv = kv.pages(table, 1);
  tile.head_dim = kHeadDim;
  tile.scale = 1.0f / std::sqrt(static_cast<float>(kHeadDim));
  tile.queries = queries.data();
  tile.n_queries = queries.size();
  std::vector<float> scratch(attention_scratch_floats(kHeadDim, queries.size()));
  for (auto _ : state) {
    attention_tile(tile, scratch.data());
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(2 * n_queries * kHeadDim) * n_pos);
}
BENCHMARK(BM_AttentionTile)->ArgNames({"positions", "tokens"})->Args({1024, 1})->Args({4096, 1})->Args({512, 8});

// One decode token's attention as the 125M model runs it: attention_tiles over its 4 KV heads (3 query heads each)
// at `positions` context, blocks in shuffled order, cycling through `sequences` separate K/V stores so that, with
// many, the rows come from L3 or memory as they do for a batch of sequences across layers. One position shows the
// fixed cost of a call (query rounding, online-softmax bookkeeping, the final division).
void BM_AttentionDecode(benchmark::State& state) {
  const int32_t n_pos = static_cast<int32_t>(state.range(0));
  const size_t n_seqs = static_cast<size_t>(state.range(1));
  std::vector<F16Pages> kv;
  for (size_t s = 0; s < n_seqs; ++s) kv.emplace_back(n_pos, static_cast<uint32_t>(10 + s));
  std::vector<int32_t> table(static_cast<size_t>(kv[0].n_blocks));  // [n_blocks]
  for (int32_t b = 0; b < kv[0].n_blocks; ++b) table[static_cast<size_t>(b)] = b;
  std::shuffle(table.begin(), table.end(), std::mt19937(3));
  const auto q = random_values(kKvHeads * kGroup * kHeadDim, 4);
  std::vector<float> out(q.size());  // [kKvHeads * kGroup][kHeadDim]
  std::vector<AttnQuery> queries;
  for (size_t j = 0; j < kKvHeads * kGroup; ++j) {
    queries.push_back({q.data() + j * kHeadDim, out.data() + j * kHeadDim, n_pos});
  }
  const size_t stride = attention_scratch_floats(kHeadDim, kGroup);
  std::vector<float> scratch(kKvHeads * stride);
  std::vector<AttnTile> tiles(kKvHeads);
  size_t seq = 0;
  for (auto _ : state) {
    for (size_t h = 0; h < kKvHeads; ++h) {
      tiles[h].kv = kv[seq].pages(table, h);
      tiles[h].head_dim = kHeadDim;
      tiles[h].scale = 0.125f;
      tiles[h].queries = queries.data() + h * kGroup;
      tiles[h].n_queries = kGroup;
    }
    attention_tiles(tiles.data(), kKvHeads, scratch.data(), stride);
    benchmark::DoNotOptimize(out.data());
    seq = (seq + 1) % n_seqs;
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(2 * kKvHeads * kGroup * kHeadDim) * n_pos);
}
BENCHMARK(BM_AttentionDecode)
    ->ArgNames({"positions", "sequences"})
    ->Args({1, 1})
    ->Args({16, 1})
    ->Args({80, 1})
    ->Args({80, 96})
    ->Args({1024, 96});

void BM_RmsNorm(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  const auto x = random_values(n, 3), w = random_values(n, 4);
  std::vector<float> out(n);
  for (auto _ : state) {
    rmsnorm(x.data(), w.data(), out.data(), n, 1e-5f);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(n));
}
BENCHMARK(BM_RmsNorm)->Arg(768)->Arg(4096);

// One token's q (12 heads) rotated: cos/sin computed, then applied (as rope() does).
void BM_Rope(benchmark::State& state) {
  const size_t n_heads = static_cast<size_t>(state.range(0)), head_dim = 64;
  auto x = random_values(n_heads * head_dim, 5);
  int pos = 0;
  for (auto _ : state) {
    rope(x.data(), n_heads, head_dim, head_dim, pos++ % 4096, 10000.0f, false);
    benchmark::DoNotOptimize(x.data());
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(n_heads * head_dim));
}
BENCHMARK(BM_Rope)->Arg(12)->Arg(32);

void BM_Swiglu(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  const auto gate0 = random_values(n, 6), up = random_values(n, 7);
  auto gate = gate0;
  for (auto _ : state) {
    gate = gate0;
    swiglu(gate.data(), up.data(), n);
    benchmark::DoNotOptimize(gate.data());
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(n));
}
BENCHMARK(BM_Swiglu)->Arg(2048);

}  // namespace
}  // namespace preface::kernels
