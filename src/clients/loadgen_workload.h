// Deterministic text workloads for `preface bench serve`. Prompts are plain text made of words drawn from a
// fixed list by a seeded generator, so two servers (or two runs) are sent byte-identical prompts whatever their
// tokenizers. Lengths are given in words and approximate tokens: every word below is a common lowercase English
// word that Llama/GPT-style BPE vocabularies encode as one token with its leading space, so n words is ~n tokens
// there, plus ~10% for the periods (1600 words measured 1778 tokens with the 125M test model's vocabulary; tiny
// vocabularies such as stories260K's split words into several tokens). The real counts are in the usage the
// server reports, which the benchmark prints as mean_prompt_tokens.
// Header-only so tests can check the generator without linking the CLI.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "util/error.h"

namespace preface::cli::loadgen {

enum class WorkloadKind { kSharedPrefix, kMultiTurn, kRandom };

struct WorkloadSpec {
  WorkloadKind kind = WorkloadKind::kSharedPrefix;
  uint64_t seed = 1;
  int32_t n_groups = 8;            // shared-prefix: distinct system prompts
  int32_t n_prompts_per_group = 4; // shared-prefix: questions per system prompt
  int32_t n_users = 8;             // multi-turn: conversations
  int32_t n_turns = 4;             // multi-turn: user turns per conversation
  int32_t n_requests = 32;         // random: independent prompts
  int32_t system_words = 1600;     // ~tokens of each system prompt (random: added to question_words)
  int32_t question_words = 64;     // ~tokens of each question / user turn
};

// One conversation: the turns are sent in order on one logical user, each request carrying the whole history
// (system prompt, earlier questions and the server's earlier replies). Single-turn workloads have one turn.
struct Conversation {
  std::string system;
  std::vector<std::string> questions;  // [n_turns]
};

// splitmix64: a well-mixed 64-bit hash, used to derive an independent stream per (seed, role, index) so a
// prompt does not depend on the order or number of the others.
inline uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

inline constexpr std::array<std::string_view, 128> kWords = {
    "the",   "of",    "and",   "to",    "in",    "is",    "it",    "you",   "that",  "he",    "was",   "for",
    "on",    "are",   "with",  "as",    "his",   "they",  "be",    "at",    "one",   "have",  "this",  "from",
    "or",    "had",   "by",    "word",  "but",   "what",  "some",  "we",    "can",   "out",   "other", "were",
    "all",   "there", "when",  "up",    "use",   "your",  "how",   "said",  "an",    "each",  "she",   "which",
    "do",    "their", "time",  "if",    "will",  "way",   "about", "many",  "then",  "them",  "write", "would",
    "like",  "so",    "these", "her",   "long",  "make",  "thing", "see",   "him",   "two",   "has",   "look",
    "more",  "day",   "could", "go",    "come",  "did",   "number","sound", "no",    "most",  "people","my",
    "over",  "know",  "water", "than",  "call",  "first", "who",   "may",   "down",  "side",  "been",  "now",
    "find",  "any",   "new",   "work",  "part",  "take",  "get",   "place", "made",  "live",  "where", "after",
    "back",  "little","only",  "round", "man",   "year",  "came",  "show",  "every", "good",  "me",    "give",
    "our",   "under", "name",  "very",  "through","just", "form",  "great"};

// `n_words` words drawn from kWords by the stream `stream_seed`, separated by single spaces; a period ends every
// 16th word so the text has sentence structure (the period merges into the word's token in BPE vocabularies).
inline std::string make_text(uint64_t stream_seed, int32_t n_words) {
  std::string out;
  uint64_t state = stream_seed;
  for (int32_t i = 0; i < n_words; ++i) {
    state = mix64(state);
    if (i > 0) out += ' ';
    out += kWords[state % kWords.size()];
    if (i % 16 == 15 || i + 1 == n_words) out += '.';
  }
  return out;
}

// Role tags keep the system prompts, questions and random prompts of one seed on disjoint streams.
inline uint64_t stream(uint64_t seed, uint64_t role, uint64_t a, uint64_t b = 0) {
  return mix64(mix64(mix64(seed ^ (role << 56)) ^ a) ^ (b + 1));
}

// The conversations of `spec`, in dispatch order. Shared-prefix interleaves the groups (question 0 of every
// group, then question 1, ...) so that with concurrency <= n_groups the first request of a group has usually
// finished its prefill before its siblings arrive, as happens when traffic from many tenants mixes.
inline std::vector<Conversation> make_workload(const WorkloadSpec& spec) {
  const auto check = [](int32_t v, const char* what, int32_t lo) {
    if (v < lo) throw Error(std::string(what) + " must be >= " + std::to_string(lo) + ", got " + std::to_string(v));
  };
  check(spec.system_words, "the system prompt length", 0);
  check(spec.question_words, "the question length", 1);
  std::vector<Conversation> out;
  switch (spec.kind) {
    case WorkloadKind::kSharedPrefix: {
      check(spec.n_groups, "--groups", 1);
      check(spec.n_prompts_per_group, "--prompts-per-group", 1);
      for (int32_t p = 0; p < spec.n_prompts_per_group; ++p)
        for (int32_t g = 0; g < spec.n_groups; ++g)
          out.push_back({make_text(stream(spec.seed, 1, static_cast<uint64_t>(g)), spec.system_words),
                         {make_text(stream(spec.seed, 2, static_cast<uint64_t>(g), static_cast<uint64_t>(p)),
                                    spec.question_words)}});
      break;
    }
    case WorkloadKind::kMultiTurn: {
      check(spec.n_users, "--users", 1);
      check(spec.n_turns, "--turns", 1);
      const std::string system = make_text(stream(spec.seed, 1, 0), spec.system_words);
      for (int32_t u = 0; u < spec.n_users; ++u) {
        Conversation c{system, {}};
        for (int32_t t = 0; t < spec.n_turns; ++t)
          c.questions.push_back(make_text(stream(spec.seed, 3, static_cast<uint64_t>(u), static_cast<uint64_t>(t)),
                                          spec.question_words));
        out.push_back(std::move(c));
      }
      break;
    }
    case WorkloadKind::kRandom: {
      check(spec.n_requests, "--requests", 1);
      for (int32_t r = 0; r < spec.n_requests; ++r)
        out.push_back({"", {make_text(stream(spec.seed, 4, static_cast<uint64_t>(r)),
                                      spec.system_words + spec.question_words)}});
      break;
    }
  }
  return out;
}

// The prompt text of turn `replies.size()` of `c`: the system prompt, then "User:"/"Assistant:" paragraphs for
// each earlier turn with the server's reply, then the current question and an open "Assistant:" cue.
// Invariant: the prompt of turn t is a prefix of the prompt of turn t+1 up to its final "Assistant:" cue, so a
// prefix cache can reuse the whole history.
inline std::string render_prompt(const Conversation& c, const std::vector<std::string>& replies) {
  std::string out = c.system;
  for (size_t t = 0; t <= replies.size() && t < c.questions.size(); ++t) {
    if (!out.empty()) out += "\n\n";
    out += "User: " + c.questions[t] + "\n\nAssistant:";
    if (t < replies.size()) out += replies[t];
  }
  return out;
}

inline int64_t n_requests(const std::vector<Conversation>& w) {
  int64_t n = 0;
  for (const Conversation& c : w) n += static_cast<int64_t>(c.questions.size());
  return n;
}

}  // namespace preface::cli::loadgen
