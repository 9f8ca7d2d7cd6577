// Model::load: opens the GGUF, reads the configuration, has the architecture's row build every block (its layer
// kinds check and take their tensors: presence, shape, type; small vectors decoded to f32 once), packs the
// matrices the kernels read faster packed, and sizes the activation buffers.
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

#include "kernels/repack.h"
#include "model/arch/registry.h"
#include "model/fingerprint.h"
#include "model/layers/weights.h"
#include "model/model.h"
#include "util/error.h"

namespace preface::model {
namespace {

constexpr int32_t kMaxBatchTokensLimit = 1 << 16;

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
  const int64_t dim = c.dim, vocab = c.n_vocab;
  tok_embd_ = load_matrix(file_, "token_embd.weight", vocab, dim);
  output_ = c.tied_embeddings ? tok_embd_ : load_matrix(file_, "output.weight", vocab, dim);
  fingerprint_ = model_fingerprint(file_.mapping());
  output_norm_ = load_vector(file_, "output_norm.weight", dim);
  const Architecture* arch = find_architecture(c.arch_name);
  if (arch == nullptr) throw Error("unsupported architecture '" + c.arch_name + "'");  // read_config checked it
  memory_ = memory_layout(c);
  if (c.ple_dim > 0) per_layer_inputs_ = std::make_unique<PerLayerInputs>(file_, c);
  blocks_.reserve(static_cast<size_t>(c.n_layers));
  for (int32_t il = 0; il < c.n_layers; ++il) blocks_.push_back(arch->block(file_, c, il));
  // Where the kernels read them faster, matrices get a packed copy (kernels/repack.h), and the mapped bytes it was
  // made from leave resident memory (so a packed model holds its weights once); tok_embd_ keeps GGUF layout for
  // row lookups, so a tied output_ gets its own copy and the mapped bytes stay.
  std::vector<kernels::Matrix*> matrices{&output_};
  if (per_layer_inputs_) per_layer_inputs_->collect_matrices(matrices);
  for (Block& b : blocks_) {
    b.mixer->collect_matrices(matrices);
    b.ffn->collect_matrices(matrices);
    if (b.post) b.post->collect_matrices(matrices);
  }
  prepare_matrices(matrices, packed_, file_, tok_embd_.data);
  act_.allocate(c, max_batch_tokens_);
}

}  // namespace preface::model

