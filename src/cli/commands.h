// Subcommand registration. Each register_* adds a subcommand with its options and a callback that does the
// work (errors are thrown as preface::Error and reported by main).
#pragma once
#include <CLI/CLI.hpp>

namespace preface::cli {

void register_commands(CLI::App& app);  // all of the below, in help order

void register_serve(CLI::App& app);     // cmd_serve.cpp
void register_run(CLI::App& app);       // cmd_run.cpp
void register_eval(CLI::App& app);      // cmd_eval.cpp
void register_tokenize(CLI::App& app);  // cmd_tokenize.cpp
void register_synth(CLI::App& app);     // cmd_synth.cpp
void register_kv(CLI::App& app);        // cmd_kv.cpp
void register_bench(CLI::App& app);     // cmd_bench.cpp
void register_verify(CLI::App& app);    // cmd_verify.cpp
void register_perplexity(CLI::App& app);  // cmd_perplexity.cpp

}  // namespace preface::cli
