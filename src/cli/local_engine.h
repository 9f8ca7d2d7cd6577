// The engine behind the one-shot commands (`run`, `eval`): one request on a pool just large enough for it, so the
// CLI generates through the same loop as the server (engine/engine.h), with the same results.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cli/options.h"
#include "engine/engine.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace preface::cli {

// An engine on `model` (thread count, KV type and block size from `opts`) whose pool holds n_tokens positions,
// with prefix caching off (nothing is shared within one request). Throws preface::Error when the KV type cannot
// store the model's heads (q8_0 needs head_dim % 32 == 0).
std::unique_ptr<engine::Engine> local_engine(model::Model& model, const Tokenizer& tokenizer,
                                             const ModelOptions& opts, int32_t n_tokens);

// The prompt's token ids with BOS per the vocabulary; an empty prompt becomes BOS alone. Throws preface::Error
// when that leaves no token at all.
std::vector<int32_t> encode_prompt(const Tokenizer& tokenizer, const std::string& prompt);

}  // namespace preface::cli
