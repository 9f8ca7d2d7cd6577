// Test helpers for driving Model::forward directly: KV storage over a plain byte vector (independent of
// kv/KvStorage), running one or more sequences in chunks, and copies of ../shared's models with extra keys.
#pragma once
#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "gguf/reader.h"
#include "gguf/writer.h"
#include "model/model.h"
#include "support/shared_data.h"

namespace preface::test {

// Per layer K then V, each [n_blocks][block_size][kv_row_values] of `type`, in one zeroed vector (the layout of
// every architecture whose layers all remember the same paged rows).
struct TestKv {
  TestKv(const model::Config& c, kernels::KvType type, int32_t block_size, int32_t n_blocks) {
    view.type = type;
    view.block_size = block_size;
    view.n_blocks = n_blocks;
    const size_t region = static_cast<size_t>(n_blocks) * block_size *
                          kernels::kv_row_bytes(type, static_cast<size_t>(c.kv_row_values()));
    bytes.assign(region * 2 * static_cast<size_t>(c.n_layers), 0);
    for (int32_t l = 0; l < c.n_layers; ++l) {
      kernels::KvLayerView layer;
      layer.k = bytes.data() + (2 * static_cast<size_t>(l)) * region;
      layer.v = bytes.data() + (2 * static_cast<size_t>(l) + 1) * region;
      layer.k_values = layer.v_values = c.kv_row_values();
      view.layers.push_back(layer);
    }
  }
  std::vector<uint8_t> bytes;
  kernels::KvView view;
};

// Runs `tokens` as one sequence from position 0 in batches of `chunk` tokens (want_logits on every token) and
// returns all logits, [n][n_vocab].
inline std::vector<float> run_chunked(model::Model& m, ThreadPool& pool, const kernels::KvView& kv,
                                      const std::vector<int32_t>& block_table, const std::vector<int32_t>& tokens,
                                      size_t chunk) {
  const size_t n_vocab = static_cast<size_t>(m.config().n_vocab);
  std::vector<float> logits(tokens.size() * n_vocab);
  model::ForwardBatch batch;
  batch.block_tables = {&block_table};
  for (size_t begin = 0; begin < tokens.size(); begin += chunk) {
    const size_t end = std::min(tokens.size(), begin + chunk);
    batch.clear();
    for (size_t i = begin; i < end; ++i) batch.add(tokens[i], static_cast<int32_t>(i), 0, true);
    m.forward(batch, kv, pool, logits.data() + begin * n_vocab);
  }
  return logits;
}

// Block ids first..first+n-1 in reverse order, so that tests exercise the block table, not identity paging.
inline std::vector<int32_t> reversed_blocks(int32_t n, int32_t first = 0) {
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) ids[static_cast<size_t>(i)] = first + n - 1 - i;
  return ids;
}

// The last position's logits of `tokens` run through the model at `path` (loaded for batches of up to 128, an F16
// KV cache of 16-token blocks taken in reverse order, chunks of 48 tokens, as llama.cpp's oracles are compared).
inline std::vector<float> last_position_logits(const std::string& path, const std::vector<int32_t>& tokens,
                                               ThreadPool& pool) {
  auto m = model::Model::load(path, 128);
  const size_t n_vocab = static_cast<size_t>(m->config().n_vocab);
  constexpr int32_t kBlockSize = 16;
  const auto n_blocks = static_cast<int32_t>((tokens.size() + kBlockSize - 1) / kBlockSize);
  TestKv kv(m->config(), kernels::KvType::F16, kBlockSize, n_blocks);
  const std::vector<float> all = run_chunked(*m, pool, kv.view, reversed_blocks(n_blocks), tokens, 48);
  return std::vector<float>(all.end() - static_cast<std::ptrdiff_t>(n_vocab), all.end());
}

// ../shared/models/`model` with every key and tensor, plus the keys and tensors `extra` sets and adds (a key it
// sets replaces the copied value), written to a fresh temporary directory as `copy`.gguf; the path, or ""
// without ../shared.
inline std::string shared_model_copy(const std::string& model, const std::string& copy,
                                     const std::function<void(gguf::Writer&)>& extra) {
  const auto src = shared_file("models/" + model);
  if (src.empty()) return "";
  const gguf::File f = gguf::File::open(src.string());
  gguf::Writer w;
  for (const auto& [key, value] : f.metadata()) {
    if (key != "general.alignment") w.set_value(key, value);
  }
  extra(w);
  for (const gguf::TensorInfo& t : f.tensors()) {
    w.add_tensor(t.name, t.type, t.dims, std::vector<uint8_t>(t.data, t.data + t.size_bytes));
  }
  const std::string path = (temp_dir("copy-" + copy) / (copy + ".gguf")).string();
  w.write(path);
  return path;
}

}  // namespace preface::test
