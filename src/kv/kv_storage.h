// Physical storage of every layer's memory (model/base/memory.h): one zeroed allocation holding, per layer with
// paged rows, K and V as [n_blocks][block_size][row bytes] of one dtype (the row widths are the layer's), and per
// layer with a recurrent state, n_state_slots slots of its state bytes. It knows nothing of which sequence owns
// which block or slot; block tables (built by the caller or a block pool) map a sequence's positions to block ids.
//
// The allocation is faulted in when it is made (when it fits in the memory the kernel reports available), not on
// the first write of each page while serving: a block pool with prefix caching hands out never-used blocks before
// evicting cached ones, so lazily mapped storage made a cache-on server fault in new pages for the whole pool
// while it served (a workload with no shared prefixes ran measurably slower than on a cache-off server, which
// recycles the same few blocks; measurements in docs/perf-log/session-08.md).
//
// Memory layout, in layer order: a paged layer's K region then its V region (each n_blocks * block_size rows of
// kv_row_bytes(type, row values) bytes; Q8_0: 34 bytes per 32 values), a state layer's n_state_slots slots; each
// region starts on a 64-byte boundary (size_bytes() counts the padding).
//
// With n_window_blocks > 0 (a layout that can_split_windows), the windowed paged layers' regions hold
// n_window_blocks blocks of a second id space (kv/window_pool.h) and are marked window_pool in the view; block
// ids, records and copies below then address the other paged layers only (the main pool).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "kernels/kv_view.h"
#include "model/base/memory.h"

namespace preface::kv {

class KvStorage {
 public:
  // Throws preface::Error when a size is not positive or too large, per-channel keys meet a block size that is not
  // a multiple of kernels::kKvChannelGroup, the type cannot store a paged layer's heads
  // (MemoryLayout::check_type_fits: a block type needs rows of whole 32-value blocks; rotation heads of 64s) or the allocation fails. n_state_slots:
  // slots per state layer (>= 1 when the layout has one; ignored otherwise).
  // n_window_blocks: 0, or the windowed layers' own block count (throws when the layout cannot split windows).
  KvStorage(const model::MemoryLayout& layout, const kernels::KvFormat& type, int32_t block_size, int32_t n_blocks,
            int32_t n_state_slots = 0, int32_t n_window_blocks = 0);
  KvStorage(const KvStorage&) = delete;
  KvStorage& operator=(const KvStorage&) = delete;
  KvStorage(KvStorage&&) noexcept = default;
  KvStorage& operator=(KvStorage&&) noexcept = default;

  // Pointers into this storage: valid while it lives (and across moves, which keep the allocation).
  const kernels::KvView& view() const { return view_; }
  const kernels::KvFormat& format() const { return view_.format; }
  int32_t n_blocks() const { return view_.n_blocks; }
  int32_t block_size() const { return view_.block_size; }
  int32_t n_state_slots() const { return view_.n_state_slots; }
  int32_t n_window_blocks() const { return view_.n_window_blocks; }
  const model::MemoryLayout& layout() const { return layout_; }
  // K and V of one token over the main pool's paged layers (MemoryLayout::paged_bytes_per_token, less the
  // windowed layers' bytes when they have a pool of their own).
  size_t bytes_per_token() const { return bytes_per_token_; }
  size_t size_bytes() const { return size_bytes_; }  // the whole allocation, states and padding included

  // Copies slots [0, n_rows) of src_block to dst_block, K and V of every paged layer (copy-on-write of a partial
  // block). Throws preface::Error on an out-of-range block id or n_rows; src == dst is a no-op.
  void copy_rows(int32_t src_block, int32_t dst_block, int32_t n_rows);

  // One block's K and V as a flat record of block_bytes() bytes, in paged-layer order: layer 0 K rows | layer 0 V
  // rows | layer 1 K rows | ... (block_size rows each; states are not part of a block). A record read from one
  // block and written to another (of storage with the same layout, type and block size, in any process) makes the
  // two blocks hold the same bytes, so attention over them gives the same bits. Both throw preface::Error on an
  // out-of-range block id or a buffer of another size.
  size_t block_bytes() const { return bytes_per_token() * static_cast<size_t>(view_.block_size); }
  void read_block(int32_t block, std::span<uint8_t> out) const;
  void write_block(int32_t block, std::span<const uint8_t> in);

  // One state slot of every State layer, in layer order, as a record of state_bytes() bytes (kv::BlockStorage).
  // Both throw preface::Error on an out-of-range slot or a buffer of another size.
  size_t state_bytes() const { return static_cast<size_t>(layout_.state_bytes_per_sequence()); }
  void read_state(int32_t slot, std::span<uint8_t> out) const;
  void write_state(int32_t slot, std::span<const uint8_t> in);

 private:
  struct Unmap {
    size_t n_bytes;  // of the mapping
    void operator()(uint8_t* p) const;
  };
  std::unique_ptr<uint8_t, Unmap> data_;  // the regions, in the order of the header
  model::MemoryLayout layout_;
  size_t bytes_per_token_ = 0;
  size_t size_bytes_ = 0;
  kernels::KvView view_;
};

}  // namespace preface::kv
