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
#include "model/arch/registry.h"
#include "model/model.h"
#include "support/shared_data.h"

namespace preface::test {

// Each layer's memory in one zeroed vector, as model::MemoryLayout says: a paged layer's K then V, each
// [n_blocks][block_size][row values] of type.k (K) or type.v (V); a state layer's n_state_slots slots.
struct TestKv {
  TestKv(const model::MemoryLayout& m, const kernels::KvFormat& type, int32_t block_size, int32_t n_blocks,
         int32_t n_state_slots = 1) {
    view.format = type;
    view.block_size = block_size;
    view.n_blocks = n_blocks;
    view.n_state_slots = n_state_slots;
    const size_t tokens = static_cast<size_t>(n_blocks) * static_cast<size_t>(block_size);
    std::vector<size_t> offsets;
    size_t n_bytes = 0;
    for (const model::MemorySpec& spec : m.layers()) {
      kernels::KvLayerView layer;
      offsets.push_back(n_bytes);
      if (spec.kind == model::MemoryKind::PagedRows) {
        layer.k_values = spec.k_row_values();
        layer.v_values = spec.v_row_values();
        n_bytes += tokens * (kernels::kv_row_bytes(type.k, static_cast<size_t>(layer.k_values)) +
                             kernels::kv_row_bytes(type.v, static_cast<size_t>(layer.v_values)));
      } else if (spec.kind == model::MemoryKind::State) {
        layer.state_bytes = static_cast<size_t>(spec.state_bytes);
        n_bytes += static_cast<size_t>(n_state_slots) * layer.state_bytes;
      }
      view.layers.push_back(layer);
    }
    bytes.assign(n_bytes, 0);
    for (size_t l = 0; l < view.layers.size(); ++l) {
      kernels::KvLayerView& layer = view.layers[l];
      if (layer.k_values > 0) {
        layer.k = bytes.data() + offsets[l];
        layer.v = layer.k + tokens * kernels::kv_row_bytes(type.k, static_cast<size_t>(layer.k_values));
      }
      if (layer.state_bytes > 0) layer.state = bytes.data() + offsets[l];
    }
  }
  // The layout the config's architecture declares (model::memory_layout).
  TestKv(const model::Config& c, const kernels::KvFormat& type, int32_t block_size, int32_t n_blocks)
      : TestKv(model::memory_layout(c), type, block_size, n_blocks) {}
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
  batch.state_slots = {0};
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
