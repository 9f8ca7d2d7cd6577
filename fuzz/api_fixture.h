// What the API request fuzz targets share: a ServerContext per chat template family over one real model
// (../shared/models/stories260K.gguf, SentencePiece vocab of 512) and an engine that is never started (the
// parsers only read its context length), and the checks applied to a parsed request or an ApiError.
#pragma once
#include <array>
#include <memory>
#include <string>

#include "engine/engine.h"
#include "model/model.h"
#include "server/api/api_error.h"
#include "server/api/context.h"
#include "server/api/generation.h"
#include "server/observability/metrics.h"

namespace preface::fuzz {

inline constexpr int kNumChatTemplates = 14;  // ChatTemplate::ChatML .. ChatTemplate::Zephyr

class ApiFixture {
 public:
  // Loads the model once per process; aborts when ../shared is missing (the target cannot run without it).
  static ApiFixture& get();

  server::ServerContext& context(int chat_template) { return *contexts_[static_cast<size_t>(chat_template)]; }
  const Tokenizer& tokenizer() const { return *tokenizer_; }

 private:
  ApiFixture();
  std::unique_ptr<model::Model> model_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<engine::Engine> engine_;
  server::Metrics metrics_;
  std::array<std::unique_ptr<server::ServerContext>, kNumChatTemplates> contexts_;
};

// The request the HTTP layer would hand to the engine is well formed: prompt ids inside the vocab, sampling
// values inside their documented ranges, stop strings non-empty and within the limit, at most 4 cache
// breakpoints (Anthropic cache_control; OpenAI's prompt_cache_breakpoint, prompt_cache_options and
// prompt_cache_retention), each inside the prompt with a TTL of 5 min, 30 min, 1 h, 12 h or 24 h.
void check_generation(const server::ServerContext& ctx, const server::GenerationRequest& g);

// What the HTTP layer does with an ApiError: a 4xx/5xx status and an error body that serialises to valid JSON
// (even when the message quotes invalid UTF-8 from the request).
void check_api_error(server::ApiFlavor flavor, const server::ApiError& e);

// Streams `text` through a response format as the HTTP layer would (start, one delta, end, full body); every
// piece must serialise (dump_json) without throwing.
void exercise_format(server::ResponseFormat& format, const std::string& text, int32_t n_prompt_tokens);

}  // namespace preface::fuzz
