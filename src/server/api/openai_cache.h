// OpenAI's prompt cache controls, honoured with the same cache pins as Anthropic's cache_control
// (engine::CachePin: the full blocks of a prompt prefix are never evicted until the TTL passes; each hit, or a
// request pinning them again, pushes the expiry to max(current, now + TTL)).
//
// Shapes (OpenAI's Chat Completions / Responses, as of the gpt-5.6 models):
//   prompt_cache_retention: "in_memory" (default; "in-memory" is older SDKs' spelling) | "24h" | null.
//     "in_memory": no pin, the prompt is cached automatically and evicted under pressure (LRU) or after
//     --cache-ttl. "24h": the whole prompt is pinned for 24 h, and explicit breakpoints default to 24 h.
//   prompt_cache_options: {"mode": "implicit" (default) | "explicit", "ttl": "30m" (default) | "12h",
//     "comparison_response_id": (the cache diagnostics', http_diagnostics.cpp)} | null.
//     With mode "implicit" or a ttl given: the whole prompt is pinned for ttl (OpenAI's implicit breakpoint at
//     the end of the newest message); options carrying neither (only comparison_response_id) ask for diagnostics
//     and pin nothing. Mode "explicit": only the content blocks' breakpoints pin. ttl is also the default TTL of
//     explicit breakpoints. OpenAI rejects prompt_cache_options.ttl together with prompt_cache_retention
//     (the former supersedes the latter); so does preface.
//   prompt_cache_breakpoint on a chat content part ({"type": "text", "text": ..., "prompt_cache_breakpoint":
//     {"mode": "explicit", "ttl": "30m" | "12h"}}): pins the prompt prefix that ends with that part (the common
//     token prefix of the prompt and the conversation rendered up to and including the part, as cache_control's
//     breakpoints). A request writes at most 4 breakpoints, the implicit one included; of more explicit ones the
//     latest are kept (OpenAI's rule), never an error.
// Any other value of these fields is a 400 naming the field (e.g. "prompt_cache_options.ttl",
// "messages[0].content[1].prompt_cache_breakpoint.mode").
//
// Usage: prompt_tokens_details.cache_pinned_tokens: prompt tokens (whole KV blocks) that the request's longest
// pin covers, and cache_pin_ttl_seconds its TTL (both present only when the request pinned); as for Anthropic,
// cache_pin_refused_blocks when the tenant's or the pool's pin budget refused some blocks.
#pragma once
#include <chrono>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/request.h"
#include "server/api/api_error.h"
#include "server/api/context.h"

namespace preface::server {

struct OpenAICachePolicy {
  std::chrono::seconds breakpoint_ttl{1800};         // the TTL of a breakpoint without its own
  std::optional<std::chrono::seconds> implicit_ttl;  // set: the whole prompt is pinned for this long
};

inline constexpr size_t kMaxOpenAIBreakpoints = 4;

// prompt_cache_retention and prompt_cache_options of a request body (`f` reads the body). Throws ApiError (400).
OpenAICachePolicy parse_openai_cache_policy(const JsonFields& f);

// The pins of a prompt without content blocks (/v1/completions): the implicit one, if any.
std::vector<engine::CachePin> openai_prompt_pins(const OpenAICachePolicy& policy, const std::vector<int32_t>& prompt);

// The pins of a chat request: each content part's prompt_cache_breakpoint resolved to a token prefix of `prompt`
// (messages[i] of `body` is `messages[i]`, as parse_chat_request builds them; parts are joined without a
// separator), then the implicit pin, at most kMaxOpenAIBreakpoints in all. `messages` empty (a request rendered
// through the template's JSON path, with tools): breakpoints are validated but pin nothing. Throws ApiError (400).
std::vector<engine::CachePin> openai_chat_pins(const ServerContext& ctx, const nlohmann::json& body,
                                               const std::vector<ChatMessage>& messages,
                                               const std::vector<int32_t>& prompt, const OpenAICachePolicy& policy,
                                               const nlohmann::ordered_json& kwargs);

// Adds the pin fields above to an OpenAI usage object (nothing when `pins` is empty).
void add_openai_pin_usage(nlohmann::json& usage, const engine::RequestStats& stats,
                          std::span<const engine::CachePin> pins, int32_t block_size);

}  // namespace preface::server
