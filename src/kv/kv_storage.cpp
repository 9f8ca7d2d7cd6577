#include "kv/kv_storage.h"

#include <sys/mman.h>

#include <cstring>
#include <limits>
#include <string>

#include "util/bytes.h"
#include "util/error.h"

namespace preface::kv {

KvStorage::KvStorage(const KvDims& dims, kernels::KvType type, int32_t block_size, int32_t n_blocks) {
  if (block_size < 1 || n_blocks < 1) {
    throw Error("KV storage needs block_size >= 1 and n_blocks >= 1 (got " + std::to_string(block_size) + ", " +
                std::to_string(n_blocks) + ")");
  }
  const int64_t row_values = static_cast<int64_t>(dims.n_kv_heads) * dims.head_dim;
  if (dims.n_layers < 1 || dims.n_kv_heads < 1 || dims.head_dim < 1 || dims.n_layers > (1 << 16) ||
      row_values > (1 << 24)) {
    throw Error("KV storage: layers, KV heads and head size out of range (got " + std::to_string(dims.n_layers) +
                ", " + std::to_string(dims.n_kv_heads) + ", " + std::to_string(dims.head_dim) + ")");
  }
  kernels::check_kv_type_fits(type, dims.head_dim);
  n_layers_ = static_cast<size_t>(dims.n_layers);
  view_.type = type;
  view_.block_size = block_size;
  view_.n_blocks = n_blocks;
  view_.row_values = static_cast<int32_t>(row_values);
  const size_t region_tokens = static_cast<size_t>(n_blocks) * static_cast<size_t>(block_size);
  if (region_tokens > std::numeric_limits<size_t>::max() / bytes_per_token()) {
    throw Error("KV storage size overflows");
  }
  const size_t region_bytes = region_tokens * view_.row_bytes();
  const size_t n_bytes = region_tokens * bytes_per_token();
  // Anonymous pages are zeroed; MAP_POPULATE faults them all in now (see the header), unless they would not fit.
  const int populate = n_bytes <= mem_available_bytes() ? MAP_POPULATE : 0;
  void* p = ::mmap(nullptr, n_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | populate, -1, 0);
  if (p == MAP_FAILED) throw Error("cannot allocate " + std::to_string(n_bytes) + " bytes of KV storage");
  data_ = std::unique_ptr<uint8_t, Unmap>(static_cast<uint8_t*>(p), Unmap{n_bytes});
  for (size_t l = 0; l < n_layers_; ++l) {
    view_.k_layers.push_back(data_.get() + (2 * l) * region_bytes);
    view_.v_layers.push_back(data_.get() + (2 * l + 1) * region_bytes);
  }
}

void KvStorage::Unmap::operator()(uint8_t* p) const { ::munmap(p, n_bytes); }

void KvStorage::copy_rows(int32_t src_block, int32_t dst_block, int32_t n_rows) {
  if (src_block < 0 || src_block >= view_.n_blocks || dst_block < 0 || dst_block >= view_.n_blocks) {
    throw Error("copy_rows: block id out of range");
  }
  if (n_rows < 0 || n_rows > view_.block_size) throw Error("copy_rows: n_rows out of range");
  if (src_block == dst_block || n_rows == 0) return;
  const size_t bytes = static_cast<size_t>(n_rows) * view_.row_bytes();
  for (size_t l = 0; l < n_layers_; ++l) {
    const int layer = static_cast<int>(l);
    std::memcpy(view_.k_row(layer, dst_block, 0), view_.k_row(layer, src_block, 0), bytes);
    std::memcpy(view_.v_row(layer, dst_block, 0), view_.v_row(layer, src_block, 0), bytes);
  }
}

void KvStorage::read_block(int32_t block, std::span<uint8_t> out) const {
  if (block < 0 || block >= view_.n_blocks) throw Error("read_block: block id out of range");
  if (out.size() != block_bytes()) throw Error("read_block: buffer is not one block");
  const size_t bytes = static_cast<size_t>(view_.block_size) * view_.row_bytes();
  uint8_t* p = out.data();
  for (size_t l = 0; l < n_layers_; ++l) {
    const int layer = static_cast<int>(l);
    std::memcpy(p, view_.k_row(layer, block, 0), bytes);
    std::memcpy(p + bytes, view_.v_row(layer, block, 0), bytes);
    p += 2 * bytes;
  }
}

void KvStorage::write_block(int32_t block, std::span<const uint8_t> in) {
  if (block < 0 || block >= view_.n_blocks) throw Error("write_block: block id out of range");
  if (in.size() != block_bytes()) throw Error("write_block: buffer is not one block");
  const size_t bytes = static_cast<size_t>(view_.block_size) * view_.row_bytes();
  const uint8_t* p = in.data();
  for (size_t l = 0; l < n_layers_; ++l) {
    const int layer = static_cast<int>(l);
    std::memcpy(view_.k_row(layer, block, 0), p, bytes);
    std::memcpy(view_.v_row(layer, block, 0), p + bytes, bytes);
    p += 2 * bytes;
  }
}

}  // namespace preface::kv
