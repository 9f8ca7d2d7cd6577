// `preface tokenize`: print the token ids of a text (space separated, one line). Reads only the vocabulary.
#include <cstdio>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "cli/options.h"
#include "gguf/reader.h"
#include "tokenizer/tokenizer.h"

namespace preface::cli {
namespace {

struct TokenizeOptions {
  ModelOptions model;
  std::string text;
  bool no_bos = false;
};

void tokenize(const TokenizeOptions& opts) {
  const gguf::File file = gguf::File::open(resolve_model_path(opts.model.model_path));
  const auto tokenizer = Tokenizer::from_gguf(file);
  const std::vector<int32_t> ids = tokenizer->encode(opts.text, !opts.no_bos && tokenizer->add_bos_default());
  std::string line;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i > 0) line += ' ';
    line += std::to_string(ids[i]);
  }
  std::printf("%s\n", line.c_str());
}

}  // namespace

void register_tokenize(CLI::App& app) {
  auto opts = std::make_shared<TokenizeOptions>();
  CLI::App* cmd = app.add_subcommand("tokenize", "Print the token ids of a text");
  add_model_path_option(*cmd, opts->model);
  cmd->add_flag("--no-bos", opts->no_bos, "Do not prepend BOS (default: as the vocabulary says)");
  cmd->add_option("text", opts->text, "Text to tokenize")->required();
  cmd->callback([opts] { tokenize(*opts); });
}

}  // namespace preface::cli
