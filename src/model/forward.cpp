// Model::forward: one batch of tokens from any number of sequences through every layer.
#include <algorithm>
#include <string>
#include <vector>

#include "kernels/ops.h"
#include "model/attention.h"
#include "model/model.h"
#include "util/error.h"

namespace preface::model {

void ForwardBatch::clear() {
  tokens.clear();
  pos.clear();
  seq.clear();
  want_logits.clear();
}

void ForwardBatch::add(int32_t token, int32_t position, int32_t seq_index, bool logits) {
  tokens.push_back(token);
  pos.push_back(position);
  seq.push_back(seq_index);
  want_logits.push_back(logits ? 1 : 0);
}

namespace {

void check_kv(const Config& c, const kernels::KvView& kv) {
  if (kv.row_values != c.kv_row_values()) {
    throw Error("KV storage rows hold " + std::to_string(kv.row_values) + " values, the model needs " +
                std::to_string(c.kv_row_values()));
  }
  if (kv.k_layers.size() != static_cast<size_t>(c.n_layers) ||
      kv.v_layers.size() != static_cast<size_t>(c.n_layers)) {
    throw Error("KV storage has the wrong number of layers for this model");
  }
  if (kv.block_size < 1 || kv.n_blocks < 1) throw Error("KV storage has no blocks");
  kernels::check_kv_type_fits(kv.type, c.head_dim);
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

// Batches of at least this many tokens run their per-token passes (norms, rope, KV stores, activation) on the
// pool; smaller ones inline on the calling thread, since waking the pool costs more than the work (the choice of
// threshold is measured in docs/perf-log/).
constexpr int64_t kParallelTokens = 8;

// fn(t_begin, t_end) over [0, n_tokens). Each token's work is independent of the others, so the split changes
// nothing in the results.
template <typename Fn>
void for_tokens(ThreadPool& pool, int64_t n_tokens, const Fn& fn) {
  if (n_tokens >= kParallelTokens) {
    pool.parallel_for(n_tokens,
                      [&fn](int64_t t0, int64_t t1) { fn(static_cast<size_t>(t0), static_cast<size_t>(t1)); });
  } else {
    fn(size_t{0}, static_cast<size_t>(n_tokens));
  }
}

void add_bias(float* row, const std::vector<float>& bias) {
  for (size_t i = 0; i < bias.size(); ++i) row[i] += bias[i];
}

void add_row(float* x, const float* y, size_t n_values) {
  for (size_t i = 0; i < n_values; ++i) x[i] += y[i];
}

}  // namespace

void Model::forward(const ForwardBatch& batch, const kernels::KvView& kv, ThreadPool& pool, float* logits) {
  const Config& c = config_;
  check_kv(c, kv);
  check_batch(c, batch, kv, max_batch_tokens_);
  const size_t n = batch.size();
  const size_t dim = static_cast<size_t>(c.dim), kv_dim = static_cast<size_t>(c.kv_row_values());
  const size_t q_dim = static_cast<size_t>(c.q_dim()), head_dim = static_cast<size_t>(c.head_dim);
  const size_t ffn = static_cast<size_t>(c.ffn_dim);
  const int64_t nt = static_cast<int64_t>(n);

  for (size_t t = 0; t < n; ++t) {
    float* x = x_.data() + t * dim;
    kernels::get_row(tok_embd_, batch.tokens[t], x);
    if (c.embd_scale > 0.0f) {
      for (size_t i = 0; i < dim; ++i) x[i] *= c.embd_scale;
    }
  }
  // Each token's rotation, computed once for every layer's q and k: [n][n_rot]; and the local layers' when they
  // rotate differently (gemma3).
  const size_t n_rot = static_cast<size_t>(c.n_rot);
  const bool two_ropes = c.local_rope_differs();
  std::vector<float> rope_cs(n * n_rot), rope_cs_local(two_ropes ? n * n_rot : 0);
  for_tokens(pool, nt, [&](size_t t0, size_t t1) {
    const float* factors = c.rope_freq_factors.empty() ? nullptr : c.rope_freq_factors.data();
    for (size_t t = t0; t < t1 && n_rot > 0; ++t) {
      kernels::rope_cos_sin(batch.pos[t], n_rot, c.rope_base, c.rope_freq_scale, factors, c.rope_yarn,
                            rope_cs.data() + t * n_rot);
      if (two_ropes) {
        kernels::rope_cos_sin(batch.pos[t], n_rot, c.rope_base_local, c.rope_freq_scale_local, factors, c.rope_yarn,
                              rope_cs_local.data() + t * n_rot);
      }
    }
  });

  for (int32_t il = 0; il < c.n_layers; ++il) {
    const LayerWeights& l = layers_[static_cast<size_t>(il)];
    const std::vector<float>& layer_cs = two_ropes && c.is_local(il) ? rope_cs_local : rope_cs;
    // x += the previous layer's FFN output (none before the first layer), then the attention norm.
    for_tokens(pool, nt, [&](size_t t0, size_t t1) {
      for (size_t t = t0; t < t1; ++t) {
        if (il > 0) add_row(x_.data() + t * dim, ffn_out_.data() + t * dim, dim);
        kernels::rmsnorm(x_.data() + t * dim, l.attn_norm.data(), xb_.data() + t * dim, dim, c.rms_eps);
      }
    });
    kernels::matmul_multi(pool, {&l.wq, &l.wk, &l.wv}, xb_.data(), nt, {q_.data(), k_.data(), v_.data()},
                          quant_scratch_);
    for_tokens(pool, nt, [&](size_t t0, size_t t1) {
      for (size_t t = t0; t < t1; ++t) {
        float* q = q_.data() + t * q_dim;  // [n_heads][head_dim]
        float* k = k_.data() + t * kv_dim;  // [n_kv_heads][head_dim]
        add_bias(q, l.bq);
        add_bias(k, l.bk);
        add_bias(v_.data() + t * kv_dim, l.bv);
        if (!l.q_norm.empty()) {  // qwen3: each head normalized on its own, in place, before RoPE
          for (int32_t h = 0; h < c.n_heads; ++h) {
            float* qh = q + static_cast<size_t>(h) * head_dim;
            kernels::rmsnorm(qh, l.q_norm.data(), qh, head_dim, c.rms_eps);
          }
          for (int32_t h = 0; h < c.n_kv_heads; ++h) {
            float* kh = k + static_cast<size_t>(h) * head_dim;
            kernels::rmsnorm(kh, l.k_norm.data(), kh, head_dim, c.rms_eps);
          }
        }
        if (n_rot > 0) {
          const float* cs = layer_cs.data() + t * n_rot;
          kernels::rope_apply(q, c.n_heads, c.head_dim, n_rot, cs, c.rope_neox);
          kernels::rope_apply(k, c.n_kv_heads, c.head_dim, n_rot, cs, c.rope_neox);
        }
      }
      detail::store_kv(batch, kv, il, k_.data(), v_.data(), t0, t1);
    });
    detail::attention(pool, c, batch, kv, il, q_.data(), attn_out_.data(), attn_scratch_);
    kernels::matmul(pool, l.wo, attn_out_.data(), nt, xb_.data(), quant_scratch_);
    // x += attention output (gemma: normed first), then the FFN norm (xb_ holds the wo output until each token's
    // norm overwrites it).
    for_tokens(pool, nt, [&](size_t t0, size_t t1) {
      for (size_t t = t0; t < t1; ++t) {
        float* out = xb_.data() + t * dim;
        if (!l.attn_post_norm.empty()) kernels::rmsnorm(out, l.attn_post_norm.data(), out, dim, c.rms_eps);
        add_row(x_.data() + t * dim, out, dim);
        kernels::rmsnorm(x_.data() + t * dim, l.ffn_norm.data(), xb_.data() + t * dim, dim, c.rms_eps);
      }
    });
    kernels::matmul_multi(pool, {&l.w_gate, &l.w_up}, xb_.data(), nt, {gate_.data(), up_.data()}, quant_scratch_);
    for_tokens(pool, nt, [&](size_t t0, size_t t1) {
      if (c.ffn_gelu) {
        kernels::geglu(gate_.data() + t0 * ffn, up_.data() + t0 * ffn, (t1 - t0) * ffn);
      } else {
        kernels::swiglu(gate_.data() + t0 * ffn, up_.data() + t0 * ffn, (t1 - t0) * ffn);
      }
    });
    kernels::matmul(pool, l.w_down, gate_.data(), nt, ffn_out_.data(), quant_scratch_);
    if (!l.ffn_post_norm.empty()) {  // gemma: the FFN output normed before the next residual add
      for_tokens(pool, nt, [&](size_t t0, size_t t1) {
        for (size_t t = t0; t < t1; ++t) {
          float* out = ffn_out_.data() + t * dim;
          kernels::rmsnorm(out, l.ffn_post_norm.data(), out, dim, c.rms_eps);
        }
      });
    }
  }
  for_tokens(pool, nt, [&](size_t t0, size_t t1) {
    for (size_t t = t0; t < t1; ++t) add_row(x_.data() + t * dim, ffn_out_.data() + t * dim, dim);
  });

  // Only tokens that want logits go through the output head: their normed rows are packed into xb_.
  int64_t n_want = 0;
  for (size_t t = 0; t < n; ++t) {
    if (!batch.want_logits[t]) continue;
    kernels::rmsnorm(x_.data() + t * dim, output_norm_.data(), xb_.data() + static_cast<size_t>(n_want) * dim,
                     dim, c.rms_eps);
    ++n_want;
  }
  if (n_want > 0) kernels::matmul(pool, output_, xb_.data(), n_want, logits, quant_scratch_);
  if (n_want > 0 && c.final_softcap > 0.0f) {
    kernels::softcap(logits, static_cast<size_t>(n_want) * static_cast<size_t>(c.n_vocab), c.final_softcap);
  }
}

}  // namespace preface::model
