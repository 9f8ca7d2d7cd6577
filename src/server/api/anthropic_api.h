// The Anthropic Messages API: POST /v1/messages (and /v1/messages/count_tokens). JSON only; the HTTP layer runs
// the generation.
//
// Request: model (optional here; must name the served model), max_tokens (required, >= 1), messages (roles
// user/assistant; content a string or an array of text, tool_use (assistant) and tool_result (user) blocks;
// consecutive messages of one role are merged with "\n"; a final assistant message is a prefill that the reply
// continues), system (a string or text blocks), stop_sequences, temperature [0, 1], top_p (0, 1], top_k, stream,
// metadata (accepted, not used), cache_salt (preface extension, as in the OpenAI API), tools and tool_choice
// (server/api/tool_calls_api.h; the reply's calls are tool_use blocks, streamed as content_block_start +
// input_json_delta events, with stop_reason "tool_use"). Text blocks of one message are joined with "\n".
// thinking ({"type": "enabled", "budget_tokens"} or "disabled") sets the template's enable_thinking; the reply's
// reasoning (a <think> or harmony template's) comes back as thinking blocks. Rejected with 400: other block types
// (images), server tools.
//
// cache_control {"type": "ephemeral", "ttl": "5m" | "1h"} on a system or message block marks a breakpoint (at
// most 4; a "1h" breakpoint may not follow a "5m" one). Each is resolved to the number of prompt tokens up to and
// including that block (the common token prefix of the full prompt and the conversation rendered up to the
// block) in GenerationRequest::pins; the engine pins the full blocks of that prefix (never evicted) until the TTL
// passes, refreshed on each hit. Automatic prefix caching applies to every request, breakpoint or not.
//
// Usage: input_tokens = prompt tokens neither read from nor written to the cache (the uncached tail),
// cache_read_input_tokens = prompt tokens whose K/V came from the cache, cache_creation_input_tokens = prompt
// tokens newly written into cached blocks; the three sum to the prompt length. In a stream, message_start
// carries input_tokens = the whole prompt and zero cache counts (the engine reports them only when the
// request ends); message_delta carries the final values of all four fields.
#pragma once
#include <span>
#include <memory>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/api/context.h"
#include "server/api/tool_calls_api.h"

namespace preface::server {

struct AnthropicRequest {
  GenerationRequest generation;  // generation.pins: the cache_control breakpoints
  bool stream = false;
  std::optional<ToolOutput> tool_output;  // with tools: how the output is read back as tool_use blocks
};

// Throws ApiError (400). count_only: for /v1/messages/count_tokens (max_tokens not required, no breakpoints).
AnthropicRequest parse_messages_request(const nlohmann::json& body, ServerContext& ctx, bool count_only = false);

std::unique_ptr<ResponseFormat> make_messages_format(ServerContext& ctx, const AnthropicRequest& request);

// `pins`: the request's cache_control breakpoints, which split the written tokens into
// cache_creation.ephemeral_1h_input_tokens (written at positions a 1h breakpoint covers) and
// ephemeral_5m_input_tokens (the rest: 5m breakpoints, and blocks cached automatically without one).
nlohmann::json anthropic_usage(const GenerationSummary& summary, std::span<const engine::CachePin> pins = {});

}  // namespace preface::server
