#include "cli/options.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <vector>

#include "model/fingerprint.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace preface::cli {
namespace fs = std::filesystem;
namespace {

// The first *.gguf by name in dir, or empty.
std::string first_gguf(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return {};
  std::vector<std::string> found;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (entry.is_regular_file(ec) && entry.path().extension() == ".gguf") found.push_back(entry.path().string());
  }
  if (found.empty()) return {};
  return *std::min_element(found.begin(), found.end());
}

fs::path executable_dir() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path() : exe.parent_path();
}

}  // namespace

void add_model_path_option(CLI::App& cmd, ModelOptions& opts) {
  cmd.add_option("-m,--model", opts.model_path,
                 "GGUF model file (default: $PREFACE_MODEL, then the first .gguf in models/, then "
                 "../shared/models/stories260K.gguf)");
  cmd.add_option("--cache-dir", "preface's cache directory (model fingerprints; default: $XDG_CACHE_HOME/preface or "
                                "~/.cache/preface)")
      ->each([](const std::string& dir) { model::set_cache_dir(dir); });
}

void add_model_options(CLI::App& cmd, ModelOptions& opts) {
  add_model_path_option(cmd, opts);
  cmd.add_option("--threads", opts.threads, "Worker threads (default: number of cores)")
      ->check(CLI::Range(0, 1024));
  add_kv_format_options(cmd, opts);
  cmd.add_option("--block-size", opts.block_size,
                 "Tokens per KV cache block (default 16; 32 with per-channel keys, q8_pc or q4_pc)")
      ->check(CLI::Range(1, 4096));
}

void add_kv_format_options(CLI::App& cmd, ModelOptions& opts) {
  std::vector<std::string> names;
  for (kernels::KvType t : kernels::kAllKvTypes) names.emplace_back(kernels::kv_type_name(t));
  const auto types = CLI::IsMember(names, CLI::ignore_case);
  std::vector<std::string> k_names = names;
  for (kernels::KvType t : kernels::kChannelKvTypes) k_names.emplace_back(kernels::kv_type_name(t));
  cmd.add_option("--kv-type", opts.kv_type,
                 "KV cache value type of K and V: f32, f16 (default), bf16, q8_0, q4_0, q4_1, iq4_nl, q5_0 or q5_1 "
                 "(the block types store rows of whole 32-value blocks)")
      ->check(types);
  cmd.add_option("--kv-type-k,--cache-type-k", opts.kv_type_k,
                 "The K rows' type (overrides --kv-type; also -ctk); also q8_pc or q4_pc: keys quantized per channel "
                 "over each 32 positions once they are all stored (needs --block-size a multiple of 32)")
      ->check(CLI::IsMember(k_names, CLI::ignore_case));
  cmd.add_option("--kv-type-v,--cache-type-v", opts.kv_type_v, "The V rows' type (overrides --kv-type; also -ctv)")
      ->check(types);
  cmd.add_option("--kv-rotate", opts.kv_rotate,
                 "Hadamard rotation of K/V rows: auto (a side of a block type, where heads are multiples of 64), on, "
                 "off")
      ->check(CLI::IsMember({"auto", "on", "off"}))
      ->capture_default_str();
}

namespace {

std::string side_type(const ModelOptions& opts, const std::string& side) {
  if (!side.empty()) return side;
  return opts.kv_type.empty() ? "f16" : opts.kv_type;
}

}  // namespace

kernels::KvFormat kv_format(const ModelOptions& opts, const model::MemoryLayout& memory, bool check) {
  const kernels::KvType k = kernels::parse_kv_type(side_type(opts, opts.kv_type_k));
  const kernels::KvType v = kernels::parse_kv_type(side_type(opts, opts.kv_type_v));
  const kernels::KvFormat f = kernels::resolve_kv_format(k, v, kernels::parse_kv_rotate(opts.kv_rotate),
                                                         memory.k_rotation_fits(), memory.v_rotation_fits());
  if (check) memory.check_type_fits(f);
  return f;
}

int32_t block_size_of(const ModelOptions& opts) {
  if (opts.block_size > 0) return opts.block_size;
  const auto k = kernels::kv_type_from_name(side_type(opts, opts.kv_type_k));
  return k && kernels::kv_type_is_per_channel(*k) ? kernels::kKvChannelGroup : 16;
}

std::string kv_types_text(const ModelOptions& opts) {
  const std::string k = side_type(opts, opts.kv_type_k), v = side_type(opts, opts.kv_type_v);
  return k == v ? k : k + "/" + v;
}

void rewrite_llama_cpp_flags(int argc, char** argv) {
  static char cache_type_k[] = "--cache-type-k";
  static char cache_type_v[] = "--cache-type-v";
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "-ctk") == 0) argv[i] = cache_type_k;
    if (std::strcmp(argv[i], "-ctv") == 0) argv[i] = cache_type_v;
  }
}

std::string resolve_model_path(const std::string& flag) {
  if (!flag.empty()) return flag;
  if (const char* env = std::getenv("PREFACE_MODEL"); env != nullptr && *env != '\0') return env;
  const fs::path exe_dir = executable_dir();
  std::vector<fs::path> model_dirs = {"models"};
  if (!exe_dir.empty()) model_dirs.push_back(exe_dir / ".." / "models");
  for (const fs::path& dir : model_dirs) {
    if (std::string path = first_gguf(dir); !path.empty()) return path;
  }
  std::vector<fs::path> fallbacks = {fs::path("..") / "shared" / "models" / "stories260K.gguf"};
  if (!exe_dir.empty()) fallbacks.push_back(exe_dir / ".." / ".." / "shared" / "models" / "stories260K.gguf");
  std::error_code ec;
  for (const fs::path& path : fallbacks) {
    if (fs::is_regular_file(path, ec)) return path.lexically_normal().string();
  }
  throw Error(
      "no model found: pass --model FILE, set PREFACE_MODEL, put a .gguf in models/, or provide "
      "../shared/models/stories260K.gguf");
}

int resolve_threads(int threads) { return threads > 0 ? threads : ThreadPool::hardware_threads(); }

}  // namespace preface::cli
