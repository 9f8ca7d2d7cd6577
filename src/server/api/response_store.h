// Stored responses of the Responses API (POST /v1/responses with store: true): what GET, DELETE, input_items and
// previous_response_id read. Each entry belongs to one tenant and is invisible to every other (a lookup under
// another tenant is "not found", as for an id that never existed). Bounded: at most `max_count` entries and
// `max_bytes` of them (oldest dropped first), each kept `ttl` after it was stored. Thread-safe.
//
// An entry keeps the conversation's token ids through the end of its reply, so a follow-up resumes exactly
// there (server/api/responses_api.h): no re-rendering of what came before, a guaranteed prefix hit.
#pragma once
#include <chrono>
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace preface::server {

struct StoredResponse {
  std::string id;                        // "resp_..."
  nlohmann::json response;               // the response object as it was returned (status completed/incomplete)
  nlohmann::json input_items;            // this request's input items, with their ids (input_items lists them)
  // The conversation as chat messages: everything before the reply (`prompt_messages`) and the reply itself
  // (`reply_message`, an assistant message with content and/or tool_calls), as the template renders them.
  nlohmann::ordered_json prompt_messages;
  nlohmann::ordered_json reply_message;
  nlohmann::ordered_json tools;          // the tools rendered into the prompt (null when none)
  nlohmann::ordered_json kwargs;         // chat_template_kwargs the prompt was rendered with
  std::string instructions;              // the request's instructions (a system message first in prompt_messages)
  std::string cache_salt;                // the request's salt, before the tenant's (a follow-up keeps it)
  std::vector<int32_t> prompt_tokens;    // what the reply was generated from
  std::vector<int32_t> reply_tokens;     // the reply's tokens as the engine produced them
  int32_t stop_token = -1;               // the end-of-generation token that ended the reply (-1: none)
};

class ResponseStore {
 public:
  ResponseStore(int32_t max_count, size_t max_bytes, std::chrono::seconds ttl)
      : max_count_(max_count), max_bytes_(max_bytes), ttl_(ttl) {}

  // Stores (or replaces) `r` for `tenant`; entries beyond the bounds are dropped, oldest first. An entry larger
  // than max_bytes on its own is not stored (returns false).
  bool put(const std::string& tenant, std::shared_ptr<const StoredResponse> r);
  // The entry, or null when `id` is unknown to `tenant`, expired or dropped.
  std::shared_ptr<const StoredResponse> get(const std::string& tenant, const std::string& id);
  // True when the entry existed (for this tenant) and is gone now.
  bool erase(const std::string& tenant, const std::string& id);

  struct Stats {
    size_t n_entries = 0, bytes = 0;
    int64_t n_dropped = 0;  // dropped for the bounds or expiry
  };
  Stats stats() const;

 private:
  using Clock = std::chrono::steady_clock;
  struct Entry {
    std::string tenant;
    std::shared_ptr<const StoredResponse> response;
    size_t bytes = 0;
    Clock::time_point expires;
  };
  using Key = std::pair<std::string, std::string>;  // (tenant, id)
  void drop_expired(Clock::time_point now);
  void drop_oldest();

  const int32_t max_count_;
  const size_t max_bytes_;
  const std::chrono::seconds ttl_;
  mutable std::mutex mu_;
  std::list<Key> order_;  // oldest first
  std::map<Key, std::pair<Entry, std::list<Key>::iterator>> entries_;
  size_t bytes_ = 0;
  int64_t n_dropped_ = 0;
};

// Bytes an entry holds (its JSON texts and token ids), for the store's bound.
size_t stored_response_bytes(const StoredResponse& r);

}  // namespace preface::server
