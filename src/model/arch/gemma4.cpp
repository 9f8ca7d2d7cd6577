// gemma4 (Gemma 4 E2B/E4B, 31B; dense): Gemma's block (embeddings scaled by sqrt(dim), RMSNorm before and after
// attention and FFN, GeGLU, norm weights applied as stored) with
// - a per-layer pattern of sliding-window and global layers (attention.sliding_window_pattern: true = sliding) of
//   their own shapes: sliding layers with head size key_length_swa, RoPE over rope.dimension_count_swa dims at base
//   rope.freq_base_swa; global layers with head size key_length and RoPE at rope.freq_base whose rope_freqs factors
//   leave all but the first dims unrotated (Gemma 4's "proportional" RoPE); KV heads per layer
//   (attention.head_count_kv as an array) and FFN widths per layer (feed_forward_length as an array);
// - Q and K RMS-normalized per head, V RMS-normalized without a weight, attention scale 1, V = K's projection on a
//   layer without attn_v;
// - KV sharing: the last attention.shared_kv_layers layers store nothing and attend over the rows of the last
//   earlier layer of their kind (a memory spec of kind None, model/base/memory.h);
// - per-layer embeddings (embedding_length_per_layer_input, model/layers/per_layer_input.h) and each block's
//   output multiplied by layer_output_scale;
// - logits soft-capped at final_logit_softcapping (llama.cpp's default 30 where absent).
#include <cmath>
#include <memory>
#include <string>

#include "model/arch/registry.h"
#include "model/layers/attention_layer.h"
#include "model/layers/gated_ffn.h"
#include "model/layers/per_layer_input.h"
#include "util/error.h"

namespace preface::model {
namespace {

void read_gemma4(const gguf::File& file, const std::string& prefix, Config& c) {
  c.embd_scale = std::sqrt(static_cast<float>(c.dim));
  c.post_norms = true;
  c.ffn_gelu = true;
  c.v_norm = true;
  c.query_scale = 1.0f;
  c.final_softcap = positive_float(file, prefix + "final_logit_softcapping").value_or(30.0f);
  c.sliding_window = read_window(file, prefix, 512);
  if (c.sliding_window < 1) throw Error("metadata " + prefix + "attention.sliding_window must be >= 1");

  const std::string pattern_key = prefix + "attention.sliding_window_pattern";
  const gguf::Value* pattern = file.find(pattern_key);
  if (pattern == nullptr || !pattern->is_array() || pattern->nums.size() != static_cast<size_t>(c.n_layers)) {
    throw Error("metadata " + pattern_key + " is not an array of a flag per block");
  }
  c.layer_local.assign(static_cast<size_t>(c.n_layers), 0);
  for (size_t il = 0; il < c.layer_local.size(); ++il) c.layer_local[il] = pattern->nums[il] != 0 ? 1 : 0;
  if (c.any_local()) {
    c.head_dim_local = read_int_in(file, prefix + "attention.key_length_swa", 1, 1 << 16);
    if (file.try_int(prefix + "attention.value_length_swa").value_or(c.head_dim_local) != c.head_dim_local) {
      throw Error("unsupported: " + prefix + "attention.value_length_swa differs from key_length_swa");
    }
    c.n_rot_local = read_int_in(file, prefix + "rope.dimension_count_swa", 2, c.head_dim_local, c.head_dim_local);
    if (c.n_rot_local % 2 != 0) throw Error("metadata " + prefix + "rope.dimension_count_swa must be even");
    c.rope_base_local = positive_float(file, prefix + "rope.freq_base_swa").value_or(10000.0f);
    c.rope_freq_scale_local = 1.0f;
    c.rope_factors_global_only = true;
  }

  const int32_t n_shared = read_int_in(file, prefix + "attention.shared_kv_layers", 0, c.n_layers - 1, 0);
  const int32_t first_shared = c.n_layers - n_shared;
  c.layer_kv_source.resize(static_cast<size_t>(c.n_layers));
  for (int32_t il = 0; il < c.n_layers; ++il) {
    int32_t source = il;
    if (il >= first_shared) {
      source = -1;
      for (int32_t j = first_shared - 1; j >= 0 && source < 0; --j) source = c.is_local(j) == c.is_local(il) ? j : -1;
      if (source < 0) throw Error("layer " + std::to_string(il) + " shares KV but no earlier layer is of its kind");
      if (c.kv_heads_of(source) != c.kv_heads_of(il)) {
        throw Error("layer " + std::to_string(il) + " shares the KV of layer " + std::to_string(source) +
                    " but has another head_count_kv");
      }
    }
    c.layer_kv_source[static_cast<size_t>(il)] = source;
  }
  c.ple_dim = read_int_in(file, prefix + "embedding_length_per_layer_input", 0, 1 << 16, 0);
}

Block gemma4_block(const gguf::File& file, const Config& c, int32_t il) {
  AttentionOptions a;
  a.qk_norm = true;
  a.post_norm = true;
  a.local = c.is_local(il);
  a.v_from_k = true;
  FfnOptions f;
  f.activation = FfnActivation::GeGLU;
  f.post_norm = true;
  Block b;
  b.mixer = std::make_unique<AttentionLayer>(file, c, il, a);
  b.ffn = std::make_unique<GatedFfn>(file, c, il, f);
  b.post = std::make_unique<PerLayerEmbedding>(file, c, il);
  return b;
}

MemorySpec gemma4_memory(const Config& c, int32_t il) { return AttentionLayer::memory(c, il); }

}  // namespace

extern const Architecture kGemma4 = {"gemma4", /*rope_neox=*/true, /*qkv_bias=*/false, /*qk_norm=*/true,
                                     /*fused_projections=*/false, read_gemma4, gemma4_block, gemma4_memory};

}  // namespace preface::model
