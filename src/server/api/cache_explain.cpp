#include "server/api/cache_explain.h"

#include <cstdio>

#include "server/api/context.h"

namespace preface::server {
namespace {

using nlohmann::json;

json token_json(int32_t id, const Tokenizer& tok) {
  if (id < 0) return nullptr;
  const std::string piece = tok.token_to_bytes(id);
  return {{"id", id}, {"text", is_valid_utf8(piece) ? json(piece) : byte_array(piece)}};
}

// The sliding-window layers' pool cuts the hit short of the global layers' blocks.
bool window_limited(const engine::CacheExplanation& e) {
  return e.window_cached_tokens >= 0 && e.window_cached_tokens < e.prefix.n_cached_tokens;
}

// Recurrent layers: the blocks reach further than the last state snapshot, where a request resumes.
bool state_limited(const engine::CacheExplanation& e) {
  return e.state_cached_tokens >= 0 && e.state_cached_tokens < e.prefix.n_full_hit_tokens;
}

int32_t cached_tokens(const engine::CacheExplanation& e) {
  // A model with recurrent layers resumes only at a snapshot: never inside a partial block.
  if (e.state_cached_tokens >= 0) return e.state_cached_tokens;
  return window_limited(e) ? e.window_cached_tokens : e.prefix.n_cached_tokens;
}

std::string reason_of(const engine::CacheExplanation& e) {
  if (!e.prefix_cache) return "cache_disabled";
  if (state_limited(e)) return "no_state_snapshot";
  return window_limited(e) ? "window_evicted" : kv::miss_reason_name(e.prefix.reason);
}

std::string block_range(const engine::CacheExplanation& e) {
  const int32_t first = e.prefix.miss_block * e.block_size;
  return "block " + std::to_string(e.prefix.miss_block) + " (tokens " + std::to_string(first) + ".." +
         std::to_string(first + e.block_size - 1) + ")";
}

std::string detail(const engine::CacheExplanation& e, const Tokenizer& tok) {
  const kv::PrefixExplanation& p = e.prefix;
  char ago[64] = "";
  if (p.removal) std::snprintf(ago, sizeof ago, "%.1f s ago", e.removed_seconds_ago);
  auto quoted = [&](int32_t id) {  // built by append: GCC 12 warns (-Wrestrict) on "'" + std::string
    std::string q(1, '\'');
    q.append(tok.token_to_bytes(id)).append("' (id ").append(std::to_string(id)).append(")");
    return q;
  };
  if (!e.prefix_cache) return "the server runs without a prefix cache (--no-prefix-cache)";
  if (state_limited(e)) {
    const std::string at = std::to_string(e.state_cached_tokens);
    return "the blocks are cached up to token " + std::to_string(p.n_full_hit_tokens) +
           ", but the recurrent layers' state has " +
           (e.state_cached_tokens > 0 ? "its nearest snapshot at token " + at + ", where"
                                      : std::string("no snapshot before it, so")) +
           " a request resumes, recomputing " + std::to_string(p.n_full_hit_tokens - e.state_cached_tokens) +
           " cached tokens; snapshots are taken at breakpoints (cache_control, prompt_cache_breakpoint), at the end "
           "of each prompt and reply, every --state-snapshot-interval tokens and where prompts diverge (this "
           "request would leave one at token " + std::to_string(p.n_full_hit_tokens) + ")";
  }
  if (window_limited(e)) {
    return "the global layers' blocks reach token " + std::to_string(p.n_cached_tokens) +
           ", but the sliding-window layers' blocks before it were evicted after they left a sequence's window; " +
           "a request resumes at token " + std::to_string(e.window_cached_tokens) +
           ", the last block boundary whose window is still cached (--kv-window-reclaim)";
  }
  switch (p.reason) {
    case kv::MissReason::FullHit:
      return "every full block before the prompt's last token is cached (the last token is always computed)";
    case kv::MissReason::PartialBlock:
      return "every full block is cached; the last " +
             std::to_string(e.n_prompt_tokens - 1 - p.n_full_hit_tokens) + " token(s) before the last one fill " +
             "only part of a block (blocks of " + std::to_string(e.block_size) + " tokens are cached when full)";
    case kv::MissReason::NeverSeen:
      if (p.cached_token >= 0) {
        return "the prompt differs from the cached prefix at token " + std::to_string(p.diverged_at) + ": cached " +
               quoted(p.cached_token) + ", this prompt " + quoted(p.new_token);
      }
      if (p.miss_block == 0) return "nothing cached in this namespace starts like this prompt";
      return "the cached prefix ends at token " + std::to_string(p.diverged_at) +
             "; nothing after it was computed in this namespace (e.g. the previous turn's prompt ended there)";
    case kv::MissReason::Evicted:
      return block_range(e) + " was evicted " + ago + " to make room (" + std::to_string(p.removal->n_in_use) +
             " of " + std::to_string(e.n_blocks) + " blocks were in use)";
    case kv::MissReason::Expired:
      return block_range(e) + " expired " + ago + " (idle longer than --cache-ttl)";
    case kv::MissReason::Purged:
      return block_range(e) + " was purged " + ago + " (DELETE /v1/cache)";
    case kv::MissReason::OtherNamespace:
      return block_range(e) + " is cached for this tenant under another cache_salt";
  }
  return {};
}

}  // namespace

json cache_explain_json(const engine::CacheExplanation& e, const Tokenizer& tok) {
  const kv::PrefixExplanation& p = e.prefix;
  json out = {{"cached_tokens", cached_tokens(e)},
              {"prompt_tokens", e.n_prompt_tokens},
              {"block_size", e.block_size},
              {"reason", reason_of(e)},
              {"diverged_at", p.diverged_at >= 0 ? json(p.diverged_at) : json(nullptr)},
              {"cached_token", token_json(p.cached_token, tok)},
              {"new_token", token_json(p.diverged_at >= 0 ? p.new_token : -1, tok)},
              {"detail", detail(e, tok)}};
  if (p.removal) out["removed_seconds_ago"] = e.removed_seconds_ago;
  if (!e.tier.empty()) out["tier"] = e.tier;  // the missing block is held below RAM: the request would load it
  if (window_limited(e)) out["global_cached_tokens"] = p.n_cached_tokens;
  if (state_limited(e)) {
    out["state_snapshot_at"] = e.state_cached_tokens;
    out["blocks_cached_tokens"] = p.n_full_hit_tokens;
  }
  return out;
}

std::string cache_explain_header(const engine::CacheExplanation& e) {
  std::string h = "reason=" + reason_of(e) + "; cached_tokens=" + std::to_string(cached_tokens(e));
  if (e.prefix.diverged_at >= 0) h += "; diverged_at=" + std::to_string(e.prefix.diverged_at);
  if (!e.tier.empty()) h += "; tier=" + e.tier;
  return h;
}

}  // namespace preface::server
