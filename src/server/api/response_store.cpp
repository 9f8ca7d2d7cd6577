#include "server/api/response_store.h"

namespace preface::server {

namespace {

// A reply may end mid UTF-8 character: its invalid bytes count as the replacement character.
template <typename Json>
size_t text_bytes(const Json& j) {
  return j.dump(-1, ' ', false, Json::error_handler_t::replace).size();
}

}  // namespace

size_t stored_response_bytes(const StoredResponse& r) {
  return r.id.size() + text_bytes(r.response) + text_bytes(r.input_items) + text_bytes(r.prompt_messages) +
         text_bytes(r.reply_message) + text_bytes(r.tools) + text_bytes(r.kwargs) + r.instructions.size() +
         r.cache_salt.size() + (r.prompt_tokens.size() + r.reply_tokens.size()) * sizeof(int32_t);
}

bool ResponseStore::put(const std::string& tenant, std::shared_ptr<const StoredResponse> r) {
  const size_t bytes = stored_response_bytes(*r);
  if (bytes > max_bytes_ || max_count_ <= 0) return false;
  const Key key{tenant, r->id};
  std::lock_guard lock(mu_);
  const Clock::time_point now = Clock::now();
  drop_expired(now);
  if (const auto it = entries_.find(key); it != entries_.end()) {
    bytes_ -= it->second.first.bytes;
    order_.erase(it->second.second);
    entries_.erase(it);
  }
  order_.push_back(key);
  entries_.emplace(key, std::make_pair(Entry{tenant, std::move(r), bytes, now + ttl_}, std::prev(order_.end())));
  bytes_ += bytes;
  while (bytes_ > max_bytes_ || entries_.size() > static_cast<size_t>(max_count_)) drop_oldest();
  return true;
}

std::shared_ptr<const StoredResponse> ResponseStore::get(const std::string& tenant, const std::string& id) {
  std::lock_guard lock(mu_);
  drop_expired(Clock::now());
  const auto it = entries_.find(Key{tenant, id});
  return it == entries_.end() ? nullptr : it->second.first.response;
}

bool ResponseStore::erase(const std::string& tenant, const std::string& id) {
  std::lock_guard lock(mu_);
  drop_expired(Clock::now());
  const auto it = entries_.find(Key{tenant, id});
  if (it == entries_.end()) return false;
  bytes_ -= it->second.first.bytes;
  order_.erase(it->second.second);
  entries_.erase(it);
  return true;
}

ResponseStore::Stats ResponseStore::stats() const {
  std::lock_guard lock(mu_);
  return {entries_.size(), bytes_, n_dropped_};
}

void ResponseStore::drop_expired(Clock::time_point now) {
  // Entries expire in insertion order (one TTL for all), so the expired ones lead order_.
  while (!order_.empty() && entries_.at(order_.front()).first.expires <= now) drop_oldest();
}

void ResponseStore::drop_oldest() {
  const auto it = entries_.find(order_.front());
  bytes_ -= it->second.first.bytes;
  entries_.erase(it);
  order_.pop_front();
  ++n_dropped_;
}

}  // namespace preface::server
