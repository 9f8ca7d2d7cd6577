#include "cli/commands.h"

namespace preface::cli {

void register_commands(CLI::App& app) {
  register_serve(app);
  register_run(app);
  register_eval(app);
  register_tokenize(app);
  register_synth(app);
  register_kv(app);
  register_bench(app);
  register_verify(app);
  register_perplexity(app);
}

}  // namespace preface::cli
