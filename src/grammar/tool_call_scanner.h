// Internal to src/grammar (tool_call_parse.cpp, tool_call_scanner.cpp, tool_call_literals.cpp): the scanner that
// reads a call region in any row's format (grammar/tool_formats.h), whole or as far as the text goes.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "grammar/tool_calls.h"

namespace preface::grammar::detail {

// Whitespace as the formats write it.
bool is_space(char c);
std::string_view trim_view(std::string_view s);
// JSON text as a value, or a discarded value when it is malformed or nests deeper than kMaxToolCallDepth.
nlohmann::json parse_bounded(std::string_view text);
// JSON text of a value read from model output, whose strings may hold invalid UTF-8 (replaced, never thrown on).
std::string dump(const nlohmann::json& v);

// How reading a piece ended: it was there, the text ended inside it (or before it), or something else is there.
enum class Got { Yes, End, No };

// Whether `text` starts with `marker` (trimmed), a whitespace run of the marker matching any whitespace run of the
// text, empty included; *n: the bytes of text it spans.
Got match_marker(std::string_view text, std::string_view marker, size_t* n);
// A JSON object {name_key: NAME, args_key: {...}} (or the other usual key, or OpenAI's {"function": {...}}).
std::optional<ParsedToolCall> call_from_json(const nlohmann::json& j, const ToolFormat& f);

class Scanner {
 public:
  Scanner(const ToolFormat& f, std::string_view s, const std::vector<ToolSpec>& tools) : f_(f), s_(s), tools_(tools) {}

  struct Result {
    std::vector<ScannedCall> calls;
    std::vector<nlohmann::json> args;   // [calls] the arguments of each complete call
    Got status = Got::Yes;    // Yes: the region ended properly; End: the text ended inside it; No: malformed
    bool bad_in_call = false; // status No inside a call (after its opening marker)
  };

  Result run() {
    Result r;
    r.status = region(r);
    return r;
  }

 private:
  void skip_ws() {
    while (pos_ < s_.size() && is_space(s_[pos_])) ++pos_;
  }
  bool at_end() const { return pos_ >= s_.size(); }
  // The marker (trimmed), after optional whitespace.
  Got marker(std::string_view m);
  Got literal(char c);

  Got region(Result& r);

  Got name(ScannedCall& c);

  // A JSON value's extent from pos_ (after whitespace).
  Got json_extent(size_t& start);

  Got call(ScannedCall& c, nlohmann::json& args);

  // Arguments text of key/value pairs read so far: "{" then "KEY": VALUE joined by ", " ("}" added at the end).
  static void add_pair(ScannedCall& c, std::vector<std::pair<std::string, nlohmann::json>>& pairs, std::string key, nlohmann::json v);

  Got json_call(ScannedCall& c, nlohmann::json& args);

  // An unfinished {"name": ..., "arguments": {...} of constrained output (name first): the name once its string
  // is closed, and the arguments text so far.
  void partial_json_call(std::string_view text, ScannedCall& c) const;

  Got xml_params(const std::string& fn, std::vector<std::pair<std::string, nlohmann::json>>& pairs, ScannedCall& c);

  Got python_params(std::vector<std::pair<std::string, nlohmann::json>>& pairs, ScannedCall& c);

  Got gemma_params(std::vector<std::pair<std::string, nlohmann::json>>& pairs, ScannedCall& c);

  // A Python literal (gemma: Gemma 4's values, strings between <|"|> marks, bare keys).
  Got value(nlohmann::json& out, bool gemma, size_t depth);

  Got python_string(nlohmann::json& out);

  // {KEY: VALUE, ...}: Python's (keys are string literals) or Gemma 4's (bare keys, colon, Gemma values); the
  // top level reports its pairs as they complete (pairs, c).
  Got object(nlohmann::json& out, bool gemma, size_t depth, std::vector<std::pair<std::string, nlohmann::json>>* pairs = nullptr,
             ScannedCall* c = nullptr);

  const ToolFormat& f_;
  std::string_view s_;
  const std::vector<ToolSpec>& tools_;
  size_t pos_ = 0;
};

}  // namespace preface::grammar::detail
