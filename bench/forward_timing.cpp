// Times Model::forward directly (no engine): prefill of a prompt and decode steps of a batch of sequences at a
// given context, best of several repetitions (the minimum is the least disturbed by other load on the machine);
// several --decode specs take their repetitions in turn.
//   forward_timing MODEL THREADS [--prefill N ...] [--decode BATCH CONTEXT ...] [--reps R]
// Prints wall ms, tok/s and the process CPU ms of the best repetition; with 2+ threads, first the round trip of a
// cache line between the first two CPUs the process may run on (see core_round_trip_ns).
#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "model/model.h"

namespace {

using preface::ThreadPool;
using preface::model::ForwardBatch;
using preface::kernels::KvType;
using preface::kernels::KvView;
using preface::model::Model;

double cpu_ms() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return (u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1e3 + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e3;
}

// F16 KV storage for n_seqs sequences of up to n_pos positions each; sequence s owns blocks s * per_seq...
struct Kv {
  Kv(const preface::model::Config& c, int32_t n_seqs, int32_t n_pos) {
    view.format = KvType::F16;
    view.block_size = 16;
    const int32_t per_seq = (n_pos + 15) / 16;
    view.n_blocks = per_seq * n_seqs;
    const size_t region = static_cast<size_t>(view.n_blocks) * 16 *
                          preface::kernels::kv_row_bytes(KvType::F16, static_cast<size_t>(c.kv_row_values()));
    bytes.assign(region * 2 * static_cast<size_t>(c.n_layers), 0);
    for (int32_t l = 0; l < c.n_layers; ++l) {
      preface::kernels::KvLayerView layer;
      layer.k = bytes.data() + 2 * static_cast<size_t>(l) * region;
      layer.v = bytes.data() + (2 * static_cast<size_t>(l) + 1) * region;
      layer.k_values = layer.v_values = c.kv_row_values();
      view.layers.push_back(layer);
    }
    for (int32_t s = 0; s < n_seqs; ++s) {
      tables.emplace_back();
      for (int32_t b = 0; b < per_seq; ++b) tables.back().push_back(s * per_seq + b);
    }
  }
  std::vector<uint8_t> bytes;
  KvView view;
  std::vector<std::vector<int32_t>> tables;  // [n_seqs][blocks]
};

// Two threads pinned to the first two allowed CPUs pass one cache line back and forth; returns the mean ns per
// round trip, or a negative value when fewer than two CPUs are allowed. On a VM whose host moves the vCPUs between
// cores sharing an L3 and cores on different L3s it tells the two apart (~100 - 200 ns against ~450 - 600 ns on
// the Zen 5 guest of docs/performance.md), and 2-thread decode batches run measurably slower in the second case.
double core_round_trip_ns() {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) return -1;
  int cpus[2], n_found = 0;
  for (int cpu = 0; cpu < CPU_SETSIZE && n_found < 2; ++cpu) {
    if (CPU_ISSET(cpu, &allowed)) cpus[n_found++] = cpu;
  }
  if (n_found < 2) return -1;
  const auto pin = [](int cpu) {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    pthread_setaffinity_np(pthread_self(), sizeof(one), &one);
  };
  constexpr int kRounds = 100000;
  alignas(64) std::atomic<int> line{0};  // 2i + 1: round i's message to the second thread; 2i + 2: its answer
  std::thread other([&] {
    pin(cpus[1]);
    for (int i = 0; i < kRounds; ++i) {
      while (line.load(std::memory_order_acquire) != 2 * i + 1) {
      }
      line.store(2 * i + 2, std::memory_order_release);
    }
  });
  pin(cpus[0]);
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < kRounds; ++i) {
    line.store(2 * i + 1, std::memory_order_release);
    while (line.load(std::memory_order_acquire) != 2 * i + 2) {
    }
  }
  const double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count();
  other.join();
  sched_setaffinity(0, sizeof(allowed), &allowed);  // unpin the main thread before the pool's workers start
  return ns / kRounds;
}

struct Timing {
  double wall_ms = 1e300, cpu_ms = 0;
};

template <typename Fn>
Timing best_of(int reps, Fn fn) {
  Timing best;
  for (int r = 0; r < reps; ++r) {
    const double c0 = cpu_ms();
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    const double wall = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (wall < best.wall_ms) best = {wall, cpu_ms() - c0};
  }
  return best;
}

