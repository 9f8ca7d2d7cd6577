// STREAM-like memory bandwidth: read (sum a buffer) and copy (memcpy) of `mib` MiB split over `threads` threads,
// best of 5 runs. The buffer is far larger than the caches, so this is DRAM bandwidth — the bound for decoding a
// model that does not fit in cache (docs/performance.md). Each thread reads its share as `streams` equal parts
// walked side by side (as a decode kernel walks several weight rows): one stream alone leaves bandwidth unused.
//   bandwidth [MIB] [THREADS] [STREAMS]
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

// Integer sum of n 64-bit words (n % 8 == 0) in 8 independent partial sums, so that the loop is bound by the
// loads rather than by one add chain (integer adds are associative: the compiler may vectorize them too).
// With several streams, 8 words (one cache line) of each stream in turn. Integer sums: any order gives the same
// result.
uint64_t read_sum(const uint64_t* p, size_t n, size_t n_streams) {
  uint64_t s[8] = {};
  const size_t per_stream = n / n_streams / 8 * 8;
  for (size_t i = 0; i < per_stream; i += 8) {
    for (size_t st = 0; st < n_streams; ++st) {
      const uint64_t* q = p + st * per_stream + i;
      for (size_t k = 0; k < 8; ++k) s[k] += q[k];
    }
  }
  return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

// The same with 256-bit loads (the scalar loop above cannot issue loads fast enough to saturate DRAM).
__attribute__((target("avx2"))) uint64_t read_sum_avx2(const uint64_t* p, size_t n, size_t n_streams) {
  __m256i s0 = _mm256_setzero_si256(), s1 = _mm256_setzero_si256();
  const size_t per_stream = n / n_streams / 8 * 8;
  for (size_t i = 0; i < per_stream; i += 8) {
    for (size_t st = 0; st < n_streams; ++st) {
      const auto* q = reinterpret_cast<const __m256i*>(p + st * per_stream + i);
      s0 = _mm256_add_epi64(s0, _mm256_loadu_si256(q));
      s1 = _mm256_add_epi64(s1, _mm256_loadu_si256(q + 1));
    }
  }
  alignas(32) uint64_t lanes[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), _mm256_add_epi64(s0, s1));
  return (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
}

template <typename Fn>
double seconds_on_threads(int n_threads, Fn fn) {
  const auto t0 = Clock::now();
  std::vector<std::thread> threads;
  for (int t = 0; t < n_threads; ++t) threads.emplace_back(fn, t);
  for (std::thread& th : threads) th.join();
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  const size_t mib = argc > 1 ? static_cast<size_t>(std::atol(argv[1])) : 1024;
  const int n_threads = argc > 2 ? std::max(1, std::atoi(argv[2])) : 1;
  const size_t n_streams = argc > 3 ? static_cast<size_t>(std::max(1, std::atoi(argv[3]))) : 1;
  const size_t n = mib * 1024 * 1024 / sizeof(uint64_t);
  std::vector<uint64_t> a(n, 1), b(n, 2);  // [n] each
  const size_t per_thread = n / static_cast<size_t>(n_threads);
  std::vector<uint64_t> sums(static_cast<size_t>(n_threads));
  const bool avx2 = __builtin_cpu_supports("avx2");
  double best_read = 1e30, best_copy = 1e30;
  for (int rep = 0; rep < 5; ++rep) {
    best_read = std::min(best_read, seconds_on_threads(n_threads, [&](int t) {
      const uint64_t* at = a.data() + static_cast<size_t>(t) * per_thread;
      sums[static_cast<size_t>(t)] =
          avx2 ? read_sum_avx2(at, per_thread, n_streams) : read_sum(at, per_thread, n_streams);
    }));
    best_copy = std::min(best_copy, seconds_on_threads(n_threads, [&](int t) {
      const size_t at = static_cast<size_t>(t) * per_thread;
      std::memcpy(b.data() + at, a.data() + at, per_thread * sizeof(uint64_t));
    }));
  }
  const double bytes = static_cast<double>(per_thread * static_cast<size_t>(n_threads) * sizeof(uint64_t));
  std::printf("%zu MiB, %d threads, %zu streams: read %.2f GB/s, copy %.2f GB/s (read + write)  [checksum %llu]\n",
              mib, n_threads, n_streams, bytes / best_read / 1e9, 2 * bytes / best_copy / 1e9,
              static_cast<unsigned long long>(sums[0] + b[n / 2]));
  return 0;
}
