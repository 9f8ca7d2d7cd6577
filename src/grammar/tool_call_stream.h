// Tool calls parsed out of a streamed generation, as the text arrives (the streaming side of tool_calls.h).
//
// The output splits into plain text and a call region: Hermes: from the first "<tool_call>" to the end; Llama3
// and Mistral: the whole output when its first non-space character opens a call ('{', '[', or the family's
// marker), else none. Text outside the region is released as it arrives, less a tail that could be the start of
// the region.
//
// Two modes for the region:
//  - incremental (decoding constrained to the call grammar, so the region is valid by construction): each call is
//    announced as soon as its name is complete, and its arguments object is released byte by byte as generated.
//  - validated (tool_choice auto): the region is held until the end, then parsed with parse_tool_calls; when it
//    parses, every call is released whole, otherwise the region comes back as text. A call that does not parse
//    is never released.
// The concatenation of a call's Arguments events is one JSON object text.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/tool_calls.h"

namespace preface::grammar {

struct ToolCallEvent {
  enum class Kind { Text, CallStart, Arguments };
  Kind kind = Kind::Text;
  int32_t index = 0;  // the call's index in the response (CallStart, Arguments)
  std::string text;   // Text: plain text; CallStart: the function name; Arguments: a fragment of the arguments
};

class ToolCallStream {
 public:
  ToolCallStream(ToolCallFormat format, bool incremental);

  // Appends generated text; returns what it releases, in order.
  std::vector<ToolCallEvent> push(std::string_view text);
  // At the end of the generation: everything still held.
  std::vector<ToolCallEvent> finish();
  // Calls announced so far.
  int32_t n_calls() const { return n_calls_; }

 private:
  enum class Mode { Undecided, Text, Calls };
  void text_out(std::string_view s, std::vector<ToolCallEvent>& out) const;
  void decide(std::vector<ToolCallEvent>& out);
  void scan(std::string_view bytes, std::vector<ToolCallEvent>& out);

  ToolCallFormat format_;
  bool incremental_;
  Mode mode_;
  std::string pending_;  // Undecided/Text: text not yet released
  std::string region_;   // Calls: the call region so far
  int32_t n_calls_ = 0;

  // The incremental scanner (brace depth over the region, strings inside objects only).
  int32_t depth_ = 0;
  bool in_string_ = false, escape_ = false;
  bool expect_key_ = true;   // depth 1: the next string is a key
  std::string string_;       // depth 1: the string being read
  std::string key_;          // depth 1: the last key read
  std::string args_;         // the current call's arguments text
  bool in_args_ = false;      // depth >= 2 is inside the arguments object
  bool call_started_ = false;
  size_t args_released_ = 0;
};

}  // namespace preface::grammar
