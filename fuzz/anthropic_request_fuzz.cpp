// Fuzz target: Anthropic Messages request bodies. Input: byte 0 picks the chat template (byte % 14) and the
// endpoint ((byte / 14) % 2: /v1/messages or /v1/messages/count_tokens); the rest is the HTTP body. As the HTTP
// layer: parse_json_object, then parse_messages_request. Only ApiError may escape (its error body must
// serialise); an accepted request must be well formed (api_fixture.h check_generation: at most 4 cache
// breakpoints, inside the prompt), and its response format must serialise any text.
#include <nlohmann/json.hpp>

#include "api_fixture.h"
#include "server/api/anthropic_api.h"
#include "support.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  preface::fuzz::ApiFixture::get();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace preface;
  if (size == 0) return 0;
  fuzz::ApiFixture& fixture = fuzz::ApiFixture::get();
  server::ServerContext& ctx = fixture.context(data[0] % fuzz::kNumChatTemplates);
  const bool count_only = (data[0] / fuzz::kNumChatTemplates) % 2 == 1;
  const std::string body(reinterpret_cast<const char*>(data + 1), size - 1);
  try {
    const nlohmann::json json = server::parse_json_object(body);
    const server::AnthropicRequest r = server::parse_messages_request(json, ctx, count_only);
    fuzz::check_generation(ctx, r.generation);
    fuzz::check(r.generation.params.max_new_tokens >= 1, "max_tokens below 1 accepted");
    fuzz::check(r.generation.params.sampling.temperature <= 1, "temperature above 1 accepted");
    fuzz::check(!count_only || r.generation.params.cache_pins.empty(), "count_tokens resolved cache breakpoints");
    const auto format = server::make_messages_format(ctx, r);
    const std::string text = fixture.tokenizer().decode(r.generation.params.prompt);
    fuzz::exercise_format(*format, text, static_cast<int32_t>(r.generation.params.prompt.size()));
  } catch (const server::ApiError& e) {
    fuzz::check_api_error(server::ApiFlavor::Anthropic, e);
  }
  return 0;
}
