// Tool calls parsed out of a streamed generation, as the text arrives (the streaming side of tool_calls.h), in
// any row's format (grammar/tool_formats.h).
//
// The output splits into plain text and a call region (find_call_region: from the row's opening marker to the
// end; for rows whose calls lead the reply, the whole output when it starts with a call). Text before the region
// is released as it arrives, less a tail that could be the start of the region.
//
// A call is released whole (its start, then its arguments in one piece) once it is complete, never a part of one:
// a reply cut by max_tokens inside a call ends with the calls before it. Two modes for the region:
//  - incremental (decoding constrained to the call grammar, so the region is valid by construction): each call is
//    released as soon as its closing marker is generated.
//  - validated (tool_choice auto): the region is held until the end, then parsed with parse_tool_calls; when it
//    parses, its calls are released, otherwise the region comes back as text.
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
  // `format` must outlive the stream (the rows of tool_formats() do). `tools` types raw-string arguments.
  ToolCallStream(const ToolFormat& format, bool incremental, std::vector<ToolSpec> tools = {});

  // Appends generated text; returns what it releases, in order.
  std::vector<ToolCallEvent> push(std::string_view text);
  // At the end of the generation: everything still held.
  std::vector<ToolCallEvent> finish();
  // Calls released so far.
  int32_t n_calls() const { return n_calls_; }

 private:
  void text_out(std::string_view s, std::vector<ToolCallEvent>& out) const;
  void call_out(const std::string& name, const std::string& arguments, std::vector<ToolCallEvent>& out);

  const ToolFormat& format_;
  bool incremental_;
  std::vector<ToolSpec> tools_;
  bool in_region_ = false;
  bool text_only_ = false;  // a row whose calls lead the reply, and this reply did not start with one
  std::string pending_;     // before the region: text not yet released
  std::string region_;      // the call region so far
  int32_t n_calls_ = 0;
};

}  // namespace preface::grammar
