// Random-weight model generation. Each tensor draws from its own generator seeded by (spec.seed, tensor name),
// so values do not depend on tensor order. Normals come from std::mt19937_64 (fully specified by the standard)
// through Box-Muller, not std::normal_distribution (implementation-defined), so files match across toolchains.
#include "model/synth.h"

#include "model/synth_tensors.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <random>
#include <string>
#include <vector>

#include "gguf/reader.h"
#include "gguf/writer.h"
#include "kernels/quant.h"
#include "util/error.h"

namespace preface::model {
namespace {

using gguf::TensorType;

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

uint64_t tensor_seed(uint64_t seed, const std::string& name) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a over the name
  for (unsigned char c : name) h = (h ^ c) * 0x100000001b3ull;
  return splitmix64(seed ^ splitmix64(h));
}

// n values ~ mean + stddev * N(0, 1).
std::vector<float> normals(uint64_t seed, size_t n, float mean, float stddev) {
  std::mt19937_64 rng(seed);
  std::vector<float> out(n);  // [n]
  constexpr double k2pow53 = 0x1p-53;
  for (size_t i = 0; i < n; i += 2) {
    const double u1 = (static_cast<double>(rng() >> 11) + 1.0) * k2pow53;  // (0, 1]: log is finite
    const double u2 = static_cast<double>(rng() >> 11) * k2pow53;          // [0, 1)
    const double r = std::sqrt(-2.0 * std::log(u1));
    const double theta = 2.0 * std::numbers::pi * u2;
    out[i] = mean + stddev * static_cast<float>(r * std::cos(theta));
    if (i + 1 < n) out[i + 1] = mean + stddev * static_cast<float>(r * std::sin(theta));
  }
  return out;
}

namespace {

uint32_t file_type_of(TensorType t) {  // llama.cpp's llama_ftype
  switch (t) {
    case TensorType::F32: return 0;
    case TensorType::F16: return 1;
    case TensorType::Q4_0: return 2;
    case TensorType::Q4_1: return 3;
    case TensorType::Q8_0: return 7;
    case TensorType::Q5_0: return 8;
    case TensorType::Q5_1: return 9;
    case TensorType::BF16: return 32;
    case TensorType::Q4_K: return 14;  // Q4_K_S (15 with the _M mix: file_type_of_spec)
    case TensorType::Q5_K: return 16;  // Q5_K_S (17 with the _M mix)
    case TensorType::Q6_K: return 18;
    case TensorType::IQ4_NL: return 25;
    case TensorType::IQ4_XS: return 30;
    default: return 0;  // synth writes only the computed types (check_spec)
  }
}

bool is_moe(const SynthSpec& s) { return s.arch == "qwen3moe" || s.arch == "gpt-oss"; }

// MXFP4 blocks of random codes for an {n_cols, n_rows x n_mats} expert tensor: one E8M0 exponent per 32 values,
// chosen so the values' RMS is about 1/sqrt(n_cols) (uniform E2M1 codes have an RMS of 2.93).
std::vector<uint8_t> random_mxfp4(uint64_t seed, uint64_t n_cols, uint64_t n_rows) {
  const auto e = static_cast<uint8_t>(127 + std::lround(std::log2(1.0 / std::sqrt(static_cast<double>(n_cols)) / 2.93)));
  std::vector<uint8_t> bytes(gguf::row_bytes(TensorType::MXFP4, n_cols) * n_rows);
  std::mt19937_64 rng(seed);
  for (size_t b = 0; b < bytes.size(); b += 17) {
    bytes[b] = e;
    for (size_t i = 1; i < 17; ++i) bytes[b + i] = static_cast<uint8_t>(rng());
  }
  return bytes;
}

void check_spec(const SynthSpec& s, int32_t ffn) {
  auto fail = [](const std::string& what) { throw Error("synth: " + what); };
  if (s.arch != "llama" && s.arch != "qwen2" && s.arch != "qwen3moe" && s.arch != "gpt-oss" && s.arch != "qwen35") {
    fail("unsupported arch '" + s.arch + "' (llama, qwen2, qwen3moe, gpt-oss or qwen35)");
  }
  if (s.arch == "qwen35") check_qwen35_spec(s);
  if (s.arch == "gpt-oss" && (s.sliding_window < 1 || synth_expert_ffn(s) % 32 != 0)) {
    fail("gpt-oss: the sliding window must be positive and the expert ffn a multiple of 32 (MXFP4)");
  }
  if (is_moe(s) && (s.n_experts < 1 || s.n_experts > 1024 || s.n_experts_used < 1 ||
                               s.n_experts_used > s.n_experts || s.expert_ffn < 0 || s.expert_ffn > 262144)) {
    fail("experts: 1 <= used <= experts <= 1024 and expert ffn <= 262144");
  }
  if (s.dim <= 0 || s.n_layers <= 0 || s.n_heads <= 0 || s.n_kv_heads <= 0 || ffn <= 0 || s.ctx_len <= 0) {
    fail("dim, layers, heads, kv-heads, ffn and ctx must be positive");
  }
  // Bounds keep a typo from asking for terabytes (the whole model is built in memory).
  if (s.dim > 65536 || ffn > 262144 || s.n_layers > 1024) fail("dim, ffn or layers is implausibly large");
  if (s.head_dim == 0 && s.dim % s.n_heads != 0) fail("dim " + std::to_string(s.dim) + " is not a multiple of heads");
  if (synth_head_dim(s) % 2 != 0) fail("head dim " + std::to_string(synth_head_dim(s)) + " must be even (rope)");
  if (s.head_dim < 0 || s.head_dim > 4096) fail("head dim must be in [0, 4096]");
  if (s.head_dim != 0 && s.arch != "qwen35" && s.head_dim * s.n_heads != s.dim) {
    fail("a head dim other than dim / heads is written only for qwen35");
  }
  if (s.n_heads % s.n_kv_heads != 0) fail("heads must be a multiple of kv-heads");
  const kernels::QuantTraits* traits = kernels::quant_traits(s.type);
  if (!gguf::type_has_codec(s.type) && (traits == nullptr || traits->quantize == nullptr)) {
    fail("no quantizer for " + std::string(gguf::tensor_type_name(s.type)));
  }
  if (s.k_mix && s.type != TensorType::Q4_K && s.type != TensorType::Q5_K) fail("the _M mix needs Q4_K or Q5_K");
  int32_t block = static_cast<int32_t>(gguf::type_block_values(s.type));
  if (synth_tensor_type(s, "output.weight") != s.type) block = std::max(block, int32_t{256});  // Q6_K rows
  if (s.dim % block != 0 || ffn % block != 0 || (is_moe(s) && synth_expert_ffn(s) % block != 0)) {
    fail("dim and ffn must be multiples of " + std::to_string(block) + " for " +
         std::string(gguf::tensor_type_name(s.type)));
  }
  if (s.arch == "qwen35" && ((synth_head_dim(s) * s.n_heads) % block != 0 || (s.ssm_v_heads * s.ssm_head_dim) % block != 0)) {
    fail("qwen35: heads x head dim and DeltaNet V heads x head size must be multiples of " + std::to_string(block));
  }
  if (!(s.rope_base > 0.0f) || !(s.rms_eps > 0.0f)) fail("rope base and rms eps must be positive");
  if (s.vocab_from.empty()) fail("a vocabulary GGUF (vocab_from) is required");
}

// llama.cpp's use_more_bits(i_layer, n_layers): the layers its _M mixes give Q6_K attn_v and ffn_down.
bool use_more_bits(int32_t layer, int32_t n_layers) {
  return layer < n_layers / 8 || layer >= 7 * n_layers / 8 || (layer - n_layers / 8) % 3 == 2;
}

bool is_k_or_iq(TensorType t) {
  return t == TensorType::Q4_K || t == TensorType::Q5_K || t == TensorType::Q6_K || t == TensorType::IQ4_XS;
}

}  // namespace

gguf::TensorType synth_tensor_type(const SynthSpec& spec, const std::string& name) {
  if (name == "output.weight" && is_k_or_iq(spec.type)) return TensorType::Q6_K;
  if (spec.k_mix && name.starts_with("blk.") &&
      (name.ends_with(".attn_v.weight") || name.ends_with(".ffn_down.weight"))) {
    const int32_t layer = std::stoi(name.substr(4));
    if (use_more_bits(layer, spec.n_layers)) return TensorType::Q6_K;
  }
  return spec.type;
}

int32_t synth_expert_ffn(const SynthSpec& spec) {
  if (spec.expert_ffn != 0) return spec.expert_ffn;
  return (synth_ffn_dim(spec) / 4 + 31) / 32 * 32;
}

int32_t synth_head_dim(const SynthSpec& spec) {
  return spec.head_dim > 0 ? spec.head_dim : spec.dim / std::max(spec.n_heads, 1);
}

int32_t synth_ffn_dim(const SynthSpec& spec) {
  if (spec.ffn_dim != 0) return spec.ffn_dim;
  const int64_t raw = (int64_t{8} * spec.dim + 2) / 3;
  return static_cast<int32_t>((raw + 31) / 32 * 32);
}

void write_synth_model(const SynthSpec& spec, const std::string& out_path) {
  const int32_t ffn = synth_ffn_dim(spec);
  check_spec(spec, ffn);
  const gguf::File vocab = gguf::File::open(spec.vocab_from);
  const gguf::Value* tokens = vocab.find("tokenizer.ggml.tokens");
  if (tokens == nullptr || !tokens->is_array() || tokens->elem_type != gguf::ValueType::STRING ||
      tokens->strs.empty()) {
    throw Error("synth: '" + spec.vocab_from + "' has no tokenizer.ggml.tokens string array");
  }
  const uint64_t n_vocab = tokens->strs.size();
  const uint64_t dim = static_cast<uint64_t>(spec.dim);
  const auto head_dim = static_cast<uint64_t>(synth_head_dim(spec));
  const uint64_t kv_dim = head_dim * static_cast<uint64_t>(spec.n_kv_heads);
  const std::string a = spec.arch + ".";

  gguf::Writer w;
  w.set_string("general.architecture", spec.arch);
  w.set_string("general.name", !spec.name.empty() ? spec.name
                                                   : "synthetic-" + spec.arch + "-d" + std::to_string(spec.dim) +
                                                         "-l" + std::to_string(spec.n_layers) + "-" +
                                                         std::string(gguf::tensor_type_name(spec.type)));
  w.set_u32("general.alignment", 32);
  // gpt-oss: llama.cpp's MOSTLY_MXFP4_MOE.
  w.set_u32("general.file_type", spec.arch == "gpt-oss" ? 38 : file_type_of(spec.type) + (spec.k_mix ? 1 : 0));
  w.set_u32(a + "context_length", static_cast<uint32_t>(spec.ctx_len));
  w.set_u32(a + "embedding_length", static_cast<uint32_t>(spec.dim));
  w.set_u32(a + "block_count", static_cast<uint32_t>(spec.n_layers));
  w.set_u32(a + "feed_forward_length", static_cast<uint32_t>(ffn));
  w.set_u32(a + "attention.head_count", static_cast<uint32_t>(spec.n_heads));
  w.set_u32(a + "attention.head_count_kv", static_cast<uint32_t>(spec.n_kv_heads));
  w.set_f32(a + "attention.layer_norm_rms_epsilon", spec.rms_eps);
  w.set_f32(a + "rope.freq_base", spec.rope_base);
  if (spec.arch != "qwen35") w.set_u32(a + "rope.dimension_count", static_cast<uint32_t>(head_dim));
  w.set_u32(a + "vocab_size", static_cast<uint32_t>(n_vocab));
  const bool moe = is_moe(spec), gpt_oss = spec.arch == "gpt-oss";
  const uint64_t n_experts = static_cast<uint64_t>(spec.n_experts), expert_ffn = moe ? synth_expert_ffn(spec) : 0;
  if (gpt_oss) w.set_u32(a + "attention.sliding_window", static_cast<uint32_t>(spec.sliding_window));
  if (spec.arch == "qwen35") set_qwen35_metadata(w, spec);
  if (moe) {
    w.set_u32(a + "attention.key_length", static_cast<uint32_t>(head_dim));
    w.set_u32(a + "attention.value_length", static_cast<uint32_t>(head_dim));
    w.set_u32(a + "expert_count", static_cast<uint32_t>(spec.n_experts));
    w.set_u32(a + "expert_used_count", static_cast<uint32_t>(spec.n_experts_used));
    w.set_u32(a + "expert_feed_forward_length", static_cast<uint32_t>(expert_ffn));
  }
  for (const auto& [key, value] : vocab.metadata()) {
    if (key.starts_with("tokenizer.")) w.set_value(key, value);
  }

  const SynthTensors t{w, spec};
  auto matrix = [&](const std::string& name, uint64_t n_cols, uint64_t n_rows, uint64_t n_mats = 1) {
    t.matrix(name, n_cols, n_rows, n_mats);
  };
  auto norm_or_bias = [&](const std::string& name, uint64_t n, float mean, float stddev) { t.vec(name, n, mean, stddev); };

  matrix("token_embd.weight", dim, n_vocab);
  norm_or_bias("output_norm.weight", dim, 1.0f, 0.05f);
  if (!spec.tied) matrix("output.weight", dim, n_vocab);
  if (spec.arch == "qwen35") {
    write_qwen35_layers(t, ffn);
    w.write(out_path);
    return;
  }
  for (int32_t layer = 0; layer < spec.n_layers; ++layer) {
    const std::string p = "blk." + std::to_string(layer) + ".";
    norm_or_bias(p + "attn_norm.weight", dim, 1.0f, 0.05f);
    matrix(p + "attn_q.weight", dim, dim);
    matrix(p + "attn_k.weight", dim, kv_dim);
    matrix(p + "attn_v.weight", dim, kv_dim);
    if (spec.arch == "qwen2" || gpt_oss) {
      norm_or_bias(p + "attn_q.bias", dim, 0.0f, 0.1f);
      norm_or_bias(p + "attn_k.bias", kv_dim, 0.0f, 0.1f);
      norm_or_bias(p + "attn_v.bias", kv_dim, 0.0f, 0.1f);
    }
    matrix(p + "attn_output.weight", dim, dim);
    if (gpt_oss) {
      norm_or_bias(p + "attn_output.bias", dim, 0.0f, 0.1f);
      norm_or_bias(p + "attn_sinks.weight", static_cast<uint64_t>(spec.n_heads), 0.0f, 1.0f);
      norm_or_bias(p + "post_attention_norm.weight", dim, 1.0f, 0.05f);
      t.f32_matrix(p + "ffn_gate_inp.weight", dim, n_experts);
      norm_or_bias(p + "ffn_gate_inp.bias", n_experts, 0.0f, 0.1f);
      const auto experts = [&](const std::string& name, uint64_t n_cols, uint64_t n_rows) {
        w.add_tensor(name, TensorType::MXFP4, {n_cols, n_rows, n_experts},
                     random_mxfp4(tensor_seed(spec.seed, name), n_cols, n_rows * n_experts));
        w.add_tensor_f32(name.substr(0, name.size() - 6) + "bias", TensorType::F32, {n_rows, n_experts},
                         normals(tensor_seed(spec.seed, name + ".bias"), n_rows * n_experts, 0.0f, 0.1f));
      };
      experts(p + "ffn_gate_exps.weight", dim, expert_ffn);
      experts(p + "ffn_up_exps.weight", dim, expert_ffn);
      experts(p + "ffn_down_exps.weight", expert_ffn, dim);
      continue;
    }
    if (moe) {
      norm_or_bias(p + "attn_q_norm.weight", head_dim, 1.0f, 0.05f);
      norm_or_bias(p + "attn_k_norm.weight", head_dim, 1.0f, 0.05f);
    }
    norm_or_bias(p + "ffn_norm.weight", dim, 1.0f, 0.05f);
    if (moe) {
      t.f32_matrix(p + "ffn_gate_inp.weight", dim, n_experts);
      matrix(p + "ffn_gate_exps.weight", dim, expert_ffn, n_experts);
      matrix(p + "ffn_up_exps.weight", dim, expert_ffn, n_experts);
      matrix(p + "ffn_down_exps.weight", expert_ffn, dim, n_experts);
      continue;
    }
    matrix(p + "ffn_gate.weight", dim, static_cast<uint64_t>(ffn));
    matrix(p + "ffn_up.weight", dim, static_cast<uint64_t>(ffn));
    matrix(p + "ffn_down.weight", static_cast<uint64_t>(ffn), dim);
  }
  w.write(out_path);
}

void SynthTensors::matrix(const std::string& name, uint64_t n_cols, uint64_t n_rows, uint64_t n_mats) const {
  const float stddev = 1.0f / std::sqrt(static_cast<float>(n_cols));
  const TensorType type = synth_tensor_type(spec, name);
  const std::vector<float> values = normals(tensor_seed(spec.seed, name), n_cols * n_rows * n_mats, 0.0f, stddev);
  std::vector<uint64_t> dims = {n_cols, n_rows};
  if (n_mats > 1) dims.push_back(n_mats);
  if (gguf::type_has_codec(type)) {
    w.add_tensor_f32(name, type, dims, values);
    return;
  }
  std::vector<uint8_t> bytes(gguf::row_bytes(type, n_cols) * n_rows * n_mats);
  kernels::quant_traits(type)->quantize(values.data(), bytes.data(), values.size());
  w.add_tensor(name, type, dims, std::move(bytes));
}

void SynthTensors::f32_matrix(const std::string& name, uint64_t n_cols, uint64_t n_rows) const {
  const float stddev = 1.0f / std::sqrt(static_cast<float>(n_cols));
  w.add_tensor_f32(name, TensorType::F32, {n_cols, n_rows},
                   normals(tensor_seed(spec.seed, name), n_cols * n_rows, 0.0f, stddev));
}

void SynthTensors::vec(const std::string& name, uint64_t n, float mean, float stddev) const {
  w.add_tensor_f32(name, TensorType::F32, {n}, normals(tensor_seed(spec.seed, name), n, mean, stddev));
}

}  // namespace preface::model
