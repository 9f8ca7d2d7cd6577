// Options shared by the subcommands: which model file, threads, KV cache layout.
#pragma once
#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>

#include "kernels/kv_type.h"
#include "model/base/memory.h"

namespace preface::cli {

struct ModelOptions {
  std::string model_path;      // --model/-m; empty: see resolve_model_path
  int threads = 0;             // --threads; 0: one per hardware thread
  std::string kv_type;          // --kv-type: both sides (default f16)
  std::string kv_type_k;        // --kv-type-k / --cache-type-k / -ctk: overrides --kv-type for K
  std::string kv_type_v;        // --kv-type-v / --cache-type-v / -ctv: overrides --kv-type for V
  std::string kv_rotate = "auto";  // --kv-rotate auto|on|off
  int32_t block_size = 0;      // --block-size, tokens per KV block; 0: block_size_of's default
};

// The block size the options ask for: --block-size, else 16, or kernels::kKvChannelGroup (32) when the keys are
// quantized per channel (whose groups blocks must hold whole).
int32_t block_size_of(const ModelOptions& opts);

// Adds -m/--model only (for commands that need no forward pass).
void add_model_path_option(CLI::App& cmd, ModelOptions& opts);
// Adds -m/--model, --threads, --kv-type, --kv-type-k, --kv-type-v, --kv-rotate, --block-size.
void add_model_options(CLI::App& cmd, ModelOptions& opts);
// Adds --kv-type, --kv-type-k, --kv-type-v and --kv-rotate alone.
void add_kv_format_options(CLI::App& cmd, ModelOptions& opts);

// The KV pool format the options ask for on a model of this memory layout (--kv-rotate auto resolved with its
// head sizes, kernels::resolve_kv_format). Throws preface::Error for a type or rotation the model cannot hold
// (check false: only for a rotation `on` cannot apply; the calculator shows padded rows instead).
kernels::KvFormat kv_format(const ModelOptions& opts, const model::MemoryLayout& memory, bool check = true);
// The types alone, for messages before a model is loaded: "q8_0" or "q8_0/q4_0".
std::string kv_types_text(const ModelOptions& opts);

// llama.cpp's spellings -ctk and -ctv, which CLI11 cannot name (one dash, several letters), as --cache-type-k and
// --cache-type-v: rewrites argv in place.
void rewrite_llama_cpp_flags(int argc, char** argv);

// The model file to use, first that applies: `flag` (when non-empty), $PREFACE_MODEL, the first *.gguf (by
// name) in ./models/ or in <executable dir>/../models/, ../shared/models/stories260K.gguf (from the current
// directory, then from the executable's repository). Throws preface::Error listing what was tried.
std::string resolve_model_path(const std::string& flag);

int resolve_threads(int threads);                      // 0 -> hardware threads

}  // namespace preface::cli
