// Request fingerprints for the hosted APIs' cache diagnostics: Anthropic's `diagnostics.previous_message_id`
// (answered with `diagnostics.cache_miss_reason`) and OpenAI's `prompt_cache_options.comparison_response_id`
// (answered with `prompt_cache_diagnostics`). A fingerprint is a few SHA-256 digests per request part (model,
// system, tools, each message), never the content, kept per response id for the tenant that made it, so one tenant
// can never compare against (or learn anything of) another tenant's request.
//
// Comparison: the first part that differs, in prompt order (model, system, tools, then messages one by one; a
// request that only appends messages does not diverge). A differing part is named as a near miss when it is equal
// after a normalisation: `key_order` (tools equal with object keys sorted), `whitespace` (equal with all whitespace
// removed), `digits` (equal with every run of digits replaced: a date, a time, a counter).
// cache_missed_input_tokens estimates the tokens from the divergence on: the request's prompt tokens scaled by the
// share of its serialized bytes from the differing part on.
//
// Bound: FingerprintStore keeps at most max_bytes of fingerprints (oldest dropped first); thread-safe.
#pragma once
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "kv/hash.h"

namespace preface::server {

struct FingerprintPart {
  kv::Digest raw, no_space, no_digits, sorted_keys;
  uint64_t bytes = 0;  // serialized size
};

struct RequestFingerprint {
  kv::Digest model;
  FingerprintPart system, tools;
  std::vector<FingerprintPart> messages;
  int32_t n_prompt_tokens = 0;
  size_t memory_bytes() const { return sizeof(*this) + messages.size() * sizeof(FingerprintPart); }
};

// From a request body parsed with its key order kept. `system_key`: "system" (Anthropic) or "" (OpenAI, whose
// system prompt is a message).
RequestFingerprint fingerprint_request(const nlohmann::ordered_json& body, const char* system_key,
                                       int32_t n_prompt_tokens);

enum class Divergence : uint8_t { None, Model, System, Tools, Messages };

struct FingerprintComparison {
  Divergence where = Divergence::None;
  const char* near_miss = nullptr;  // "key_order" | "whitespace" | "digits" | nullptr
  int32_t missed_tokens = 0;        // the estimate above (0 with None)
};

FingerprintComparison compare_fingerprints(const RequestFingerprint& previous, const RequestFingerprint& current);

class FingerprintStore {
 public:
  explicit FingerprintStore(size_t max_bytes) : max_bytes_(max_bytes) {}
  void put(const std::string& response_id, const std::string& tenant, RequestFingerprint fp);
  // The fingerprint stored for response_id by `tenant`; nullopt when unknown, dropped, or another tenant's.
  std::optional<RequestFingerprint> get(const std::string& response_id, const std::string& tenant) const;
  size_t memory_bytes() const;

 private:
  struct Entry {
    std::string tenant;
    RequestFingerprint fp;
  };
  size_t max_bytes_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, Entry> by_id_;
  std::deque<std::string> order_;  // oldest first
  size_t bytes_ = 0;
};

}  // namespace preface::server
