// The OpenAI API: request parsing and validation for /v1/completions and /v1/chat/completions, and the response
// bodies and stream chunks, shaped as OpenAI's. JSON only; the HTTP layer runs the generation.
//
// Parameters: model (optional; must name the served model), prompt (completions: a string, an array of token
// ids, or a one-element array of either), messages (chat: roles system/developer/user/assistant, content a
// string or an array of {"type": "text"} parts), max_tokens / max_completion_tokens (default: up to the
// context), temperature [0, 2] (default 1), top_p (0, 1], top_k (-1 or 0: off), min_p [0, 1], seed,
// presence_penalty / frequency_penalty [-2, 2], repetition_penalty (vLLM; llama.cpp's repeat_penalty), n_predict
// (llama.cpp's max_tokens; -1: the default), stop (a string or
// up to max_stop_strings strings; may span tokens), logprobs (completions: 0..20 alternatives; chat: a bool with
// top_logprobs 0..20), ignore_eos, stream, stream_options.include_usage, user (accepted, not used), cache_salt
// (isolates the cache: only requests with the same salt share cached blocks), prompt_cache_key (accepted; in
// OpenAI it only steers routing between machines, never isolation, so with one engine it changes nothing),
// prompt_cache_retention, prompt_cache_options and content parts' prompt_cache_breakpoint (openai_cache.h: they
// pin prompt prefixes for a TTL, as Anthropic's cache_control; in a chat with tools only the whole-prompt pin).
// Chat only: tools, tool_choice, parallel_tool_calls, assistant tool_calls and tool messages
// (server/api/tool_calls_api.h); the reply's calls are message.tool_calls / streamed delta.tool_calls with
// finish_reason "tool_calls". Rejected with 400: n or best_of other than 1, echo, suffix, logit_bias, functions,
// tools on /v1/completions.
//
// Usage: prompt_tokens, completion_tokens, total_tokens, and prompt_tokens_details {cached_tokens: prompt tokens
// whose K/V came from the prefix cache, cache_write_tokens: prompt tokens newly written into cached blocks}.
#pragma once
#include <memory>
#include <span>
#include <string>

#include <nlohmann/json.hpp>

#include "server/api/context.h"
#include "server/api/tool_calls_api.h"

namespace preface::server {

struct OpenAIRequest {
  GenerationRequest generation;
  bool stream = false;
  bool include_usage = false;      // stream_options.include_usage: a final chunk carries the usage
  bool logprobs = false;
  std::optional<ToolOutput> tool_output;  // chat with tools: how the output is read back as calls
};

// Both throw ApiError (400) naming the offending parameter.
OpenAIRequest parse_completion_request(const nlohmann::json& body, ServerContext& ctx);
OpenAIRequest parse_chat_request(const nlohmann::json& body, ServerContext& ctx);

std::unique_ptr<ResponseFormat> make_completion_format(ServerContext& ctx, const OpenAIRequest& request);
std::unique_ptr<ResponseFormat> make_chat_format(ServerContext& ctx, const OpenAIRequest& request);

// `pins`: the request's cache pins (openai_cache.h), reported with `block_size` (tokens per KV block).
nlohmann::json openai_usage(const GenerationSummary& summary, std::span<const engine::CachePin> pins = {},
                            int32_t block_size = 0);
nlohmann::json models_response(const ServerContext& ctx);

// chat_template_kwargs (llama.cpp's and vLLM's field; an object or absent) with reasoning_effort added.
nlohmann::ordered_json chat_template_kwargs(const JsonFields& f, const nlohmann::json& body);

// OpenAI's reasoning_effort (none | minimal | low | medium | high; else 400) as the template variable gpt-oss's
// template reads, added to chat_template_kwargs unless they set it.
void add_reasoning_effort(const JsonFields& f, nlohmann::ordered_json& kwargs);

}  // namespace preface::server
