#include "grammar/grammar_cache.h"

#include <openssl/evp.h>

#include "grammar/json_schema.h"

namespace preface::grammar {

GrammarCache::GrammarCache(std::shared_ptr<const TokenVocab> vocab, size_t capacity)
    : vocab_(std::move(vocab)), capacity_(std::max<size_t>(capacity, 1)) {}

std::shared_ptr<Constraint> GrammarCache::json_schema(const nlohmann::json& schema,
                                                      std::vector<Loosened>* loosened) {
  // The schema's GBNF is written on every call (cheap beside parsing it and building masks, which the cache
  // saves): its notes are per request, and equal schemas give equal text.
  SchemaGrammar compiled = compile_json_schema(schema);
  if (loosened != nullptr) loosened->insert(loosened->end(), compiled.loosened.begin(), compiled.loosened.end());
  return get(SourceKind::JsonSchema, compiled.gbnf);
}

std::shared_ptr<Constraint> GrammarCache::json_object() { return get(SourceKind::JsonObject, ""); }

std::shared_ptr<Constraint> GrammarCache::gbnf(std::string_view text) { return get(SourceKind::Gbnf, text); }

std::shared_ptr<Constraint> GrammarCache::get(SourceKind kind, std::string_view text) {
  Key key{};
  {
    std::string data(1, static_cast<char>(kind));
    data.append(text);
    unsigned int n = 0;
    if (EVP_Digest(data.data(), data.size(), key.data(), &n, EVP_sha256(), nullptr) != 1 || n != key.size()) {
      throw Error("SHA-256 failed");
    }
  }
  {
    std::lock_guard lock(mu_);
    if (const auto it = index_.find(key); it != index_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      ++n_hits_;
      return it->second->second;
    }
  }
  // Compiled outside the lock: a large schema does not hold up other requests.
  Grammar g;
  switch (kind) {
    case SourceKind::JsonObject: g = parse_gbnf(json_object_gbnf()); break;
    case SourceKind::JsonSchema:  // text: the schema's GBNF
    case SourceKind::Gbnf: g = parse_gbnf(text); break;
  }
  auto c = std::make_shared<Constraint>(std::move(g), vocab_);
  std::lock_guard lock(mu_);
  ++n_compiled_;
  if (const auto it = index_.find(key); it != index_.end()) return it->second->second;  // a racing compile won
  lru_.emplace_front(key, c);
  index_.emplace(key, lru_.begin());
  if (lru_.size() > capacity_) {
    index_.erase(lru_.back().first);
    lru_.pop_back();
  }
  return c;
}

GrammarCache::Stats GrammarCache::stats() const {
  std::lock_guard lock(mu_);
  return {n_hits_, n_compiled_, lru_.size()};
}

}  // namespace preface::grammar
