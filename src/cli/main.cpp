// preface: one executable, subcommands like git. Each subcommand lives in its own cmd_*.cpp and registers itself
// through a function declared in cli/commands.h.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>

#include "cli/commands.h"
#include "cli/options.h"
#include "util/error.h"

int main(int argc, char** argv) {
  CLI::App app{"preface: an LLM inference server that never reads the same preface twice"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "Show help for every subcommand");
  app.set_version_flag("--version", "preface " PREFACE_VERSION);
  preface::cli::register_commands(app);
  preface::cli::rewrite_llama_cpp_flags(argc, argv);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const preface::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
