#include "api_fixture.h"

#include <cmath>
#include <cstdlib>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "support.h"
#include "util/error.h"

namespace preface::fuzz {

ApiFixture& ApiFixture::get() {
  static ApiFixture fixture;  // built once; the parsers only read it, except ids and seeds (thread-safe)
  return fixture;
}

ApiFixture::ApiFixture() {
  const char* env = std::getenv("PREFACE_SHARED_DIR");
  const std::filesystem::path shared =
      env != nullptr ? std::filesystem::path(env) : std::filesystem::path(PREFACE_SOURCE_DIR) / ".." / "shared";
  const std::string path = (shared / "models" / "stories260K.gguf").lexically_normal().string();
  if (!std::filesystem::exists(path)) fail("model not found: " + path + " (set PREFACE_SHARED_DIR)");
  try {
    model_ = model::Model::load(path, 64);
    tokenizer_ = Tokenizer::from_gguf(model_->file());
    engine::EngineConfig config;
    config.kv_cache_bytes = 4u << 20;
    config.max_batch_tokens = 64;
    config.n_threads = 1;
    engine_ = std::make_unique<engine::Engine>(*model_, engine::with_eog(config, *tokenizer_));
    for (int t = 0; t < kNumChatTemplates; ++t) {
      contexts_[static_cast<size_t>(t)] = std::make_unique<server::ServerContext>(
          *engine_, *tokenizer_, static_cast<server::ChatTemplate>(t), "stories260K",
          std::vector<std::string>{"stories260K", "alias"}, /*strict_model_names=*/true, server::ServerLimits{},
          metrics_);
    }
  } catch (const Error& e) {
    fail(std::string("cannot set up the API fixture: ") + e.what());
  }
}

void check_generation(const server::ServerContext& ctx, const server::GenerationRequest& request) {
  const engine::RequestParams& g = request.params;
  const int32_t n_vocab = ctx.tokenizer.n_vocab();
  for (const int32_t id : g.prompt) {
    check(id >= 0 && id < n_vocab, "prompt id " + std::to_string(id) + " outside the vocab");
  }
  const engine::SamplingParams& s = g.sampling;
  check(g.max_new_tokens >= 0, "max_new_tokens " + std::to_string(g.max_new_tokens) + " is negative");
  check(std::isfinite(s.temperature) && s.temperature >= 0 && s.temperature <= 2, "temperature out of range");
  check(std::isfinite(s.top_p) && s.top_p > 0 && s.top_p <= 1, "top_p out of range");
  check(s.top_k >= 0, "top_k is negative");
  check(std::isfinite(s.min_p) && s.min_p >= 0 && s.min_p <= 1, "min_p out of range");
  check(std::isfinite(s.repeat_penalty) && s.repeat_penalty > 0, "repetition_penalty out of range");
  check(std::isfinite(s.presence_penalty) && std::isfinite(s.frequency_penalty), "penalty not finite");
  check(request.stop.size() <= static_cast<size_t>(ctx.limits.max_stop_strings),
        "more stop strings than the limit");
  for (const std::string& stop : request.stop) check(!stop.empty(), "empty stop string accepted");
  check(g.n_logprobs <= ctx.limits.max_top_logprobs, "n_logprobs above the limit");
  check(g.cache_pins.size() <= 4, "more than 4 cache breakpoints");
  for (const engine::CachePin& pin : g.cache_pins) {
    check(pin.n_tokens >= 0 && static_cast<size_t>(pin.n_tokens) <= g.prompt.size(),
          "cache breakpoint outside the prompt");
    const int64_t ttl = pin.ttl.count();  // Anthropic's 5m, 1h; OpenAI's 30m, 12h, 24h (openai_cache.h)
    check(ttl == 300 || ttl == 3600 || ttl == 1800 || ttl == 12 * 3600 || ttl == 24 * 3600,
          "cache breakpoint ttl " + std::to_string(ttl));
  }
}

void check_api_error(server::ApiFlavor flavor, const server::ApiError& e) {
  check(e.status >= 400 && e.status <= 599, "ApiError with status " + std::to_string(e.status));
  const std::string body = server::dump_json(server::error_body(flavor, e));
  check(nlohmann::json::accept(body), "error body is not valid JSON: " + escaped(body));
}

void exercise_format(server::ResponseFormat& format, const std::string& text, int32_t n_prompt_tokens) {
  server::GenerationSummary summary;
  summary.kind = server::StopKind::StopString;
  summary.stop_string = text.substr(0, 3);
  summary.stats.n_prompt_tokens = n_prompt_tokens;
  summary.n_completion_tokens = 1;
  server::GenerationDelta delta;
  delta.text = text;
  // The reply's channels too (harmony): reasoning, and a call whose arguments are the input.
  delta.reasoning = text;
  delta.calls = {{grammar::ToolCallEvent::Kind::CallStart, 0, "f"}, {grammar::ToolCallEvent::Kind::Arguments, 0, text}};
  (void)format.stream_start(n_prompt_tokens);
  (void)format.stream_delta(delta);
  (void)format.stream_end(summary);
  const std::string body = server::dump_json(format.full_response(text, text, {{"f", text}}, {}, summary));
  check(nlohmann::json::accept(body), "response body is not valid JSON");
}

}  // namespace preface::fuzz