int32_t token_at(int32_t n_vocab, int64_t i) { return static_cast<int32_t>(3 + (i * 7919) % (n_vocab - 3)); }

// Feeds positions [begin, end) of every sequence in batches of at most max_batch tokens, sequences interleaved.
void feed(Model& m, ThreadPool& pool, Kv& kv, int32_t n_seqs, int32_t begin, int32_t end, std::vector<float>& logits) {
  ForwardBatch batch;
  for (auto& t : kv.tables) batch.block_tables.push_back(&t);
  const int32_t max_batch = m.max_batch_tokens();
  for (int32_t s = 0; s < n_seqs; ++s) {
    for (int32_t p = begin; p < end;) {
      batch.clear();
      for (; p < end && static_cast<int32_t>(batch.size()) < max_batch; ++p) {
        batch.add(token_at(m.config().n_vocab, p + 131 * s), p, s, p == end - 1);
      }
      m.forward(batch, kv.view, pool, logits.data());
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s MODEL THREADS [--prefill N ...] [--decode BATCH CONTEXT ...] [--reps R]\n",
                 argv[0]);
    return 2;
  }
  std::vector<int32_t> prefills;
  std::vector<std::pair<int32_t, int32_t>> decodes;
  int reps = 3;
  for (int i = 3; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--prefill") && i + 1 < argc) {
      prefills.push_back(std::atoi(argv[++i]));
    } else if (!std::strcmp(argv[i], "--decode") && i + 2 < argc) {
      decodes.emplace_back(std::atoi(argv[i + 1]), std::atoi(argv[i + 2]));
      i += 2;
    } else if (!std::strcmp(argv[i], "--reps") && i + 1 < argc) {
      reps = std::atoi(argv[++i]);
    }
  }
  const int n_threads = std::atoi(argv[2]);
  if (n_threads >= 2) {
    const double round_trip_ns = core_round_trip_ns();
    if (round_trip_ns > 0) std::printf("core round trip  : %9.0f ns\n", round_trip_ns);
  }
  auto m = Model::load(argv[1], 512);
  ThreadPool pool(n_threads);
  const auto& c = m->config();
  std::vector<float> logits(static_cast<size_t>(c.n_vocab) * 512);
  for (int32_t n : prefills) {
    Kv kv(c, 1, n);
    const Timing t = best_of(reps, [&] { feed(*m, pool, kv, 1, 0, n, logits); });
    std::printf("prefill %5d          : %9.1f ms  %8.1f tok/s  cpu %9.1f ms\n", n, t.wall_ms, n / t.wall_ms * 1e3,
                t.cpu_ms);
  }
  // Decode specs take their repetitions in turn (spec 0 rep 0, spec 1 rep 0, ...), so that a ratio between them
  // (batch 8 against batch 1) compares repetitions from the same minutes of a shared machine's load.
  constexpr int32_t kSteps = 8;
  struct Decode {
    int32_t n_seqs, ctx;
    std::unique_ptr<Kv> kv;
    int32_t pos;
    Timing best;
  };
  std::vector<Decode> runs;
  for (auto [n_seqs, ctx] : decodes) {
    runs.push_back({n_seqs, ctx, std::make_unique<Kv>(c, n_seqs, ctx + kSteps * reps + 1), ctx + 1, {}});
    feed(*m, pool, *runs.back().kv, n_seqs, 0, ctx + 1, logits);
  }
  for (int r = 0; r < reps; ++r) {
    for (Decode& d : runs) {
      ForwardBatch batch;
      for (auto& tbl : d.kv->tables) batch.block_tables.push_back(&tbl);
      const Timing t = best_of(1, [&] {
        for (int step = 0; step < kSteps; ++step, ++d.pos) {
          batch.clear();
          for (int32_t s = 0; s < d.n_seqs; ++s) batch.add(token_at(c.n_vocab, d.pos + s), d.pos, s, true);
          m->forward(batch, d.kv->view, pool, logits.data());
        }
      });
      if (t.wall_ms < d.best.wall_ms) d.best = t;
    }
  }
  for (const Decode& d : runs) {
    std::printf("decode  batch %2d ctx %5d: %9.2f ms/step %8.1f tok/s  cpu %7.2f ms/step\n", d.n_seqs, d.ctx,
                d.best.wall_ms / kSteps, d.n_seqs * kSteps / d.best.wall_ms * 1e3, d.best.cpu_ms / kSteps);
  }
  return 0;
}
