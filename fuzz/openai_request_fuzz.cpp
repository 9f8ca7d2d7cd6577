// Fuzz target: OpenAI request bodies. Input: byte 0 picks the chat template (byte % 14) and the endpoint
// ((byte / 14) % 2: /v1/completions or /v1/chat/completions); the rest is the HTTP body. As the HTTP layer:
// parse_json_object, then parse_completion_request / parse_chat_request. Only ApiError may escape (its error
// body must serialise); an accepted request must be well formed (api_fixture.h check_generation), and its
// response format must serialise any text, including the prompt's possibly invalid UTF-8.
#include <nlohmann/json.hpp>

#include "api_fixture.h"
#include "server/api/openai_api.h"
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
  const bool chat = (data[0] / fuzz::kNumChatTemplates) % 2 == 1;
  const std::string body(reinterpret_cast<const char*>(data + 1), size - 1);
  try {
    const nlohmann::json json = server::parse_json_object(body);
    const server::OpenAIRequest r =
        chat ? server::parse_chat_request(json, ctx) : server::parse_completion_request(json, ctx);
    fuzz::check_generation(ctx, r.generation);
    fuzz::check(r.generation.text_start == chat, "text_start does not match the endpoint");
    fuzz::check(r.generation.params.n_logprobs < 0 || r.logprobs, "top logprobs without logprobs");
    const auto format = chat ? server::make_chat_format(ctx, r) : server::make_completion_format(ctx, r);
    const std::string text = fixture.tokenizer().decode(r.generation.params.prompt);
    fuzz::exercise_format(*format, text, static_cast<int32_t>(r.generation.params.prompt.size()));
  } catch (const server::ApiError& e) {
    fuzz::check_api_error(server::ApiFlavor::OpenAI, e);
  }
  return 0;
}
