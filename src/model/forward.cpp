// Model::forward: one batch of tokens from any number of sequences: embeddings, the rotations every layer shares,
// each block's layer kinds in order, then the output head for the tokens that want logits.
#include <algorithm>
#include <string>
#include <vector>

#include "kernels/attention.h"
#include "kernels/ops.h"
#include "model/model.h"
#include "util/error.h"

namespace preface::model {

namespace {

// The view must hold, layer for layer, what memory() says the layer remembers.
void check_kv(const MemoryLayout& memory, const kernels::KvView& kv) {
  if (kv.layers.size() != static_cast<size_t>(memory.n_layers())) {
    throw Error("KV storage has " + std::to_string(kv.layers.size()) + " layers, the model " +
                std::to_string(memory.n_layers()));
  }
  if (kv.block_size < 1 || kv.n_blocks < 1) throw Error("KV storage has no blocks");
  memory.check_type_fits(kv.format);  // first: a format the rows cannot hold is named as such
  for (int32_t il = 0; il < memory.n_layers(); ++il) {
    const MemorySpec& spec = memory.layer(il);
    const kernels::KvLayerView& lv = kv.layers[static_cast<size_t>(il)];
    const bool ok = spec.kind == MemoryKind::PagedRows
                        ? lv.k != nullptr && lv.v != nullptr && lv.k_values == spec.k_row_values() &&
                              lv.v_values == spec.v_row_values()
                        : spec.kind != MemoryKind::State || (lv.state != nullptr && lv.state_bytes == spec.state_bytes);
    if (!ok) throw Error("KV storage layer " + std::to_string(il) + " does not hold " + spec.describe());
  }
}

// Every index forward() follows is checked here, before anything is written. A token reads blocks
// 0..pos / block_size of its table; when it follows a token of the same sequence, the blocks that token needed are
// already checked, so a typical batch costs O(tokens + blocks).
void check_batch(const Config& c, const ForwardBatch& b, const kernels::KvView& kv, int32_t max_batch_tokens) {
  const size_t n = b.size();
  if (n < 1 || n > static_cast<size_t>(max_batch_tokens)) {
    throw Error("batch of " + std::to_string(n) + " tokens, expected 1.." + std::to_string(max_batch_tokens));
  }
  if (b.pos.size() != n || b.seq.size() != n || b.want_logits.size() != n) {
    throw Error("batch arrays (tokens, pos, seq, want_logits) differ in length");
  }
  auto fail = [](size_t t, const std::string& what) {
    throw Error("batch token " + std::to_string(t) + ": " + what);
  };
  size_t n_checked = 0;  // blocks of the previous token's table known to be valid
  for (size_t t = 0; t < n; ++t) {
    if (b.tokens[t] < 0 || b.tokens[t] >= c.n_vocab) {
      fail(t, "token id " + std::to_string(b.tokens[t]) + " outside [0, " + std::to_string(c.n_vocab) + ")");
    }
    if (b.pos[t] < 0 || b.pos[t] >= c.ctx_len) {
      fail(t, "position " + std::to_string(b.pos[t]) + " outside the context [0, " + std::to_string(c.ctx_len) +
                  ")");
    }
    if (b.seq[t] < 0 || static_cast<size_t>(b.seq[t]) >= b.block_tables.size() ||
        b.block_tables[static_cast<size_t>(b.seq[t])] == nullptr) {
      fail(t, "sequence index " + std::to_string(b.seq[t]) + " has no block table");
    }
    const std::vector<int32_t>& table = *b.block_tables[static_cast<size_t>(b.seq[t])];
    const size_t n_needed = static_cast<size_t>(b.pos[t] / kv.block_size) + 1;
    if (n_needed > table.size()) {
      fail(t, "position " + std::to_string(b.pos[t]) + " is beyond its block table (" +
                  std::to_string(table.size()) + " blocks of " + std::to_string(kv.block_size) + ")");
    }
    if (t == 0 || b.seq[t] != b.seq[t - 1]) n_checked = 0;
    for (size_t i = n_checked; i < n_needed; ++i) {
      if (table[i] < 0 || table[i] >= kv.n_blocks) {
        fail(t, "block id " + std::to_string(table[i]) + " outside the KV storage");
      }
    }
    n_checked = std::max(n_checked, n_needed);
  }
}

// Storage with a window pool: each sequence has a window table whose blocks from the first one the token's query
// may load (kernels::attention_first_read over the widest window) through its own position are window-pool ids.
void check_window_tables(const MemoryLayout& memory, const ForwardBatch& b, const kernels::KvView& kv) {
  if (kv.n_window_blocks == 0) return;
  if (b.window_tables.size() != b.block_tables.size()) throw Error("batch: a window table per sequence is required");
  const int32_t window = memory.max_window();
  for (size_t t = 0; t < b.size(); ++t) {
    const std::vector<int32_t>* table = b.window_tables[static_cast<size_t>(b.seq[t])];
    if (table == nullptr) throw Error("batch token " + std::to_string(t) + ": no window table");
    const auto first = static_cast<size_t>(kernels::attention_first_read(b.pos[t] + 1, window) / kv.block_size);
    const auto last = static_cast<size_t>(b.pos[t] / kv.block_size);
    if (last >= table->size()) throw Error("batch token " + std::to_string(t) + ": beyond its window table");
    for (size_t i = first; i <= last; ++i) {
      if ((*table)[i] < 0 || (*table)[i] >= kv.n_window_blocks) {
        throw Error("batch token " + std::to_string(t) + ": window block id " + std::to_string((*table)[i]) +
                    " outside the window pool");
      }
    }
  }
}

// Layouts with State layers: every sequence has a state slot, its tokens in the batch are one run of consecutive
// positions, and the run starts at position 0 (a fresh state) or where the state left off.
void check_states(const MemoryLayout& memory, const ForwardBatch& b, const kernels::KvView& kv) {
  int32_t first_state_layer = -1;
  for (int32_t il = 0; il < memory.n_layers() && first_state_layer < 0; ++il) {
    if (memory.layer(il).kind == MemoryKind::State) first_state_layer = il;
  }
  if (first_state_layer < 0) return;
  if (b.state_slots.size() != b.block_tables.size()) throw Error("batch: a state slot per sequence is required");
  for (const int32_t slot : b.state_slots) {
    if (slot < 0 || slot >= kv.n_state_slots) throw Error("batch: state slot " + std::to_string(slot) + " out of range");
  }
  std::vector<uint8_t> seen(b.block_tables.size(), 0);
  for (size_t t = 0; t < b.size(); ++t) {
    const auto s = static_cast<size_t>(b.seq[t]);
    if (t > 0 && b.seq[t - 1] == b.seq[t]) {
      if (b.pos[t] != b.pos[t - 1] + 1) throw Error("batch token " + std::to_string(t) + ": positions not consecutive");
      continue;
    }
    if (seen[s]++ != 0) throw Error("batch: sequence " + std::to_string(s) + " is not one run of tokens");
    const int64_t next = state_next_position(kv.state(first_state_layer, b.state_slots[s]));
    if (b.pos[t] != 0 && b.pos[t] != next) {
      throw Error("batch token " + std::to_string(t) + ": position " + std::to_string(b.pos[t]) +
                  " does not continue its recurrent state (at position " + std::to_string(next) + ")");
    }
  }
}

}  // namespace

void Model::forward(const ForwardBatch& batch, const kernels::KvView& kv, ThreadPool& pool, float* logits) {
  const Config& c = config_;
  check_kv(memory_, kv);
  check_batch(c, batch, kv, max_batch_tokens_);
  check_window_tables(memory_, batch, kv);
  check_states(memory_, batch, kv);
  const size_t n = batch.size();
  const size_t dim = static_cast<size_t>(c.dim);
  const int64_t nt = static_cast<int64_t>(n);

  for (size_t t = 0; t < n; ++t) {
    float* x = act_.x.data() + t * dim;
    kernels::get_row(tok_embd_, batch.tokens[t], x);
    if (c.embd_scale > 0.0f) {
      for (size_t i = 0; i < dim; ++i) x[i] *= c.embd_scale;
    }
  }
  // Each token's rotation, computed once for every layer's q and k: [n][n_rot]; and the local layers' when they
  // rotate differently (gemma3).
  const size_t n_rot = static_cast<size_t>(c.n_rot);
  const bool two_ropes = c.local_rope_differs();
  RopeTables rope;
  rope.n_rot = n_rot;
  rope.n_rot_local = two_ropes && c.n_rot_local > 0 ? static_cast<size_t>(c.n_rot_local) : n_rot;
  rope.global.resize(n * n_rot);
  rope.local.resize(two_ropes ? n * rope.n_rot_local : 0);
  for_tokens(pool, nt, [&](size_t t0, size_t t1) {
    const float* factors = c.rope_freq_factors.empty() ? nullptr : c.rope_freq_factors.data();
    const float* local_factors = c.rope_factors_global_only ? nullptr : factors;
    for (size_t t = t0; t < t1; ++t) {
      if (n_rot > 0) {
        kernels::rope_cos_sin(batch.pos[t], n_rot, c.rope_base, c.rope_freq_scale, factors, c.rope_yarn,
                              rope.global.data() + t * n_rot);
      }
      if (two_ropes && rope.n_rot_local > 0) {
        kernels::rope_cos_sin(batch.pos[t], rope.n_rot_local, c.rope_base_local, c.rope_freq_scale_local,
                              local_factors, c.rope_yarn, rope.local.data() + t * rope.n_rot_local);
      }
    }
  });

  const Step step{pool, c, batch, kv, act_, rope};
  if (per_layer_inputs_) per_layer_inputs_->compute(step);
  for (int32_t il = 0; il < c.n_layers; ++il) {
    const Block& b = blocks_[static_cast<size_t>(il)];
    b.mixer->forward(step, il);
    b.ffn->forward(step, il);
    if (b.post) b.post->forward(step, il);
  }

  // Only tokens that want logits go through the output head: their normed rows are packed into xb.
  int64_t n_want = 0;
  for (size_t t = 0; t < n; ++t) {
    if (!batch.want_logits[t]) continue;
    kernels::rmsnorm(act_.x.data() + t * dim, output_norm_.data(), act_.xb.data() + static_cast<size_t>(n_want) * dim,
                     dim, c.rms_eps);
    ++n_want;
  }
  if (n_want > 0) kernels::matmul(pool, output_, act_.xb.data(), n_want, logits, act_.quant_scratch);
  if (n_want > 0 && c.final_softcap > 0.0f) {
    kernels::softcap(logits, static_cast<size_t>(n_want) * static_cast<size_t>(c.n_vocab), c.final_softcap);
  }
}

}  // namespace preface::model
