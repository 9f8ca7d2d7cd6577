// A loaded GGUF model (weights memory-mapped and read in place, except the matrices the dispatched kernels read
// faster packed, kernels::row_groups_preferred: the row-group types of kernels/repack.h on AVX-512 VNNI, copied
// once, at load, into row groups) and its forward pass.
//
// forward() runs one batch of tokens from any number of sequences. For each layer it first writes every batch
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
#include "model/config.h"
#include "util/thread_pool.h"

namespace preface::model {

struct ForwardBatch {
  std::vector<int32_t> tokens;        // [n] token ids
  std::vector<int32_t> pos;           // [n] position of each token in its sequence
  std::vector<int32_t> seq;           // [n] index into block_tables
  std::vector<uint8_t> want_logits;   // [n] 1 = produce logits for this token
  std::vector<const std::vector<int32_t>*> block_tables;  // [n_seqs] physical block ids, cover pos of each token

  size_t size() const { return tokens.size(); }
  void clear();
  void add(int32_t token, int32_t position, int32_t seq_index, bool logits);
};

struct LayerWeights {
  std::vector<float> attn_norm;            // [dim]
  kernels::Matrix wq, wk, wv, wo;          // [q_dim x dim], [kv x dim], [kv x dim], [dim x q_dim] (rows x cols)
  std::vector<float> bq, bk, bv;           // qwen2 biases; empty for llama
  std::vector<float> q_norm, k_norm;       // qwen3 per-head Q/K RMSNorm weights [head_dim]; empty otherwise
  std::vector<float> ffn_norm;             // [dim]
  kernels::Matrix w_gate, w_up, w_down;    // [ffn x dim], [ffn x dim], [dim x ffn]
  std::vector<float> attn_post_norm, ffn_post_norm;  // gemma (Config::post_norms): [dim] each; empty otherwise
};

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

  // Runs the batch (1 <= size <= max_batch_tokens). Writes logits of tokens with want_logits, in batch order,
  // to logits: [n_want][n_vocab]. Throws preface::Error on a malformed batch (bad token id, position beyond the
  // block table, ...). The caller owns the KV storage behind `kv` and the block tables.
  void forward(const ForwardBatch& batch, const kernels::KvView& kv, ThreadPool& pool, float* logits);

 private:
  Model(gguf::File file, Config config, int32_t max_batch_tokens);

  gguf::File file_;
  std::string fingerprint_;
  Config config_;
  int32_t max_batch_tokens_;
  kernels::Matrix tok_embd_;               // [n_vocab x dim]
  kernels::Matrix output_;                 // [n_vocab x dim] (tok_embd_ when tied)
  std::vector<float> output_norm_;         // [dim]
  std::vector<LayerWeights> layers_;
  // The packed copies kernels::prepare_matrix made of output_ and layers_' matrices, which they point into; a
  // std::deque, whose elements stay where they are as it grows.
  std::deque<std::vector<uint8_t>> packed_;

  // Activation buffers, [max_batch_tokens][...]:
  std::vector<float> x_, xb_, q_, k_, v_, attn_out_, gate_, up_, ffn_out_;
  std::vector<uint8_t> quant_scratch_;
  std::vector<float> attn_scratch_;  // detail::attention's tiles, sized by its first call
};

// One line for start-up logs: architecture, shape, context, tensor types with counts ("F32 5, Q4_K 12, Q6_K 3")
// and the weight bytes.
std::string model_summary(const Model& m);

}  // namespace preface::model
