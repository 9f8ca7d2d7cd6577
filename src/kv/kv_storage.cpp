#include "kv/kv_storage.h"

#include <sys/mman.h>

#include <cstring>
#include <string>
#include <vector>

#include "util/bytes.h"
#include "util/error.h"

namespace preface::kv {
namespace {

constexpr size_t kRegionAlign = 64;  // bytes; a cache line

}  // namespace

KvStorage::KvStorage(const model::MemoryLayout& layout, const kernels::KvFormat& type, int32_t block_size, int32_t n_blocks,
                     int32_t n_state_slots, int32_t n_window_blocks)
    : layout_(layout) {
  if (block_size < 1 || n_blocks < 1) {
    throw Error("KV storage needs block_size >= 1 and n_blocks >= 1 (got " + std::to_string(block_size) + ", " +
                std::to_string(n_blocks) + ")");
  }
  if (layout.n_layers() < 1) throw Error("KV storage needs a memory layout with at least one layer");
  if (kernels::kv_type_is_per_channel(type.k) && block_size % kernels::kKvChannelGroup != 0) {
    throw Error(std::string("per-channel keys (") + kernels::kv_type_name(type.k) + ") are sealed in groups of " +
                std::to_string(kernels::kKvChannelGroup) + " positions, which blocks must hold whole: use --block-size " +
                "a multiple of " + std::to_string(kernels::kKvChannelGroup) + " (got " + std::to_string(block_size) +
                ")");
  }
  if (layout.has_state() && (n_state_slots < 1 || n_state_slots > (1 << 20))) {
    throw Error("KV storage: a layout with recurrent state needs 1 to 2^20 state slots (got " +
                std::to_string(n_state_slots) + ")");
  }
  if (n_window_blocks < 0 || (n_window_blocks > 0 && !layout.can_split_windows())) {
    throw Error("KV storage: window blocks (" + std::to_string(n_window_blocks) +
                ") need a layout with both windowed and global paged layers");
  }
  layout.check_type_fits(type);
  view_.format = type;
  view_.n_window_blocks = n_window_blocks;
  view_.block_size = block_size;
  view_.n_blocks = n_blocks;
  view_.n_state_slots = layout.has_state() ? n_state_slots : 0;
  bytes_per_token_ = layout.paged_bytes_per_token(type) -
                     (n_window_blocks > 0 ? layout.windowed_bytes_per_token(type) : 0);
  const size_t main_tokens = static_cast<size_t>(n_blocks) * static_cast<size_t>(block_size);
  const size_t window_tokens = static_cast<size_t>(n_window_blocks) * static_cast<size_t>(block_size);
  // Offsets of each layer's regions; the bases are set once the allocation exists.
  struct Offsets {
    size_t k = 0, v = 0, state = 0;
  };
  std::vector<Offsets> offsets(static_cast<size_t>(layout.n_layers()));
  size_t n_bytes = 0;
  // Each region starts on a kRegionAlign boundary: a Q8_0 region of an odd number of rows ends off the 4-byte
  // alignment a following state region's floats need.
  const auto add = [&n_bytes](size_t bytes) {
    const size_t at = (n_bytes + kRegionAlign - 1) / kRegionAlign * kRegionAlign;
    if (at < n_bytes || __builtin_add_overflow(at, bytes, &n_bytes)) throw Error("KV storage size overflows");
    return at;
  };
  const auto mul = [](size_t a, size_t b) {
    size_t out = 0;
    if (__builtin_mul_overflow(a, b, &out)) throw Error("KV storage size overflows");
    return out;
  };
  view_.layers.resize(offsets.size());
  for (size_t l = 0; l < offsets.size(); ++l) {
    const model::MemorySpec& spec = layout.layers()[l];
    kernels::KvLayerView& lv = view_.layers[l];
    if (spec.kind == model::MemoryKind::PagedRows) {
      lv.k_values = spec.k_row_values();
      lv.v_values = spec.v_row_values();
      lv.window_pool = n_window_blocks > 0 && spec.window > 0;
      const size_t region_tokens = lv.window_pool ? window_tokens : main_tokens;
      offsets[l].k = add(mul(region_tokens, view_.k_row_bytes(static_cast<int>(l))));
      offsets[l].v = add(mul(region_tokens, view_.v_row_bytes(static_cast<int>(l))));
    } else if (spec.kind == model::MemoryKind::State) {
      lv.state_bytes = static_cast<size_t>(spec.state_bytes);
      offsets[l].state = add(mul(static_cast<size_t>(view_.n_state_slots), lv.state_bytes));
    }
  }
  if (n_bytes == 0) throw Error("KV storage: the memory layout stores nothing");
  size_bytes_ = n_bytes;
  // Anonymous pages are zeroed; MAP_POPULATE faults them all in now (see the header), unless they would not fit.
  const int populate = n_bytes <= mem_available_bytes() ? MAP_POPULATE : 0;
  void* p = ::mmap(nullptr, n_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | populate, -1, 0);
  if (p == MAP_FAILED) throw Error("cannot allocate " + std::to_string(n_bytes) + " bytes of KV storage");
  data_ = std::unique_ptr<uint8_t, Unmap>(static_cast<uint8_t*>(p), Unmap{n_bytes});
  for (size_t l = 0; l < offsets.size(); ++l) {
    kernels::KvLayerView& lv = view_.layers[l];
    if (lv.k_values > 0) {
      lv.k = data_.get() + offsets[l].k;
      lv.v = data_.get() + offsets[l].v;
    }
    if (lv.state_bytes > 0) lv.state = data_.get() + offsets[l].state;
  }
}

void KvStorage::Unmap::operator()(uint8_t* p) const { ::munmap(p, n_bytes); }

void KvStorage::copy_rows(int32_t src_block, int32_t dst_block, int32_t n_rows) {
  if (src_block < 0 || src_block >= view_.n_blocks || dst_block < 0 || dst_block >= view_.n_blocks) {
    throw Error("copy_rows: block id out of range");
  }
  if (n_rows < 0 || n_rows > view_.block_size) throw Error("copy_rows: n_rows out of range");
  if (src_block == dst_block || n_rows == 0) return;
  for (size_t l = 0; l < view_.layers.size(); ++l) {
    const int layer = static_cast<int>(l);
    if (view_.layers[l].k == nullptr || view_.layers[l].window_pool) continue;
    const auto rows = static_cast<size_t>(n_rows);
    std::memcpy(view_.k_row(layer, dst_block, 0), view_.k_row(layer, src_block, 0), rows * view_.k_row_bytes(layer));
    std::memcpy(view_.v_row(layer, dst_block, 0), view_.v_row(layer, src_block, 0), rows * view_.v_row_bytes(layer));
  }
}

void KvStorage::read_block(int32_t block, std::span<uint8_t> out) const {
  if (block < 0 || block >= view_.n_blocks) throw Error("read_block: block id out of range");
  if (out.size() != block_bytes()) throw Error("read_block: buffer is not one block");
  const size_t rows = static_cast<size_t>(view_.block_size);
  uint8_t* p = out.data();
  for (size_t l = 0; l < view_.layers.size(); ++l) {
    const int layer = static_cast<int>(l);
    if (view_.layers[l].k == nullptr || view_.layers[l].window_pool) continue;
    std::memcpy(p, view_.k_row(layer, block, 0), rows * view_.k_row_bytes(layer));
    p += rows * view_.k_row_bytes(layer);
    std::memcpy(p, view_.v_row(layer, block, 0), rows * view_.v_row_bytes(layer));
    p += rows * view_.v_row_bytes(layer);
  }
}

void KvStorage::write_block(int32_t block, std::span<const uint8_t> in) {
  if (block < 0 || block >= view_.n_blocks) throw Error("write_block: block id out of range");
  if (in.size() != block_bytes()) throw Error("write_block: buffer is not one block");
  const size_t rows = static_cast<size_t>(view_.block_size);
  const uint8_t* p = in.data();
  for (size_t l = 0; l < view_.layers.size(); ++l) {
    const int layer = static_cast<int>(l);
    if (view_.layers[l].k == nullptr || view_.layers[l].window_pool) continue;
    std::memcpy(view_.k_row(layer, block, 0), p, rows * view_.k_row_bytes(layer));
    p += rows * view_.k_row_bytes(layer);
    std::memcpy(view_.v_row(layer, block, 0), p, rows * view_.v_row_bytes(layer));
    p += rows * view_.v_row_bytes(layer);
  }
}

void KvStorage::read_state(int32_t slot, std::span<uint8_t> out) const {
  if (slot < 0 || slot >= view_.n_state_slots) throw Error("read_state: slot out of range");
  if (out.size() != state_bytes()) throw Error("read_state: buffer is not one state");
  uint8_t* p = out.data();
  for (size_t l = 0; l < view_.layers.size(); ++l) {
    if (view_.layers[l].state == nullptr) continue;
    std::memcpy(p, view_.state(static_cast<int>(l), slot), view_.layers[l].state_bytes);
    p += view_.layers[l].state_bytes;
  }
}

void KvStorage::write_state(int32_t slot, std::span<const uint8_t> in) {
  if (slot < 0 || slot >= view_.n_state_slots) throw Error("write_state: slot out of range");
  if (in.size() != state_bytes()) throw Error("write_state: buffer is not one state");
  const uint8_t* p = in.data();
  for (size_t l = 0; l < view_.layers.size(); ++l) {
    if (view_.layers[l].state == nullptr) continue;
    std::memcpy(view_.state(static_cast<int>(l), slot), p, view_.layers[l].state_bytes);
    p += view_.layers[l].state_bytes;
  }
}

}  // namespace preface::kv
