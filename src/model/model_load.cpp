// Model::load: opens the GGUF, checks every tensor the forward pass reads (presence, shape, type), decodes
// the small vectors (norms, biases) to f32 once and sizes the activation buffers.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <deque>
#include <exception>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "gguf/writer.h"
#include "kernels/repack.h"
#include "model/fingerprint.h"
#include "model/model.h"
#include "util/error.h"

namespace preface::model {
namespace {

constexpr int32_t kMaxBatchTokensLimit = 1 << 16;

std::string dims_str(const std::vector<uint64_t>& dims) {
  std::string s = "{";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "}";
}

// Finds `name` and checks its dims (dims[0] = row length, as GGUF stores them).
const gguf::TensorInfo& expect_tensor(const gguf::File& file, const std::string& name,
                                      const std::vector<uint64_t>& dims) {
  const gguf::TensorInfo* t = file.find_tensor(name);
  if (t == nullptr) throw Error("model tensor missing: " + name);
  if (!gguf::type_is_computed(t->type)) {
    throw Error("tensor " + name + " is " + std::string(gguf::tensor_type_name(t->type)) +
                ", which preface cannot compute yet (it computes " + gguf::computed_type_names() + ")");
  }
  if (t->dims != dims) {
    throw Error("tensor " + name + " has shape " + dims_str(t->dims) + ", expected " + dims_str(dims));
  }
  return *t;
}

// A weight matrix of n_rows x n_cols (GGUF dims {n_cols, n_rows}).
kernels::Matrix load_matrix(const gguf::File& file, const std::string& name, int64_t n_rows, int64_t n_cols) {
  const gguf::TensorInfo& t =
      expect_tensor(file, name, {static_cast<uint64_t>(n_cols), static_cast<uint64_t>(n_rows)});
  if (n_cols % static_cast<int64_t>(gguf::type_block_values(t.type)) != 0) {
    throw Error("tensor " + name + " of type " + std::string(gguf::tensor_type_name(t.type)) +
                " has rows of " + std::to_string(n_cols) + " values, not a whole number of blocks");
  }
  return kernels::Matrix{t.type, t.data, n_rows, n_cols};
}

// Rows [first, first + n_rows) of m, as a matrix of its own (a view into the same bytes).
kernels::Matrix row_view(const kernels::Matrix& m, int64_t first, int64_t n_rows) {
  const size_t row_bytes = gguf::row_bytes(m.type, static_cast<size_t>(m.n_cols));
  return kernels::Matrix{m.type, m.data + static_cast<size_t>(first) * row_bytes, n_rows, m.n_cols};
}

// A 1-D tensor of n values of any supported type, decoded to f32.
std::vector<float> load_vector(const gguf::File& file, const std::string& name, int64_t n) {
  const gguf::TensorInfo& t = expect_tensor(file, name, {static_cast<uint64_t>(n)});
  if (n % static_cast<int64_t>(gguf::type_block_values(t.type)) != 0) {
    throw Error("tensor " + name + " has " + std::to_string(n) + " values, not a whole number of blocks");
  }
  std::vector<float> out(static_cast<size_t>(n));
  gguf::decode_values(t.type, t.data, out.size(), out.data());
  for (const float v : out) {
    if (!std::isfinite(v)) throw Error("tensor " + name + " holds a NaN or infinite value");
  }
  return out;
}

// Packing writes a fresh copy of each matrix it packs, and first touches of new pages dominate its cost on some
// hosts (a VM's page faults), so matrices are packed on up to 8 threads, each taking the next one; a matrix's
// storage (an element of the deque, which never moves) is created up front, and no two matrices share the pages
// released (row views of one fused tensor are disjoint rows; partial pages stay resident).
void prepare_matrices(const std::vector<kernels::Matrix*>& matrices, std::deque<std::vector<uint8_t>>& packed,
                      const gguf::File& file, const uint8_t* tok_embd) {
  std::vector<std::vector<uint8_t>*> storage;
  for (size_t i = 0; i < matrices.size(); ++i) storage.push_back(&packed.emplace_back());
  std::atomic<size_t> next{0};
  std::mutex error_mutex;
  std::exception_ptr error;
  const auto work = [&] {
    for (size_t i; (i = next.fetch_add(1)) < matrices.size();) {
      try {
        kernels::Matrix& w = *matrices[i];
        const kernels::Matrix source = w;
        w = kernels::prepare_matrix(w, *storage[i]);
        if (w.data != source.data && source.data != tok_embd) {
          file.mapping().release(source.data, gguf::row_bytes(source.type, static_cast<size_t>(source.n_cols)) *
                                                   static_cast<size_t>(source.n_rows));
        }
      } catch (...) {
        const std::lock_guard<std::mutex> lock(error_mutex);
        if (!error) error = std::current_exception();
      }
    }
  };
  const size_t n_threads = std::min<size_t>({std::max(1u, std::thread::hardware_concurrency()), 8, matrices.size()});
  std::vector<std::thread> helpers;
  for (size_t t = 1; t < n_threads; ++t) {
    try {
      helpers.emplace_back(work);
    } catch (const std::system_error&) {
      break;  // no more threads: the ones running (and this one) take every matrix
    }
  }
  work();
  for (std::thread& t : helpers) t.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace

std::unique_ptr<Model> Model::load(const std::string& path, int32_t max_batch_tokens, MappedFile::Mode mode) {
  if (max_batch_tokens < 1 || max_batch_tokens > kMaxBatchTokensLimit) {
    throw Error("max_batch_tokens must be in [1, " + std::to_string(kMaxBatchTokensLimit) + "]");
  }
  gguf::File file = gguf::File::open(path, mode);
  Config config = read_config(file);
  return std::unique_ptr<Model>(new Model(std::move(file), std::move(config), max_batch_tokens));
}

// Matrices point into file_'s mapping, so they are taken only after file_ has its final home.
Model::Model(gguf::File file, Config config, int32_t max_batch_tokens)
    : file_(std::move(file)), config_(std::move(config)), max_batch_tokens_(max_batch_tokens) {
  const Config& c = config_;
  const int64_t dim = c.dim, q_dim = c.q_dim(), kv = c.kv_row_values(), ffn = c.ffn_dim, vocab = c.n_vocab;
  tok_embd_ = load_matrix(file_, "token_embd.weight", vocab, dim);
  output_ = c.tied_embeddings ? tok_embd_ : load_matrix(file_, "output.weight", vocab, dim);
  fingerprint_ = model_fingerprint(file_.mapping());
  output_norm_ = load_vector(file_, "output_norm.weight", dim);
  layers_.resize(static_cast<size_t>(c.n_layers));
  for (int32_t i = 0; i < c.n_layers; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    LayerWeights& l = layers_[static_cast<size_t>(i)];
    l.attn_norm = load_vector(file_, p + "attn_norm.weight", dim);
    if (c.fused_projections) {
      const kernels::Matrix qkv = load_matrix(file_, p + "attn_qkv.weight", q_dim + 2 * kv, dim);
      l.wq = row_view(qkv, 0, q_dim);
      l.wk = row_view(qkv, q_dim, kv);
      l.wv = row_view(qkv, q_dim + kv, kv);
    } else {
      l.wq = load_matrix(file_, p + "attn_q.weight", q_dim, dim);
      l.wk = load_matrix(file_, p + "attn_k.weight", kv, dim);
      l.wv = load_matrix(file_, p + "attn_v.weight", kv, dim);
    }
    l.wo = load_matrix(file_, p + "attn_output.weight", dim, q_dim);
    // qwen2 always has Q/K/V biases; a llama file may carry them too, and then they are applied.
    if (c.qkv_bias || file_.find_tensor(p + "attn_q.bias") != nullptr) {
      l.bq = load_vector(file_, p + "attn_q.bias", q_dim);
      l.bk = load_vector(file_, p + "attn_k.bias", kv);
      l.bv = load_vector(file_, p + "attn_v.bias", kv);
    }
    if (c.qk_norm) {
      l.q_norm = load_vector(file_, p + "attn_q_norm.weight", c.head_dim);
      l.k_norm = load_vector(file_, p + "attn_k_norm.weight", c.head_dim);
    }
    l.ffn_norm = load_vector(file_, p + "ffn_norm.weight", dim);
    if (c.fused_projections) {
      const kernels::Matrix gate_up = load_matrix(file_, p + "ffn_up.weight", 2 * ffn, dim);
      l.w_gate = row_view(gate_up, 0, ffn);
      l.w_up = row_view(gate_up, ffn, ffn);
    } else {
      l.w_gate = load_matrix(file_, p + "ffn_gate.weight", ffn, dim);
      l.w_up = load_matrix(file_, p + "ffn_up.weight", ffn, dim);
    }
    l.w_down = load_matrix(file_, p + "ffn_down.weight", dim, ffn);
    if (c.post_norms) {
      l.attn_post_norm = load_vector(file_, p + "post_attention_norm.weight", dim);
      l.ffn_post_norm = load_vector(file_, p + "post_ffw_norm.weight", dim);
    }
  }
  // Where the kernels read them faster, matrices get a packed copy (kernels/repack.h), and the mapped bytes it was
  // made from leave resident memory (so a packed model holds its weights once); tok_embd_ keeps GGUF layout for
  // row lookups, so a tied output_ gets its own copy and the mapped bytes stay.
  std::vector<kernels::Matrix*> matrices{&output_};
  for (LayerWeights& l : layers_) {
    for (kernels::Matrix* w : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) matrices.push_back(w);
  }
  prepare_matrices(matrices, packed_, file_, tok_embd_.data);

  const size_t n = static_cast<size_t>(max_batch_tokens_);
  x_.assign(n * dim, 0.0f);         // [n][dim] residual stream
  xb_.assign(n * dim, 0.0f);        // [n][dim] normed input of a block / output of wo and w_down
  q_.assign(n * q_dim, 0.0f);       // [n][n_heads][head_dim]
  k_.assign(n * kv, 0.0f);          // [n][n_kv_heads][head_dim]
  v_.assign(n * kv, 0.0f);          // [n][n_kv_heads][head_dim]
  attn_out_.assign(n * q_dim, 0.0f);  // [n][n_heads][head_dim]
  gate_.assign(n * ffn, 0.0f);      // [n][ffn]
  up_.assign(n * ffn, 0.0f);        // [n][ffn]
  ffn_out_.assign(n * dim, 0.0f);   // [n][dim]
  // Q8_0 copies of a batch of activation rows for quantized matmuls (matmul grows it if ever needed).
  quant_scratch_.reserve(n * gguf::row_bytes(gguf::TensorType::Q8_0, ((std::max({dim, q_dim, ffn}) + 31) / 32) * 32));
}

}  // namespace preface::model
