// What the engine needs from the machine that runs the model: the forward pass over a batch, and the KV storage
// the pass reads and writes, addressed by block id only. The block pool, prefix index and scheduler never touch
// KV bytes, so the KV cache stays device-agnostic: a GPU backend is a new folder implementing this interface.
//
// Contract (model/model.h): a token's logits depend only on its sequence's tokens and the weights, never on the
// rest of the batch, chunking or threads; copying block rows moves K/V bytes verbatim.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "model/config.h"
#include "model/model.h"

namespace preface::engine {

class Backend {
 public:
  virtual ~Backend() = default;

  virtual const model::Config& config() const = 0;
  // SHA-256 of the weights file (roots every cache namespace).
  virtual const std::string& fingerprint() const = 0;
  virtual int32_t max_batch_tokens() const = 0;
  virtual model::KvType kv_type() const = 0;
  virtual int32_t block_size() const = 0;
  virtual int32_t n_kv_blocks() const = 0;
  virtual size_t kv_bytes() const = 0;  // the whole KV storage

  // Runs the batch (1 <= size <= max_batch_tokens; block tables cover every position) and writes the logits of
  // tokens with want_logits, in batch order, to logits: [n_want][n_vocab]. Throws on a malformed batch or a
  // device failure; the engine then fails the requests of that step and keeps serving.
  virtual void forward(const model::ForwardBatch& batch, float* logits) = 0;
  // Copies rows [0, n_rows) of src_block to dst_block, K and V of every layer (copy-on-write of a partial hit).
  virtual void copy_block_rows(int32_t src_block, int32_t dst_block, int32_t n_rows) = 0;
  // One block's K and V as a host record of block_bytes() bytes (the layout is the backend's; records move
  // between backends of the same kind, model, KV type and block size). Writing a record read from block a into
  // block b makes attention over b give the bits it gives over a: the door for tiers below device memory.
  virtual size_t block_bytes() const = 0;
  virtual void read_block(int32_t block, std::span<uint8_t> out) const = 0;
  virtual void write_block(int32_t block, std::span<const uint8_t> in) = 0;
};

}  // namespace preface::engine
