#include "kv/window_pool.h"

#include <algorithm>
#include <string>

#include "kernels/attention.h"
#include "util/error.h"

namespace preface::kv {

WindowPool::WindowPool(int32_t n_blocks, int32_t block_size, int32_t window)
    : pool_(n_blocks, block_size), window_(window) {
  if (window < 1) throw Error("window pool: window must be >= 1, got " + std::to_string(window));
}

int32_t WindowPool::first_block(int32_t n_computed) const {
  // The next query is at position n_computed: it attends [n_computed + 1 - window, n_computed].
  return kernels::attention_first_read(n_computed + 1, window_) / pool_.block_size();
}

bool WindowPool::extend(std::vector<int32_t>& table, int32_t n_positions) {
  const int32_t n_have = static_cast<int32_t>(table.size());
  const int32_t n_need = (n_positions + pool_.block_size() - 1) / pool_.block_size() - n_have;
  if (n_need <= 0) return true;
  std::optional<std::vector<int32_t>> fresh = pool_.allocate(n_need);
  if (!fresh) return false;
  table.insert(table.end(), fresh->begin(), fresh->end());
  return true;
}

int32_t WindowPool::reclaim(std::vector<int32_t>& table, int32_t n_computed) {
  const auto end = std::min(table.size(), static_cast<size_t>(first_block(n_computed)));
  int32_t n = 0;
  for (size_t b = 0; b < end; ++b) {
    if (table[b] < 0) continue;
    pool_.release(std::span<const int32_t>(&table[b], 1));
    table[b] = -1;
    ++n;
  }
  return n;
}

void WindowPool::release(std::vector<int32_t>& table) {
  std::vector<int32_t> held;
  held.reserve(table.size());
  for (const int32_t id : table) {
    if (id >= 0) held.push_back(id);
  }
  pool_.release(held);  // back to front, like a block table
  table.clear();
}

int32_t WindowPool::longest_hit(const Digest& ns, std::span<const int32_t> tokens, std::span<const Digest> hashes,
                                int32_t max_blocks) const {
  const int32_t bs = pool_.block_size();
  max_blocks = std::min<int32_t>(max_blocks, static_cast<int32_t>(hashes.size()));
  // run: how many blocks up to b are here under the prompt's keys, consecutively.
  int32_t best = 0, run = 0;
  for (int32_t b = 0; b < max_blocks; ++b) {
    const int32_t id = pool_.find(hashes[static_cast<size_t>(b)]);
    bool ok = id >= 0;
    if (ok) {
      const BlockKey& key = pool_.key(id);
      const std::span<const int32_t> want = tokens.subspan(static_cast<size_t>(b) * bs, static_cast<size_t>(bs));
      const std::span<const int32_t> have = pool_.block_tokens(id);
      ok = key.parent_hash == (b == 0 ? ns : hashes[static_cast<size_t>(b) - 1]) &&
           std::equal(want.begin(), want.end(), have.begin(), have.end());
    }
    run = ok ? run + 1 : 0;
    const int32_t j = b + 1;
    if (run >= j - first_block(j * bs)) best = j;
  }
  return best;
}

void WindowPool::acquire_hit(std::span<const Digest> hashes, int32_t n_blocks, std::vector<int32_t>& table) {
  table.assign(static_cast<size_t>(n_blocks), -1);
  const int32_t lo = n_blocks > 0 ? first_block(n_blocks * pool_.block_size()) : 0;
  for (int32_t b = lo; b < n_blocks; ++b) {
    const int32_t id = pool_.find(hashes[static_cast<size_t>(b)]);
    if (id < 0) throw Error("window pool: a block of the hit is not cached");
    pool_.touch(std::span<const int32_t>(&id, 1));
    table[static_cast<size_t>(b)] = id;
  }
}

}  // namespace preface::kv
