// Where the K/V bytes of the paged cache live, addressed by block id only: what kv::KvCache needs of storage for
// copy-on-write and for moving blocks to and from the tiers below RAM. The engine's Backend provides it (the CPU
// backend over kv::KvStorage; a GPU backend over device memory), so the cache's bookkeeping stays
// device-agnostic.
//
// Contract: copying rows and writing a record read from another block move K/V bytes verbatim, so attention over
// the destination gives the bits it gives over the source.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>

namespace preface::kv {

class BlockStorage {
 public:
  virtual ~BlockStorage() = default;
  // Copies rows [0, n_rows) of src_block to dst_block, K and V of every layer (copy-on-write of a partial hit).
  virtual void copy_block_rows(int32_t src_block, int32_t dst_block, int32_t n_rows) = 0;
  // One block's K and V as a host record of block_bytes() bytes (the layout is the storage's; records move between
  // storages of the same kind, model, KV type and block size). Writing a record read from block a into block b
  // makes b hold a's bytes.
  virtual size_t block_bytes() const = 0;
  virtual void read_block(int32_t block, std::span<uint8_t> out) const = 0;
  virtual void write_block(int32_t block, std::span<const uint8_t> in) = 0;
  // The recurrent state of one slot (every State layer's bytes, in layer order) as a host record of state_bytes()
  // bytes, for snapshots (kv/state_snapshots.h): writing a record read from a slot makes another slot hold the same
  // state. Storage without State layers: 0 bytes, and reading or writing throws preface::Error.
  virtual size_t state_bytes() const { return 0; }
  virtual void read_state(int32_t slot, std::span<uint8_t> out) const;
  virtual void write_state(int32_t slot, std::span<const uint8_t> in);
};

}  // namespace preface::kv
