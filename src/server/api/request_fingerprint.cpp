#include "server/api/request_fingerprint.h"

#include <cctype>
#include <span>

namespace preface::server {
namespace {

using nlohmann::ordered_json;

kv::Digest digest_of(const std::string& s) {
  return kv::sha256(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(s.data()), s.size()));
}

FingerprintPart part_of(const ordered_json* v) {
  FingerprintPart p;
  const std::string text = v == nullptr ? std::string() : v->dump();
  p.bytes = text.size();
  p.raw = digest_of(text);
  std::string no_space, no_digits;
  for (size_t i = 0; i < text.size(); ++i) {
    // JSON escapes of whitespace (\n, \t, \r) count as whitespace too.
    if (text[i] == '\\' && i + 1 < text.size()) {  // an escape: two characters, whitespace or kept whole
      const char e = text[++i];
      if (e != 'n' && e != 't' && e != 'r') no_space.append(1, '\\').append(1, e);
      continue;
    }
    if (!std::isspace(static_cast<unsigned char>(text[i]))) no_space += text[i];
  }
  for (size_t i = 0; i < text.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(text[i]))) {
      no_digits += text[i];
      continue;
    }
    no_digits += '0';  // a run of digits becomes one '0'
    while (i + 1 < text.size() && std::isdigit(static_cast<unsigned char>(text[i + 1]))) ++i;
  }
  p.no_space = digest_of(no_space);
  p.no_digits = digest_of(no_digits);
  // nlohmann::json (not ordered_json) keeps object keys sorted: its dump is the key-order-free form.
  p.sorted_keys = digest_of(v == nullptr ? std::string() : nlohmann::json::parse(text).dump());
  return p;
}

const ordered_json* field(const ordered_json& body, const char* key) {
  if (key == nullptr || *key == '\0') return nullptr;
  const auto it = body.find(key);
  return it == body.end() || it->is_null() ? nullptr : &*it;
}

const char* near_miss(const FingerprintPart& a, const FingerprintPart& b) {
  if (a.sorted_keys == b.sorted_keys) return "key_order";
  if (a.no_space == b.no_space) return "whitespace";
  if (a.no_digits == b.no_digits) return "digits";
  return nullptr;
}

}  // namespace

RequestFingerprint fingerprint_request(const ordered_json& body, const char* system_key, int32_t n_prompt_tokens) {
  RequestFingerprint fp;
  const ordered_json* model = field(body, "model");
  fp.model = digest_of(model != nullptr && model->is_string() ? model->get<std::string>() : std::string());
  fp.system = part_of(field(body, system_key));
  fp.tools = part_of(field(body, "tools"));
  if (const ordered_json* messages = field(body, "messages"); messages != nullptr && messages->is_array()) {
    for (const ordered_json& m : *messages) fp.messages.push_back(part_of(&m));
  }
  fp.n_prompt_tokens = n_prompt_tokens;
  return fp;
}

FingerprintComparison compare_fingerprints(const RequestFingerprint& previous, const RequestFingerprint& current) {
  FingerprintComparison c;
  uint64_t total = current.system.bytes + current.tools.bytes;
  for (const FingerprintPart& m : current.messages) total += m.bytes;
  uint64_t before = 0;  // bytes of `current` ahead of the differing part
  auto diverge = [&](Divergence where, const FingerprintPart* a, const FingerprintPart* b) {
    c.where = where;
    c.near_miss = a != nullptr && b != nullptr ? near_miss(*a, *b) : nullptr;
    const double share = total > 0 ? static_cast<double>(total - before) / static_cast<double>(total) : 1.0;
    c.missed_tokens = static_cast<int32_t>(share * current.n_prompt_tokens + 0.5);
    return c;
  };
  if (previous.model != current.model) return diverge(Divergence::Model, nullptr, nullptr);
  if (previous.system.raw != current.system.raw) return diverge(Divergence::System, &previous.system, &current.system);
  before += current.system.bytes;
  if (previous.tools.raw != current.tools.raw) return diverge(Divergence::Tools, &previous.tools, &current.tools);
  before += current.tools.bytes;
  for (size_t i = 0; i < previous.messages.size(); ++i) {
    if (i >= current.messages.size()) return diverge(Divergence::Messages, nullptr, nullptr);
    if (previous.messages[i].raw != current.messages[i].raw) {
      return diverge(Divergence::Messages, &previous.messages[i], &current.messages[i]);
    }
    before += current.messages[i].bytes;
  }
  return c;
}

void FingerprintStore::put(const std::string& response_id, const std::string& tenant, RequestFingerprint fp) {
  std::lock_guard lock(mu_);
  const size_t size = fp.memory_bytes() + response_id.size() + tenant.size();
  if (size > max_bytes_) return;
  if (const auto it = by_id_.find(response_id); it != by_id_.end()) {
    bytes_ -= it->second.fp.memory_bytes() + response_id.size() + it->second.tenant.size();
    by_id_.erase(it);
  }
  by_id_[response_id] = Entry{tenant, std::move(fp)};
  order_.push_back(response_id);
  bytes_ += size;
  while (bytes_ > max_bytes_ && !order_.empty()) {
    const std::string old = std::move(order_.front());
    order_.pop_front();
    if (const auto it = by_id_.find(old); it != by_id_.end()) {
      bytes_ -= it->second.fp.memory_bytes() + old.size() + it->second.tenant.size();
      by_id_.erase(it);
    }
  }
}

std::optional<RequestFingerprint> FingerprintStore::get(const std::string& response_id,
                                                        const std::string& tenant) const {
  std::lock_guard lock(mu_);
  const auto it = by_id_.find(response_id);
  if (it == by_id_.end() || it->second.tenant != tenant) return std::nullopt;
  return it->second.fp;
}

size_t FingerprintStore::memory_bytes() const {
  std::lock_guard lock(mu_);
  return bytes_;
}

}  // namespace preface::server
