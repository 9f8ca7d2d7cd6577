#include "cli/local_engine.h"

#include <algorithm>

#include "engine/cpu_backend.h"
#include "util/error.h"

namespace preface::cli {

std::unique_ptr<engine::Engine> local_engine(model::Model& model, const Tokenizer& tokenizer,
                                             const ModelOptions& opts, int32_t n_tokens) {
  engine::EngineConfig c;
  c.kv_format = kv_format(opts, model.memory());
  c.block_size = block_size_of(opts);
  c.n_threads = resolve_threads(opts.threads);
  c.max_running = 1;
  c.max_batch_tokens = model.max_batch_tokens();
  c.prefix_cache = false;
  const int64_t positions = std::clamp<int64_t>(n_tokens, 1, model.config().ctx_len) + block_size_of(opts);
  c.kv_cache_bytes = engine::kv_bytes_per_token(model.memory(), c.kv_format) * static_cast<uint64_t>(positions);
  return std::make_unique<engine::Engine>(model, engine::with_eog(c, tokenizer));
}

std::vector<int32_t> encode_prompt(const Tokenizer& tokenizer, const std::string& prompt) {
  std::vector<int32_t> tokens = tokenizer.encode(prompt, tokenizer.add_bos_default());
  if (tokens.empty() && tokenizer.bos_id() >= 0) tokens.push_back(tokenizer.bos_id());
  if (tokens.empty()) throw Error("the prompt is empty and the vocabulary has no BOS token to start from");
  return tokens;
}

}  // namespace preface::cli
