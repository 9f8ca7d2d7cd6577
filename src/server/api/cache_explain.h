// The cache explainer's wire shape: why a prompt hits the prefix cache as far as it does, for POST
// /v1/cache/explain and, opt-in per request ("cache_explain": true, or the header X-Preface-Cache-Explain: 1),
// a `cache_explain` object in the response (and an X-Preface-Cache-Explain header, also on streams).
//
//   {"cached_tokens": N, "prompt_tokens": P, "block_size": B, "reason": R, "diverged_at": i | null,
//    "cached_token": {"id", "text"} | null, "new_token": {"id", "text"} | null, "detail": "<a sentence>",
//    "removed_seconds_ago": s (evicted / expired / purged only),
//    "global_cached_tokens": n (window_evicted only),
//    "state_snapshot_at": n, "blocks_cached_tokens": m (no_state_snapshot only)}
//
// R is kv::miss_reason_name(), "cache_disabled", "window_evicted" (the sliding-window pool no longer holds the
// window of the global layers' hit) or "no_state_snapshot" (recurrent layers: the cached blocks reach token m, the
// last state snapshot at or before it is at n, where a request resumes). Tokens and text come only from the caller's own namespace
// (the prompt, and the cached block its chain shares); siblings are the caller tenant's other namespaces
// (other cache_salt values), never another tenant's, so the answer is the same whatever other tenants cached.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "engine/engine.h"
#include "tokenizer/tokenizer.h"

namespace preface::server {

nlohmann::json cache_explain_json(const engine::CacheExplanation& e, const Tokenizer& tok);
// One line for the X-Preface-Cache-Explain header: "reason=never_seen; cached_tokens=48; diverged_at=51".
std::string cache_explain_header(const engine::CacheExplanation& e);

}  // namespace preface::server
