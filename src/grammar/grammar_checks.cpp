// Checks over a built Grammar: left recursion (parse time) and matching a whole byte string (tests, tools).
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "grammar/grammar.h"

namespace preface::grammar {

void check_left_recursion(const Grammar& g) {
  const size_t n = g.rules.size();
  std::vector<bool> nullable(n, false);
  auto alt_nullable_prefix = [&](int32_t pos, auto&& on_ref) {  // walks while items are nullable
    for (;; ++pos) {
      const Element& e = g.elements[static_cast<size_t>(pos)];
      if (e.kind == Element::End) return true;
      if (e.kind == Element::Bytes) return false;
      on_ref(e.value);
      if (!nullable[static_cast<size_t>(e.value)]) return false;
    }
  };
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < n; ++r) {
      if (nullable[r]) continue;
      for (int32_t alt : g.rules[r]) {
        if (alt_nullable_prefix(alt, [](int32_t) {})) {
          nullable[r] = true;
          changed = true;
          break;
        }
      }
    }
  }
  std::vector<std::vector<int32_t>> left(n);
  for (size_t r = 0; r < n; ++r) {
    for (int32_t alt : g.rules[r]) alt_nullable_prefix(alt, [&](int32_t ref) { left[r].push_back(ref); });
  }
  std::vector<uint8_t> color(n, 0);  // 0 new, 1 on the path, 2 done
  for (size_t start = 0; start < n; ++start) {
    if (color[start]) continue;
    std::vector<std::pair<size_t, size_t>> stack{{start, 0}};
    color[start] = 1;
    while (!stack.empty()) {
      auto& [r, k] = stack.back();
      if (k == left[r].size()) {
        color[r] = 2;
        stack.pop_back();
        continue;
      }
      const auto next = static_cast<size_t>(left[r][k++]);
      if (color[next] == 1) {
        throw GrammarError("rule '" + g.rule_names[next] + "'",
                           "left recursion (the rule can reach itself without consuming input, e.g. a repetition "
                           "of something that can be empty)");
      }
      if (color[next] == 0) {
        color[next] = 1;
        stack.emplace_back(next, 0);
      }
    }
  }
}


ByteMatch match_bytes(const Grammar& g, std::string_view bytes, size_t max_stacks) {
  using Stack = std::vector<int32_t>;  // positions, top last
  std::vector<Stack> cur, done;
  // Expands stacks until each has a Bytes element on top (or is empty: accepted).
  auto expand = [&](Stack start, std::vector<Stack>& out) {
    std::vector<Stack> work{std::move(start)};
    while (!work.empty()) {
      Stack s = std::move(work.back());
      work.pop_back();
      if (out.size() + work.size() > max_stacks) {
        throw Error("match_bytes: more than " + std::to_string(max_stacks) + " parse stacks");
      }
      if (s.empty()) {
        out.push_back(std::move(s));
        continue;
      }
      const int32_t pos = s.back();
      const Element& e = g.elements[static_cast<size_t>(pos)];
      if (e.kind == Element::Bytes) {
        out.push_back(std::move(s));
      } else if (e.kind == Element::End) {
        s.pop_back();
        work.push_back(std::move(s));
      } else {
        s.back() = pos + 1;
        for (int32_t alt : g.rules[static_cast<size_t>(e.value)]) {
          Stack t = s;
          t.push_back(alt);
          work.push_back(std::move(t));
        }
      }
    }
  };
  // Stacks are a set (as the token matcher interns them): duplicates, e.g. from `root ::= "" | ""`, collapse.
  auto dedupe = [](std::vector<Stack>& v) {
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
  };
  for (int32_t alt : g.rules[static_cast<size_t>(g.root)]) expand({alt}, cur);
  dedupe(cur);
  for (const char ch : bytes) {
    std::vector<Stack> next;
    for (const Stack& s : cur) {
      if (s.empty()) continue;
      const Element& e = g.elements[static_cast<size_t>(s.back())];
      if (!g.terminals[static_cast<size_t>(e.value)].test(static_cast<uint8_t>(ch))) continue;
      Stack t = s;
      t.back() += 1;
      expand(std::move(t), next);
    }
    dedupe(next);
    cur = std::move(next);
  }
  ByteMatch m;
  m.alive = !cur.empty();
  m.accepting = std::any_of(cur.begin(), cur.end(), [](const Stack& s) { return s.empty(); });
  m.complete = m.accepting && cur.size() == 1;
  return m;
}

}  // namespace preface::grammar
