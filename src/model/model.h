// A loaded GGUF model (weights memory-mapped and read in place, except the matrices the dispatched kernels read
// faster packed, kernels::row_groups_preferred: the row-group types of kernels/repack.h on AVX-512 VNNI, copied
// once, at load, into row groups) and its forward pass.
//
// forward() runs one batch of tokens from any number of sequences through the architecture's blocks (layer kinds,
// model/layers/layer.h). In each attention layer it first writes every batch
// token's K and V into the paged KV storage, then computes each token's attention reading *only* from that
// storage (positions 0..pos of its own sequence). So a token's output depends only on its sequence's tokens
// 0..pos and the weights — never on which other tokens share the batch, how a prompt was chunked, or the thread
// count — and logits are bit-identical between incremental decoding and full recompute.
#pragma once
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "gguf/reader.h"
#include "kernels/kv_view.h"
#include "kernels/matmul.h"
#include "kernels/repack.h"
#include "model/base/batch.h"
#include "model/base/config.h"
#include "model/base/memory.h"
#include "model/layers/layer.h"
#include "model/layers/per_layer_input.h"
#include "util/thread_pool.h"

namespace preface::model {

class Model {
 public:
  // Opens and validates the GGUF (every tensor present with the expected shape and a supported type).
  // max_batch_tokens sizes the activation buffers allocated here, once.
  // mode Copy reads the file into memory (`--no-mmap`, util/mapped_file.h).
  static std::unique_ptr<Model> load(const std::string& path, int32_t max_batch_tokens = 512,
                                     MappedFile::Mode mode = MappedFile::Mode::Map);

  const Config& config() const { return config_; }
  const gguf::File& file() const { return file_; }
  // SHA-256 of the file (model/fingerprint.h), taken at load before the packed matrices' mapped bytes were
  // released, so that hashing does not read them back into memory.
  const std::string& fingerprint() const { return fingerprint_; }
  int32_t max_batch_tokens() const { return max_batch_tokens_; }
  // What each layer remembers (model/base/memory.h), from the architecture's row: what the KV storage behind
  // forward()'s view must be sized from.
  const MemoryLayout& memory() const { return memory_; }

  // Runs the batch (1 <= size <= max_batch_tokens). Writes logits of tokens with want_logits, in batch order,
  // to logits: [n_want][n_vocab]. Throws preface::Error on a malformed batch (bad token id, position beyond the
  // block table, ...) or a view that does not hold what memory() says. The caller owns the KV storage behind `kv`
  // and the block tables.
  void forward(const ForwardBatch& batch, const kernels::KvView& kv, ThreadPool& pool, float* logits);

 private:
  Model(gguf::File file, Config config, int32_t max_batch_tokens);

  gguf::File file_;
  std::string fingerprint_;
  Config config_;
  MemoryLayout memory_;
  int32_t max_batch_tokens_;
  kernels::Matrix tok_embd_;               // [n_vocab x dim]
  kernels::Matrix output_;                 // [n_vocab x dim] (tok_embd_ when tied)
  std::vector<float> output_norm_;         // [dim]
  std::unique_ptr<PerLayerInputs> per_layer_inputs_;  // Config::ple_dim > 0 (gemma4), else null
  std::vector<Block> blocks_;              // [n_layers], made by the architecture's row (model/arch/registry.h)
  // The packed copies kernels::prepare_matrix made of output_ and the blocks' matrices, which they point into; a
  // std::deque, whose elements stay where they are as it grows.
  std::deque<std::vector<uint8_t>> packed_;
  Activations act_;
};

// One line for start-up logs: architecture, shape, context, tensor types with counts ("F32 5, Q4_K 12, Q6_K 3")
// and the weight bytes.
std::string model_summary(const Model& m);

}  // namespace preface::model
