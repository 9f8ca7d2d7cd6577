// preface-bench: the load generator (`serve`) and the soak client (`soak`) for any OpenAI-compatible server,
// outside the product binary.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>

#include "clients/commands.h"
#include "util/error.h"

int main(int argc, char** argv) {
  CLI::App app{"preface-bench: load and soak clients for OpenAI-compatible servers"};
  app.require_subcommand(1);
  preface::cli::register_bench_serve(&app);
  preface::cli::register_soak(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
