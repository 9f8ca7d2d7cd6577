// Compiled constraints for the model's vocabulary, cached by the SHA-256 of what they were compiled from (kind +
// canonical text), least recently used dropped beyond `capacity`. Requests with the same schema share one
// Constraint, and with it its cached token masks. Thread-safe; compiling runs on the caller's thread (the HTTP
// thread: parsing only, no masks).
#pragma once
#include <array>
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "grammar/token_vocab.h"

namespace preface::grammar {

enum class SourceKind : uint8_t { JsonSchema, JsonObject, Gbnf };

class GrammarCache {
 public:
  explicit GrammarCache(std::shared_ptr<const TokenVocab> vocab, size_t capacity = 64);

  // Throws GrammarError (where: the schema path or GBNF location) for an invalid source. json_schema appends what
  // the compile loosened (json_schema.h's SchemaGrammar::loosened) to `loosened` when given.
  std::shared_ptr<Constraint> json_schema(const nlohmann::json& schema, std::vector<Loosened>* loosened = nullptr);
  std::shared_ptr<Constraint> json_object();
  std::shared_ptr<Constraint> gbnf(std::string_view text);

  const TokenVocab& vocab() const { return *vocab_; }
  struct Stats {
    int64_t n_hits = 0, n_compiled = 0;
    size_t n_entries = 0;
  };
  Stats stats() const;

 private:
  using Key = std::array<uint8_t, 32>;
  std::shared_ptr<Constraint> get(SourceKind kind, std::string_view text);

  const std::shared_ptr<const TokenVocab> vocab_;
  const size_t capacity_;
  mutable std::mutex mu_;
  std::list<std::pair<Key, std::shared_ptr<Constraint>>> lru_;  // most recent first
  std::map<Key, decltype(lru_)::iterator> index_;
  int64_t n_hits_ = 0, n_compiled_ = 0;
};

}  // namespace preface::grammar
