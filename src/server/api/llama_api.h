// llama.cpp's own routes, for the clients written against its server (editor plugins, scripts, its web UI):
//   POST /completion (and /completions): llama.cpp's native completion. prompt (text or token ids), n_predict,
//     stream, stop, temperature, top_k, top_p, min_p, seed, grammar, json_schema, cache_prompt (always on), ...:
//     the fields /v1/completions takes (server/api/openai_api.h). Answer {"content", "stop", "tokens_predicted",
//     "tokens_evaluated", "tokens_cached", "stop_type", "stopping_word", "timings", ...}; streamed, one SSE event
//     per piece ({"content", "stop": false}) and a last one with "stop": true and the counts (no [DONE]).
//   POST /infill: fill-in-the-middle for vocabularies with FIM tokens (Qwen2.5/3-Coder, StarCoder, DeepSeek
//     Coder, CodeLlama): input_prefix, input_suffix and prompt (text after the prefix), laid out as
//     <prefix-token> PREFIX <suffix-token> SUFFIX <middle-token> PROMPT; otherwise as /completion. A vocabulary
//     without FIM tokens is a 400, as is input_extra (repository context is not supported yet).
//   GET /props: the model's settings (context, chat template, special tokens, slots).
//   GET /slots: one entry per request the engine runs now (read only).
#pragma once
#include <memory>

#include <nlohmann/json.hpp>

#include "server/api/openai_api.h"

namespace preface::server {

// Both throw ApiError (400) naming the offending parameter.
OpenAIRequest parse_llama_completion(const nlohmann::json& body, ServerContext& ctx);
OpenAIRequest parse_llama_infill(const nlohmann::json& body, ServerContext& ctx);
std::unique_ptr<ResponseFormat> make_llama_format(ServerContext& ctx, const OpenAIRequest& request);

nlohmann::json llama_props(const ServerContext& ctx);
nlohmann::json llama_slots(const ServerContext& ctx);

}  // namespace preface::server
