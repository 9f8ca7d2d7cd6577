// Fuzz target: Responses API request bodies (POST /v1/responses). Input: byte 0 picks the chat template
// (byte % 14); the rest is the HTTP body. As the HTTP layer: parse_json_object, then parse_responses_request
// (a previous_response_id names no stored response: ids are random; replies of store: true requests are stored,
// within the store's bounds). Only ApiError may escape (its error body must
// serialise); an accepted request must be well formed (api_fixture.h check_generation), and its response format
// must serialise any text, including the prompt's possibly invalid UTF-8.
#include <nlohmann/json.hpp>

#include "api_fixture.h"
#include "server/api/responses_api.h"
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
  const std::string body(reinterpret_cast<const char*>(data + 1), size - 1);
  try {
    const nlohmann::json json = server::parse_json_object(body);
    server::ResponsesRequest r = server::parse_responses_request(json, ctx, "tenant");
    fuzz::check_generation(ctx, r.chat.generation);
    fuzz::check(r.chat.generation.text_start, "a response is a chat reply: text_start must be set");
    fuzz::check(!r.resumed, "resumed without a stored response");
    fuzz::check(r.input_items.is_array() && !r.input_items.empty(), "an accepted request has input items");
    const auto format = server::make_responses_format(ctx, r, "tenant");
    const std::string text = fixture.tokenizer().decode(r.chat.generation.params.prompt);
    fuzz::exercise_format(*format, text, static_cast<int32_t>(r.chat.generation.params.prompt.size()));
  } catch (const server::ApiError& e) {
    fuzz::check_api_error(server::ApiFlavor::OpenAI, e);
  }
  return 0;
}
