// The GBNF parser's rule builder (internal to grammar/gbnf_parser.cpp): rules as sequences of items (a rule
// reference or a byte-set terminal), named and synthesized rules, deduplicated terminals, and the element budget
// (kMaxGrammarElements) counted as alternatives are added.
#pragma once
#include <bitset>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "grammar/grammar.h"

namespace preface::grammar::detail {

struct Item {
  bool is_ref = false;
  int32_t value = 0;  // rule id or terminal id
};
using Seq = std::vector<Item>;

class Builder {
 public:
  std::vector<std::vector<Seq>> rules;
  std::vector<std::string> names;
  std::vector<bool> defined;
  std::vector<std::bitset<256>> terminals;
  size_t n_items = 0;

  int32_t named(const std::string& name) {
    const auto [it, fresh] = by_name_.emplace(name, static_cast<int32_t>(rules.size()));
    if (fresh) add(name);
    return it->second;
  }
  int32_t synthesized(const std::string& base) {
    const int32_t id = static_cast<int32_t>(rules.size());
    add(base + "-" + std::to_string(id));
    defined[static_cast<size_t>(id)] = true;
    return id;
  }
  int32_t terminal(const std::bitset<256>& set) {
    const auto [it, fresh] = terminal_ids_.emplace(set.to_string(), static_cast<int32_t>(terminals.size()));
    if (fresh) terminals.push_back(set);
    return it->second;
  }
  void add_alt(int32_t rule, Seq seq) {
    count(seq.size() + 1);
    rules[static_cast<size_t>(rule)].push_back(std::move(seq));
  }
  void count(size_t n) {
    n_items += n;
    if (n_items > kMaxGrammarElements) {
      throw GrammarError("", "the grammar is too large (more than " + std::to_string(kMaxGrammarElements) +
                                 " elements once repetitions are expanded)");
    }
  }
  std::map<std::vector<uint32_t>, Item> class_cache;  // lowered code point classes, by their sorted ranges

 private:
  void add(const std::string& name) {
    rules.emplace_back();
    names.push_back(name);
    defined.push_back(false);
  }
  std::map<std::string, int32_t> by_name_;
  std::map<std::string, int32_t> terminal_ids_;
};

}  // namespace preface::grammar::detail
