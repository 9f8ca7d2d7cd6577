// What the engine needs from the machine that runs the model: the forward pass over a batch, and the KV storage
// the pass reads and writes, addressed by block id only (kv::BlockStorage, which kv::KvCache uses for
// copy-on-write and the tiers). The KV cache's bookkeeping never touches KV bytes, so it stays device-agnostic: a
// GPU backend is a new folder implementing this interface.
//
// Contract (model/model.h): a token's logits depend only on its sequence's tokens and the weights, never on the
// rest of the batch, chunking or threads; copying block rows moves K/V bytes verbatim.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "kv/block_storage.h"
#include "model/base/config.h"
#include "model/model.h"

namespace preface::engine {

class Backend : public kv::BlockStorage {
 public:
  ~Backend() override = default;

  virtual const model::Config& config() const = 0;
  // What each layer remembers: the KV storage is sized from it (model/base/memory.h).
  virtual const model::MemoryLayout& memory() const = 0;
  // SHA-256 of the weights file (roots every cache namespace).
  virtual const std::string& fingerprint() const = 0;
  virtual int32_t max_batch_tokens() const = 0;
  virtual kernels::KvFormat kv_format() const = 0;
  virtual int32_t block_size() const = 0;
  virtual int32_t n_kv_blocks() const = 0;
  virtual size_t kv_bytes() const = 0;  // the whole KV storage
  // Recurrent-state slots per State layer (model::MemoryKind::State); 0 for a model without such layers.
  virtual int32_t n_state_slots() const = 0;
  // Blocks of the sliding-window layers' own pool (kv/window_pool.h); 0: they share the main pool's blocks.
  virtual int32_t n_window_blocks() const { return 0; }
  // Floats of each running sequence's open keys (model::ForwardBatch::open_keys) when the keys are quantized per
  // channel; 0 otherwise.
  virtual size_t open_key_floats() const { return 0; }

  // Runs the batch (1 <= size <= max_batch_tokens; block tables cover every position) and writes the logits of
  // tokens with want_logits, in batch order, to logits: [n_want][n_vocab]. Throws on a malformed batch or a
  // device failure; the engine then fails the requests of that step and keeps serving.
  virtual void forward(const model::ForwardBatch& batch, float* logits) = 0;
  // kv::BlockStorage: copy_block_rows, block_bytes, read_block, write_block over the backend's KV storage.
};

}  // namespace preface::engine
