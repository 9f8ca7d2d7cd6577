// Options shared by the subcommands: which model file, threads, KV cache layout.
#pragma once
#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>

namespace preface::cli {

struct ModelOptions {
  std::string model_path;      // --model/-m; empty: see resolve_model_path
  int threads = 0;             // --threads; 0: one per hardware thread
  std::string kv_type = "f16"; // --kv-type
  int32_t block_size = 16;     // --block-size, tokens per KV block
};

// Adds -m/--model only (for commands that need no forward pass).
void add_model_path_option(CLI::App& cmd, ModelOptions& opts);
// Adds -m/--model, --threads, --kv-type, --block-size.
void add_model_options(CLI::App& cmd, ModelOptions& opts);

// The model file to use, first that applies: `flag` (when non-empty), $PREFACE_MODEL, the first *.gguf (by
// name) in ./models/ or in <executable dir>/../models/, ../shared/models/stories260K.gguf (from the current
// directory, then from the executable's repository). Throws preface::Error listing what was tried.
std::string resolve_model_path(const std::string& flag);

int resolve_threads(int threads);                      // 0 -> hardware threads

}  // namespace preface::cli
