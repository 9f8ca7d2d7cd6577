// `preface synth`: writes a random-weight model (model/synth.h) with a tokenizer copied from another GGUF.
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "gguf/types.h"
#include "model/synth.h"
#include "util/error.h"

namespace preface::cli {

namespace {
struct SynthOptions {
  model::SynthSpec spec;
  std::string type_name = "f16";
  std::string out_path;
};
}  // namespace

void register_synth(CLI::App& app) {
  auto opts = std::make_shared<SynthOptions>();
  model::SynthSpec& s = opts->spec;
  CLI::App* cmd = app.add_subcommand(
      "synth",
      "Write a random-weight llama/qwen2/qwen3moe/gpt-oss/qwen35 GGUF model (loadable by llama.cpp) with the tokenizer of "
      "another GGUF. The same options and seed always give the same bytes.");
  cmd->add_option("--out", opts->out_path, "Output GGUF path")->required();
  cmd->add_option("--vocab-from", s.vocab_from, "GGUF whose tokenizer.* metadata is copied (sets the vocab size)")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("--arch", s.arch,
                  "Architecture: llama, qwen2 (adds Q/K/V biases), qwen3moe (Q/K norms, mixture-of-experts FFN) or "
                  "gpt-oss (biases, attention sinks, a window on even layers, MXFP4 experts with biases) or qwen35 "
                  "(Gated DeltaNet layers with gated full attention every --full-attention-interval blocks)")
      ->check(CLI::IsMember({"llama", "qwen2", "qwen3moe", "gpt-oss", "qwen35"}))
      ->capture_default_str();
  cmd->add_option("--experts", s.n_experts, "qwen3moe, gpt-oss: experts per layer")->capture_default_str();
  cmd->add_option("--experts-used", s.n_experts_used, "qwen3moe, gpt-oss: experts per token")->capture_default_str();
  cmd->add_option("--expert-ffn", s.expert_ffn, "qwen3moe, gpt-oss: each expert's feed-forward length (0: ffn / 4)")
      ->capture_default_str();
  cmd->add_option("--sliding-window", s.sliding_window, "gpt-oss: the even layers' window")->capture_default_str();
  cmd->add_option("--head-dim", s.head_dim, "Attention head size (0: dim / heads)")->capture_default_str();
  cmd->add_option("--rope-dims", s.rope_dims, "qwen35: rotated dims per head (0: head size / 4)")->capture_default_str();
  cmd->add_option("--full-attention-interval", s.full_attention_interval, "qwen35: every N-th block is full attention")
      ->capture_default_str();
  cmd->add_option("--ssm-k-heads", s.ssm_k_heads, "qwen35: DeltaNet K heads")->capture_default_str();
  cmd->add_option("--ssm-v-heads", s.ssm_v_heads, "qwen35: DeltaNet V heads (a multiple of the K heads)")
      ->capture_default_str();
  cmd->add_option("--ssm-head-dim", s.ssm_head_dim, "qwen35: DeltaNet head size (the state is this squared per V head)")
      ->capture_default_str();
  cmd->add_option("--ssm-conv", s.ssm_conv, "qwen35: DeltaNet causal conv taps")->capture_default_str();
  cmd->add_option("--dim", s.dim, "Embedding length")->capture_default_str();
  cmd->add_option("--layers", s.n_layers, "Number of transformer blocks")->capture_default_str();
  cmd->add_option("--heads", s.n_heads, "Attention heads")->capture_default_str();
  cmd->add_option("--kv-heads", s.n_kv_heads, "Key/value heads (grouped-query attention)")->capture_default_str();
  cmd->add_option("--ffn", s.ffn_dim, "Feed-forward length (0: 8/3 * dim rounded up to a multiple of 32)")
      ->capture_default_str();
  cmd->add_option("--ctx", s.ctx_len, "Context length written to the metadata")->capture_default_str();
  cmd->add_option("--type", opts->type_name,
                  "Type of the 2-D weights: f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl, q4_k, q5_k, q6_k, "
                  "iq4_xs, or llama-quantize's mixes q4_k_m, q5_k_m (norms: F32; output.weight Q6_K with the K-quants "
                  "and iq4_xs)")
      ->check(CLI::IsMember({"f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "iq4_nl", "q4_k", "q5_k",
                             "q6_k", "iq4_xs", "q4_k_m", "q5_k_m"},
                            CLI::ignore_case))
      ->capture_default_str();
  cmd->add_flag("--tied", s.tied, "Tie the output head to token_embd.weight (no output.weight)");
  cmd->add_option("--seed", s.seed, "Random seed")->capture_default_str();
  cmd->add_option("--rope-base", s.rope_base, "RoPE frequency base")->capture_default_str();
  cmd->add_option("--rms-eps", s.rms_eps, "RMSNorm epsilon")->capture_default_str();
  cmd->add_option("--name", s.name, "general.name (default: synthetic-<arch>-d<dim>-l<layers>-<type>)");

  cmd->callback([opts] {
    std::string type_name = opts->type_name;
    opts->spec.k_mix = type_name.size() > 2 && (type_name.ends_with("_m") || type_name.ends_with("_M"));
    if (opts->spec.k_mix) type_name.resize(type_name.size() - 2);
    const auto type = gguf::tensor_type_from_name(type_name);
    if (!type) throw Error("synth: unknown --type '" + opts->type_name + "'");
    opts->spec.type = *type;
    model::write_synth_model(opts->spec, opts->out_path);
    const model::SynthSpec& s = opts->spec;
    std::printf("wrote %s: %s d%d l%d heads %d/%d ffn %d %s%s%s, %.1f MB\n", opts->out_path.c_str(), s.arch.c_str(),
                s.dim, s.n_layers, s.n_heads, s.n_kv_heads, model::synth_ffn_dim(s),
                std::string(gguf::tensor_type_name(s.type)).c_str(), s.k_mix ? "_M" : "", s.tied ? " tied" : "",
                static_cast<double>(std::filesystem::file_size(opts->out_path)) / 1e6);
  });
}

}  // namespace preface::cli
