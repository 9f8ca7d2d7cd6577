// Micro-benchmarks: thread pool call overhead, row dots and matmul throughput (GEMV at 1 token, GEMM at 512) per
// weight type.
//   bytes_per_second: weight bytes read per second; items_per_second: multiply-adds * 2 (FLOP/s).
// The dispatched kernels run: on a CPU with AMX the quantized GEMM at 512 tokens is the AMX path;
// PREFACE_KERNELS=vnni|avx2|scalar selects a narrower one.
#include <benchmark/benchmark.h>

#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "gguf/types.h"
#include "kernels/attention.h"
#include "kernels/delta_rule.h"
#include "kernels/dot.h"
#include "kernels/matmul.h"
#include "kernels/quant.h"
#include "kernels/repack.h"
#include "util/fp16.h"
#include "util/thread_pool.h"

namespace preface::kernels {
namespace {

// Random weights of `type`, n_rows x n_cols. Returns the bytes (row-major GGUF encoding).
std::vector<uint8_t> random_weights(gguf::TensorType type, int64_t n_rows, int64_t n_cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  const size_t n = static_cast<size_t>(n_rows * n_cols);
  std::vector<float> values(n);  // [n_rows][n_cols]
  for (float& v : values) v = uni(rng);
  std::vector<uint8_t> bytes(gguf::row_bytes(type, static_cast<size_t>(n_cols)) * static_cast<size_t>(n_rows));
  switch (type) {
    case gguf::TensorType::F32:
      std::memcpy(bytes.data(), values.data(), n * sizeof(float));
      break;
    case gguf::TensorType::F16:
      f32_to_f16_row(values.data(), reinterpret_cast<uint16_t*>(bytes.data()), n);
      break;
    case gguf::TensorType::BF16:
      f32_to_bf16_row(values.data(), reinterpret_cast<uint16_t*>(bytes.data()), n);
      break;
    case gguf::TensorType::Q8_0:
      quantize_row_q8_0(values.data(), reinterpret_cast<BlockQ8_0*>(bytes.data()), n);
      break;
    case gguf::TensorType::Q4_0: {
      auto* blocks = reinterpret_cast<BlockQ4_0*>(bytes.data());
      for (size_t b = 0; b < n / kQuantBlock; ++b) {
        blocks[b].d = f32_to_f16(uni(rng) * 0.1f);
        for (uint8_t& q : blocks[b].qs) q = static_cast<uint8_t>(rng());
      }
      break;
    }
    default: {  // the types of kernels/quant.h that synth can write
      const QuantTraits* t = quant_traits(type);
      if (t == nullptr) {
        throw std::invalid_argument("kernels_bench: no kernel for " + std::string(gguf::tensor_type_name(type)));
      }
      if (t->quantize != nullptr) {
        t->quantize(values.data(), bytes.data(), n);
        break;
      }
      // No quantizer (Q2_K, Q3_K): random bytes, the 16-bit scales at the types' offsets set to small finite f16.
      for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
      const size_t block_bytes = gguf::row_bytes(type, kQK);
      const size_t d_at = type == gguf::TensorType::Q2_K ? 80 : 108;  // {d, dmin} / d after the levels
      for (size_t at = d_at; at < bytes.size(); at += block_bytes) {
        const uint16_t d = f32_to_f16(uni(rng) * 0.01f);
        std::memcpy(bytes.data() + at, &d, sizeof(d));
        if (type == gguf::TensorType::Q2_K) std::memcpy(bytes.data() + at + 2, &d, sizeof(d));
      }
      break;
    }
  }
  return bytes;
}

void BM_ParallelForOverhead(benchmark::State& state) {
  ThreadPool pool(static_cast<int>(state.range(0)));
  std::vector<float> data(64);  // [64]
  for (auto _ : state) {
    pool.parallel_for(
        64, [&](int64_t b, int64_t e) { for (int64_t i = b; i < e; ++i) data[static_cast<size_t>(i)] += 1.0f; }, 1);
  }
  benchmark::DoNotOptimize(data.data());
}
BENCHMARK(BM_ParallelForOverhead)->Arg(1)->Arg(2)->UseRealTime();

// args: weight type, n_rows, n_cols, n_tokens, threads. With several weight copies (n_copies) cycled through,
// the weights no longer fit in cache and the number approaches memory bandwidth.
void run_matmul(benchmark::State& state, gguf::TensorType type, int n_copies) {
  const int64_t n_rows = state.range(0);
  const int64_t n_cols = state.range(1);
  const int64_t n_tokens = state.range(2);
  ThreadPool pool(static_cast<int>(state.range(3)));
  std::vector<std::vector<uint8_t>> weights;
  std::vector<Matrix> matrices;  // as a model holds them (repack.h: prepare_matrix)
  std::vector<std::vector<uint8_t>> packed(static_cast<size_t>(n_copies));
  for (int c = 0; c < n_copies; ++c) {
    weights.push_back(random_weights(type, n_rows, n_cols, 1234 + c));
    const Matrix w{type, weights.back().data(), n_rows, n_cols};
    matrices.push_back(prepare_matrix(w, packed[static_cast<size_t>(c)]));
  }
  std::vector<float> x(static_cast<size_t>(n_tokens * n_cols), 0.5f);  // [n_tokens][n_cols]
  std::vector<float> y(static_cast<size_t>(n_tokens * n_rows));        // [n_tokens][n_rows]
  std::vector<uint8_t> scratch;
  size_t copy = 0;
  for (auto _ : state) {
    matmul(pool, matrices[copy], x.data(), n_tokens, y.data(), scratch);
    benchmark::DoNotOptimize(y.data());
    copy = (copy + 1) % weights.size();
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(weights[0].size()));
  state.SetItemsProcessed(state.iterations() * 2 * n_rows * n_cols * n_tokens);
}

void BM_MatmulQ8_0(benchmark::State& state) { run_matmul(state, gguf::TensorType::Q8_0, 1); }
void BM_MatmulQ4_0(benchmark::State& state) { run_matmul(state, gguf::TensorType::Q4_0, 1); }
void BM_MatmulF16(benchmark::State& state) { run_matmul(state, gguf::TensorType::F16, 1); }
void BM_MatmulF32(benchmark::State& state) { run_matmul(state, gguf::TensorType::F32, 1); }
void BM_MatmulQ4_K(benchmark::State& state) { run_matmul(state, gguf::TensorType::Q4_K, 1); }
void BM_MatmulQ6_K(benchmark::State& state) { run_matmul(state, gguf::TensorType::Q6_K, 1); }
void BM_MatmulQ3_K(benchmark::State& state) { run_matmul(state, gguf::TensorType::Q3_K, 1); }
void BM_MatmulQ2_K(benchmark::State& state) { run_matmul(state, gguf::TensorType::Q2_K, 1); }
void BM_MatmulIQ4_XS(benchmark::State& state) { run_matmul(state, gguf::TensorType::IQ4_XS, 1); }
void BM_MatmulQ5_0(benchmark::State& state) { run_matmul(state, gguf::TensorType::Q5_0, 1); }
void BM_MatmulIQ4_NL(benchmark::State& state) { run_matmul(state, gguf::TensorType::IQ4_NL, 1); }
// Copies of 2048 x 2048 weights cycled (~430 MB in all, beyond L3): weights come from DRAM, as in decoding a
// large model.
void BM_MatmulQ8_0Dram(benchmark::State& state) { run_matmul(state, gguf::TensorType::Q8_0, 96); }
void BM_MatmulQ4_0Dram(benchmark::State& state) { run_matmul(state, gguf::TensorType::Q4_0, 182); }
void BM_MatmulQ4_KDram(benchmark::State& state) { run_matmul(state, gguf::TensorType::Q4_K, 182); }

#define PREFACE_MATMUL_ARGS                                                                                  \
  ArgNames({"rows", "cols", "tokens", "threads"})                                                            \
      ->Args({2048, 768, 1, 1})                                                                              \
      ->Args({2048, 768, 1, 2})                                                                              \
      ->Args({2048, 768, 8, 1})                                                                              \
      ->Args({2048, 768, 16, 1})                                                                             \
      ->Args({2048, 768, 64, 1})                                                                             \
      ->Args({2048, 768, 512, 1})                                                                            \
      ->Args({2048, 768, 512, 2})                                                                            \
      ->UseRealTime()
BENCHMARK(BM_MatmulQ8_0)->PREFACE_MATMUL_ARGS;
BENCHMARK(BM_MatmulQ4_0)->PREFACE_MATMUL_ARGS;
BENCHMARK(BM_MatmulF16)->PREFACE_MATMUL_ARGS;
BENCHMARK(BM_MatmulF32)->PREFACE_MATMUL_ARGS;
BENCHMARK(BM_MatmulQ4_K)->PREFACE_MATMUL_ARGS;
BENCHMARK(BM_MatmulQ6_K)->PREFACE_MATMUL_ARGS;
BENCHMARK(BM_MatmulQ3_K)->PREFACE_MATMUL_ARGS;
BENCHMARK(BM_MatmulQ2_K)->PREFACE_MATMUL_ARGS;
BENCHMARK(BM_MatmulIQ4_XS)->PREFACE_MATMUL_ARGS;
BENCHMARK(BM_MatmulQ5_0)->PREFACE_MATMUL_ARGS;
BENCHMARK(BM_MatmulIQ4_NL)->PREFACE_MATMUL_ARGS;
#define PREFACE_DRAM_ARGS                         \
  ArgNames({"rows", "cols", "tokens", "threads"}) \
      ->Args({2048, 2048, 1, 1})                  \
      ->Args({2048, 2048, 1, 2})                  \
      ->Args({2048, 2048, 8, 1})                  \
      ->UseRealTime()
BENCHMARK(BM_MatmulQ8_0Dram)->PREFACE_DRAM_ARGS;
BENCHMARK(BM_MatmulQ4_0Dram)->PREFACE_DRAM_ARGS;
BENCHMARK(BM_MatmulQ4_KDram)->PREFACE_DRAM_ARGS;

// Copies of 2048 x 768 weights cycled (~40 MB in all, Q8_0 and Q4_0 alike): beyond L2, within a 300 MiB shared
// L3 (Emerald Rapids), as the 125M model's weights are between decode steps when the machine is quiet; beyond a
// Zen 5 CCX's 32 MiB. The 2-thread rows show what splitting a decode GEMM over two cores gains.
void BM_MatmulQ8_0L3(benchmark::State& state) { run_matmul(state, gguf::TensorType::Q8_0, 24); }
void BM_MatmulQ4_0L3(benchmark::State& state) { run_matmul(state, gguf::TensorType::Q4_0, 44); }
void BM_MatmulQ4_KL3(benchmark::State& state) { run_matmul(state, gguf::TensorType::Q4_K, 40); }
void BM_MatmulQ6_KL3(benchmark::State& state) { run_matmul(state, gguf::TensorType::Q6_K, 28); }
#define PREFACE_L3_ARGS                           \
  ArgNames({"rows", "cols", "tokens", "threads"}) \
      ->Args({2048, 768, 1, 1})                   \
      ->Args({2048, 768, 1, 2})                   \
      ->Args({2048, 768, 8, 1})                   \
      ->Args({2048, 768, 8, 2})                   \
      ->UseRealTime()
BENCHMARK(BM_MatmulQ8_0L3)->PREFACE_L3_ARGS;
BENCHMARK(BM_MatmulQ4_0L3)->PREFACE_L3_ARGS;
BENCHMARK(BM_MatmulQ4_KL3)->PREFACE_L3_ARGS;
BENCHMARK(BM_MatmulQ6_KL3)->PREFACE_L3_ARGS;

void BM_DotQ8_0(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  std::vector<float> xf(n, 0.25f);  // [n]
  std::vector<BlockQ8_0> w(n / kQuantBlock), x(n / kQuantBlock);
  quantize_row_q8_0(xf.data(), w.data(), n);
  quantize_row_q8_0(xf.data(), x.data(), n);
  for (auto _ : state) benchmark::DoNotOptimize(dot_q8_0(w.data(), x.data(), n));
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(w.size() * sizeof(BlockQ8_0)));
}
BENCHMARK(BM_DotQ8_0)->Arg(768)->Arg(4096);

// One token of the Gated DeltaNet state update over every V head of a layer (range 0: head size, 1: V heads; 16 x
// 128 is the layout of Qwen3.5's small models: a 1 MiB state per layer), path by range 2: 0 scalar, 1 AVX2,
// 2 AVX-512. items_per_second: head updates per second. One head alone keeps its 64 KiB state in L2, as a prompt
// does (model/layers/delta_net.cpp runs a head's tokens in a row); 16 cycle a layer's 1 MiB, as decode does.
void BM_DeltaRule(benchmark::State& state) {
  const auto d = static_cast<size_t>(state.range(0)), n_heads = static_cast<size_t>(state.range(1));
  using Fn = void (*)(float*, const float*, const float*, const float*, float, float, float*, float*, size_t);
  const Fn paths[] = {scalar::delta_rule, avx2::delta_rule, avx512::delta_rule};
  if ((state.range(2) == 1 && !avx2::available()) || (state.range(2) == 2 && !avx512::available())) {
    state.SkipWithError("the CPU lacks this path");
    return;
  }
  const Fn fn = paths[state.range(2)];
  std::vector<float> S(n_heads * d * d, 0.01f), q(d, 0.1f), k(d, 0.1f), v(d, 0.2f), out(d), scratch(d);
  for (auto _ : state) {
    for (size_t h = 0; h < n_heads; ++h) fn(S.data() + h * d * d, q.data(), k.data(), v.data(), 0.5f, 0.99f, out.data(), scratch.data(), d);
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(n_heads));
}
BENCHMARK(BM_DeltaRule)
    ->ArgNames({"d", "heads", "path"})
    ->Args({128, 16, 0})
    ->Args({128, 16, 1})
    ->Args({128, 16, 2})
    ->Args({128, 1, 0})
    ->Args({128, 1, 2});

}  // namespace
}  // namespace preface::kernels
