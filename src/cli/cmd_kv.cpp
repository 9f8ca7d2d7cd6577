// `preface kv`: the KV-cache calculator. For a model shape (built in, or read from a GGUF): bytes per token
// for each KV dtype, the tokens and blocks a byte budget holds, and what a prefix of N tokens costs in memory and
// saves in prefill compute and time. Text for people, --json for machines.
//
// Seconds saved per hit: the prefix's tokens at a prefill rate, --prefill-rate when given, else (with -m and
// --prefix) measured here: the model is loaded and one prompt of min(N, kMaxMeasuredTokens) tokens is prefilled
// through the engine (after a short warm-up), as the server's engine measures its own rate
// (engine::EngineCounters::prefill_tokens_per_s). --no-measure skips it.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/local_engine.h"
#include "cli/options.h"
#include "gguf/reader.h"
#include "model/capacity.h"
#include "util/bytes.h"
#include "util/error.h"

namespace preface::cli {
namespace {

struct KvOptions {
  ModelOptions model;
  std::string shape;
  int32_t block_size = 0;  // 0: 16, or 32 with per-channel keys (block_size_of)
  std::string mem;          // --mem, parse_bytes syntax; empty: a table of common budgets
  std::string prefix;       // --prefix, tokens (decimal digits); empty: no prefix
  std::string context;      // --context, tokens: what one sequence of that length holds, per memory group
  bool json = false;
  bool list_shapes = false;
  double prefill_rate = 0;  // --prefill-rate, tokens/s; 0: measure (with -m) or none
  bool no_measure = false;
};

constexpr int32_t kMaxMeasuredTokens = 512;

// Budgets shown when --mem is absent.
constexpr uint64_t kDefaultBudgets[] = {1ull << 30, 8ull << 30, 16ull << 30, 64ull << 30};

// 8030261248 -> "8,030,261,248".
std::string group_digits(uint64_t n) {
  std::string digits = std::to_string(n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i != 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

// short_sci(9.797e13, 1) = "9.8e13"; short_sci(8030261248, 2) = "8.03e9".
std::string short_sci(double v, int n_decimals) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*e", n_decimals, v);
  std::string s = buf;
  const size_t e = s.find('e');
  if (e == std::string::npos) return s;
  std::string mant = s.substr(0, e), exp = s.substr(e + 1);
  const bool neg = !exp.empty() && exp[0] == '-';
  if (!exp.empty() && (exp[0] == '+' || exp[0] == '-')) exp.erase(0, 1);
  while (exp.size() > 1 && exp[0] == '0') exp.erase(0, 1);
  return mant + "e" + (neg ? "-" : "") + exp;
}

// Everything printed, computed before printing so that an error leaves no partial report.
struct Report {
  model::KvShape shape;
  model::MemoryLayout memory;     // model::memory_layout(shape), computed once: bytes per token and the groups
  kernels::KvFormat dtype;
  std::vector<model::KvBudget> budgets;  // [1] with --mem, else one per kDefaultBudgets
  std::optional<model::PrefixCost> prefix;
  double prefill_rate = 0;        // tokens/s; 0: unknown
  std::string rate_source;        // "given" | "measured over N tokens on T threads"
  uint64_t context = 0;                 // --context; 0: none
  std::vector<model::GroupHold> holds;  // [groups] at context
};

// Prefill tokens per second of the model through the engine: a warm-up prompt, then one of n_tokens tokens.
double measure_prefill_rate(const KvOptions& o, int32_t n_tokens, int32_t* n_measured) {
  const std::string path = resolve_model_path(o.model.model_path);
  auto model = model::Model::load(path);
  const auto tokenizer = Tokenizer::from_gguf(model->file());
  n_tokens = std::clamp(n_tokens, 1, std::min({kMaxMeasuredTokens, model->config().ctx_len - 1,
                                               model->max_batch_tokens()}));
  *n_measured = n_tokens;
  ModelOptions mo = o.model;
  mo.block_size = o.block_size;
  auto eng = local_engine(*model, *tokenizer, mo, n_tokens + 1);
  double prefill_ms = 0;
  for (const int32_t n : {std::min(n_tokens, 16), n_tokens}) {
    engine::RequestParams p;
    for (int32_t i = 0; i < n; ++i) p.prompt.push_back((i * 7919 + 13) % model->config().n_vocab);
    p.max_new_tokens = 1;
    p.ignore_eos = true;
    auto stream = eng->submit(std::move(p));
    eng->run_until_idle();
    while (stream->next()) {
    }
    prefill_ms = stream->stats().prefill_ms;
  }
  return prefill_ms > 0 ? n_tokens / (prefill_ms / 1e3) : 0;
}

uint64_t parse_token_count(const std::string& text) {
  if (text.empty() || text.size() > 19 || text.find_first_not_of("0123456789") != std::string::npos) {
    throw Error("--prefix '" + text + "': expected a whole number of tokens");
  }
  return std::stoull(text);
}

model::KvShape load_shape(const KvOptions& o) {
  if (!o.shape.empty()) {
    if (auto s = model::builtin_shape(o.shape)) return *s;
    std::string names;
    for (const std::string& n : model::builtin_shape_names()) names += (names.empty() ? "" : ", ") + n;
    throw Error("unknown shape '" + o.shape + "' (built in: " + names + ")");
  }
  const gguf::File file = gguf::File::open(resolve_model_path(o.model.model_path));
  return model::shape_from_gguf(file);
}

nlohmann::json budget_json(const model::KvBudget& b) {
  return {{"budget_bytes", b.budget_bytes}, {"block_bytes", b.block_bytes}, {"n_blocks", b.n_blocks},
          {"n_tokens", b.n_tokens}};
}

void print_json(const KvOptions& o, const Report& r) {
  const model::KvShape& s = r.shape;
  nlohmann::json j;
  j["shape"] = {{"name", s.name},           {"arch", s.arch},         {"n_layers", s.n_layers},
                {"n_heads", s.n_heads},     {"n_kv_heads", s.n_kv_heads}, {"head_dim", s.head_dim},
                {"dim", s.dim},             {"ffn_dim", s.ffn_dim},   {"n_vocab", s.n_vocab},
                {"tied_embeddings", s.tied_embeddings}, {"qkv_bias", s.qkv_bias}, {"n_params", s.n_params},
                {"params_source", std::string(model::param_source_text(s.params_source))}};
  nlohmann::json per_token = nlohmann::json::object();
  for (kernels::KvType d : kernels::kAllKvTypes) {
    per_token[kernels::kv_type_name(d)] = r.memory.paged_bytes_per_token(d);
  }
  j["bytes_per_token"] = per_token;
  j["memory_groups"] = nlohmann::json::array();
  for (const model::MemoryGroup& g : r.memory.groups()) {
    nlohmann::json group = {{"layers", g.layers}, {"kind", model::memory_kind_name(g.spec.kind)}};
    if (g.spec.kind == model::MemoryKind::PagedRows) {
      group["n_kv_heads"] = g.spec.n_kv_heads;
      group["k_head_dim"] = g.spec.k_head_dim;
      group["v_head_dim"] = g.spec.v_head_dim;
      group["window"] = g.spec.window;
      nlohmann::json bytes = nlohmann::json::object();
      for (kernels::KvType d : kernels::kAllKvTypes) {
        bytes[kernels::kv_type_name(d)] = g.spec.token_bytes(d) * g.layers.size();
      }
      group["bytes_per_token"] = bytes;
    } else if (g.spec.kind == model::MemoryKind::State) {
      group["bytes_per_sequence"] = g.spec.state_bytes * g.layers.size();
    } else {
      group["source_layer"] = g.spec.source_layer;
    }
    j["memory_groups"].push_back(group);
  }
  j["kv_type"] = r.dtype.name();
  j["kv_type_k"] = kernels::kv_type_name(r.dtype.k);
  j["kv_type_v"] = kernels::kv_type_name(r.dtype.v);
  j["kv_rotate_k"] = r.dtype.rotate_k;
  j["kv_rotate_v"] = r.dtype.rotate_v;
  j["kv_bytes_per_token"] = r.memory.paged_bytes_per_token(r.dtype);
  j["block_size"] = o.block_size;
  j["budgets"] = nlohmann::json::array();
  for (const model::KvBudget& b : r.budgets) j["budgets"].push_back(budget_json(b));
  if (r.prefix) {
    const model::PrefixCost& c = *r.prefix;
    j["prefix"] = {{"n_tokens", c.n_tokens},       {"exact_bytes", c.exact_bytes}, {"n_blocks", c.n_blocks},
                   {"block_bytes", c.block_bytes}, {"prefill_flops", c.prefill_flops}};
    if (r.prefill_rate > 0) {
      j["prefix"]["prefill_tokens_per_s"] = r.prefill_rate;
      j["prefix"]["prefill_seconds"] = static_cast<double>(c.n_tokens) / r.prefill_rate;
      j["prefix"]["prefill_rate_source"] = r.rate_source;
    }
  }
  if (r.context > 0) {
    nlohmann::json c = {{"n_tokens", r.context}, {"groups", nlohmann::json::array()}};
    uint64_t kept = 0, reclaim = 0;
    for (const model::GroupHold& h : r.holds) {
      c["groups"].push_back({{"n_blocks_kept", h.n_blocks_kept},
                             {"bytes_kept", h.bytes_kept},
                             {"n_blocks_window_reclaim", h.n_blocks_reclaim},
                             {"bytes_window_reclaim", h.bytes_reclaim}});
      kept += h.bytes_kept;
      reclaim += h.bytes_reclaim;
    }
    c["bytes_kept"] = kept;
    c["bytes_window_reclaim"] = reclaim;
    j["context"] = c;
  }
  std::printf("%s\n", j.dump(2).c_str());
}

// Whether every layer remembers the paged rows the shape's fields give (the formula printed is then exact).
bool memory_is_uniform(const model::KvShape& s, const model::MemoryLayout& memory) {
  return memory.groups().size() == 1 &&
         memory.groups()[0].spec == model::MemorySpec::paged(s.n_kv_heads, s.head_dim, s.head_dim);
}

// One sequence of --context tokens: each memory group's blocks with every position kept and with the windowed layers
// in their own pool (--kv-window-reclaim, for models with windowed and global layers).
void print_context(const Report& r) {
  uint64_t kept = 0, reclaim = 0;
  for (const model::GroupHold& h : r.holds) {
    kept += h.bytes_kept;
    reclaim += h.bytes_reclaim;
  }
  std::printf("context     one sequence of %s tokens holds %s (%s bytes)", group_digits(r.context).c_str(),
              format_bytes(kept).c_str(), group_digits(kept).c_str());
  if (reclaim != kept) {
    std::printf("; %s (%s bytes, %.1f%%) with --kv-window-reclaim on", format_bytes(reclaim).c_str(),
                group_digits(reclaim).c_str(), 100.0 * static_cast<double>(reclaim) / static_cast<double>(kept));
  }
  std::printf("\n");
  const std::vector<model::MemoryGroup>& groups = r.memory.groups();
  for (size_t i = 0; i < groups.size(); ++i) {
    const model::GroupHold& h = r.holds[i];
    if (h.bytes_kept == 0) continue;
    if (groups[i].spec.kind == model::MemoryKind::State) {
      std::printf("  group %zu: %s of state\n", i + 1, format_bytes(h.bytes_kept).c_str());
    } else if (h.bytes_reclaim != h.bytes_kept) {
      std::printf("  group %zu: %s blocks = %s; %s blocks = %s with the window reclaimed\n", i + 1,
                  group_digits(h.n_blocks_kept).c_str(), format_bytes(h.bytes_kept).c_str(),
                  group_digits(h.n_blocks_reclaim).c_str(), format_bytes(h.bytes_reclaim).c_str());
    } else {
      std::printf("  group %zu: %s blocks = %s\n", i + 1, group_digits(h.n_blocks_kept).c_str(),
                  format_bytes(h.bytes_kept).c_str());
    }
  }
}

void print_text(const KvOptions& o, const Report& r) {
  const model::KvShape& s = r.shape;
  const kernels::KvFormat& t = r.dtype;
  const std::string dtype = t.describe();
  // ffn_dim 0: the width differs per layer (gemma4) or the file does not say.
  const std::string ffn = s.ffn_dim > 0 ? std::to_string(s.ffn_dim) : std::string("per layer or unknown");
  std::printf("shape       %s (%s): %d layers, %d heads, %d KV heads, head dim %d, dim %d, ffn %s, vocab %d%s%s\n",
              s.name.c_str(), s.arch.c_str(), s.n_layers, s.n_heads, s.n_kv_heads, s.head_dim, s.dim, ffn.c_str(),
              s.n_vocab, s.tied_embeddings ? ", tied embeddings" : "", s.qkv_bias ? ", QKV bias" : "");
  std::printf("parameters  %s (%s, %s)\n", group_digits(s.n_params).c_str(), short_sci(double(s.n_params), 2).c_str(),
              std::string(model::param_source_text(s.params_source)).c_str());
  if (memory_is_uniform(s, r.memory)) {
    std::printf("KV per token = 2 x %d layers x %d KV heads x %d head dim x bytes per value:\n", s.n_layers,
                s.n_kv_heads, s.head_dim);
  } else {
    std::printf("KV per token = the sum over the memory groups below of 2 x layers x KV heads x head dim x bytes per "
                "value:\n");
  }
  for (kernels::KvType d : kernels::kAllKvTypes) {
    const uint64_t n = r.memory.paged_bytes_per_token(d);
    std::printf("  %-6s %-11s %14s bytes%s\n", kernels::kv_type_name(d),
                format_bytes(n).c_str(), group_digits(n).c_str(), t.k == d && t.v == d ? "   <- --kv-type" : "");
  }
  if (t.k != t.v) {
    const uint64_t n = r.memory.paged_bytes_per_token(t);
    std::printf("  %-6s %-11s %14s bytes   <- --kv-type-k / --kv-type-v\n", t.name().c_str(),
                format_bytes(n).c_str(), group_digits(n).c_str());
  }
  const std::vector<model::MemoryGroup>& groups = r.memory.groups();
  for (size_t i = 0; i < groups.size(); ++i) {
    std::printf("memory      group %zu of %zu: %s\n", i + 1, groups.size(), groups[i].summary(t).c_str());
  }
  if (static_cast<int64_t>(s.n_kv_heads) * s.head_dim % 32 != 0) {
    std::printf("  (block-type rows shown padded to whole 32-value blocks; the engine refuses block types for rows "
                "of %d values)\n", s.n_kv_heads * s.head_dim);
  }
  std::printf("block       %d tokens = %s in %s\n", o.block_size, format_bytes(r.budgets.at(0).block_bytes).c_str(),
              dtype.c_str());
  if (o.mem.empty()) std::printf("budgets     (common sizes; --mem sets one)\n");
  for (const model::KvBudget& b : r.budgets) {
    std::printf("budget      %s (%s bytes) holds %s blocks = %s tokens\n", format_bytes(b.budget_bytes).c_str(),
                group_digits(b.budget_bytes).c_str(), group_digits(b.n_blocks).c_str(),
                group_digits(b.n_tokens).c_str());
  }
  if (r.context > 0) print_context(r);
  if (r.prefix) {
    const model::PrefixCost& c = *r.prefix;
    std::printf("prefix      %s tokens take %s (%s bytes) exactly; %s blocks = %s (%s bytes) in the pool\n",
                group_digits(c.n_tokens).c_str(), format_bytes(c.exact_bytes).c_str(),
                group_digits(c.exact_bytes).c_str(), group_digits(c.n_blocks).c_str(),
                format_bytes(c.block_bytes).c_str(), group_digits(c.block_bytes).c_str());
    std::printf("            a hit saves ~%s prefill FLOPs (2 x %s params x %s tokens)\n",
                short_sci(c.prefill_flops, 1).c_str(), short_sci(double(s.n_params), 2).c_str(),
                group_digits(c.n_tokens).c_str());
    if (r.prefill_rate > 0) {
      std::printf("            and ~%.3g s of prefill at %.0f tokens/s (%s)\n",
                  static_cast<double>(c.n_tokens) / r.prefill_rate, r.prefill_rate, r.rate_source.c_str());
    }
  }
}

void run_kv(const KvOptions& given) {
  KvOptions o = given;
  if (o.block_size == 0) o.block_size = block_size_of(o.model);
  if (o.list_shapes) {
    for (const std::string& name : model::builtin_shape_names()) {
      const model::KvShape s = *model::builtin_shape(name);
      std::printf("%-15s %3d layers %3d heads %2d KV heads head dim %3d  %s params\n", name.c_str(), s.n_layers,
                  s.n_heads, s.n_kv_heads, s.head_dim, short_sci(double(s.n_params), 2).c_str());
    }
    return;
  }
  Report r;
  r.shape = load_shape(o);
  r.memory = model::memory_layout(r.shape);
  r.dtype = kv_format(o.model, r.memory, false);
  if (!o.mem.empty()) {
    const uint64_t budget_bytes = parse_bytes(o.mem);
    if (budget_bytes == 0) throw Error("--mem must be more than 0 bytes");
    r.budgets.push_back(model::fit_budget(r.shape, r.dtype, o.block_size, budget_bytes));
  } else {
    for (uint64_t b : kDefaultBudgets) r.budgets.push_back(model::fit_budget(r.shape, r.dtype, o.block_size, b));
  }
  if (!o.context.empty()) {
    r.context = parse_token_count(o.context);
    if (r.context == 0) throw Error("--context must be at least 1 token");
    r.holds = model::sequence_hold(r.memory, r.dtype, o.block_size, r.context);
  }
  if (!o.prefix.empty()) {
    r.prefix = model::prefix_cost(r.shape, r.dtype, o.block_size, parse_token_count(o.prefix));
    if (o.prefill_rate > 0) {
      r.prefill_rate = o.prefill_rate;
      r.rate_source = "given";
    } else if (o.shape.empty() && !o.no_measure) {
      int32_t n_measured = 0;
      const auto n = static_cast<int32_t>(std::min<uint64_t>(r.prefix->n_tokens, kMaxMeasuredTokens));
      r.prefill_rate = measure_prefill_rate(o, n, &n_measured);
      r.rate_source = "measured: a prefill of " + std::to_string(n_measured) + " tokens on " +
                      std::to_string(resolve_threads(o.model.threads)) + " threads";
    }
  }
  if (o.json) {
    print_json(o, r);
  } else {
    print_text(o, r);
  }
}

}  // namespace

void register_kv(CLI::App& app) {
  auto opts = std::make_shared<KvOptions>();
  CLI::App* cmd = app.add_subcommand(
      "kv", "KV-cache calculator: bytes per token, tokens per memory budget, what a cached prefix costs and saves");
  add_model_path_option(*cmd, opts->model);
  cmd->add_option("--shape", opts->shape, "A built-in model shape instead of -m (see --list-shapes)")
      ->excludes(cmd->get_option("--model"));
  cmd->add_flag("--list-shapes", opts->list_shapes, "List the built-in shapes and exit");
  add_kv_format_options(*cmd, opts->model);
  cmd->add_option("--block-size", opts->block_size, "Tokens per KV block (default 16; 32 with per-channel keys)")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--mem", opts->mem, "Memory budget, e.g. 2GiB, 512MiB, 8GB, 1e9 (default: a few common sizes)")
      ->type_name("BYTES");
  cmd->add_option("--prefix", opts->prefix, "Prefix length in tokens: its cost and savings")->type_name("TOKENS");
  cmd->add_option("--context", opts->context,
                  "Sequence length in tokens: what one sequence holds per memory group, with and without "
                  "--kv-window-reclaim")
      ->type_name("TOKENS");
  cmd->add_option("--prefill-rate", opts->prefill_rate,
                  "Prefill tokens/s for the seconds a hit saves (default with -m: measured on this machine)")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--no-measure", opts->no_measure, "With -m: do not load the model to measure the prefill rate");
  cmd->add_option("--threads", opts->model.threads, "Threads for the prefill measurement (default: all cores)");
  cmd->add_flag("--json", opts->json, "Print JSON instead of text");
  cmd->callback([opts] { run_kv(*opts); });
}

}  // namespace preface::cli
