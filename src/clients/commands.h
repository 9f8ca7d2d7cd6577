// Subcommands of preface-bench, the load and soak clients kept out of the product binary. They talk to any
// OpenAI-compatible server over HTTP and link nothing of the engine.
#pragma once
#include <CLI/CLI.hpp>

namespace preface::cli {

void register_bench_serve(CLI::App* app);  // cmd_bench_serve.cpp: `preface-bench serve`
void register_soak(CLI::App& app);         // cmd_soak.cpp: `preface-bench soak`

}  // namespace preface::cli
