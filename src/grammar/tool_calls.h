// Tool calls in a model family's own output format: the grammar that makes a `required` or named tool_choice
// produce a valid call by construction, and the parser that turns model output back into calls.
//
//   Hermes  (Hermes 2 Pro, Qwen 2.5/3):  <tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>  (repeated)
//   Llama3  (Llama 3.1-3.3 JSON calls):  {"name": "f", "parameters": {...}}                             (one)
//   Mistral (v3 tokenizers):             [TOOL_CALLS][{"name": "f", "arguments": {...}}, ...]
// Mistral's [TOOL_CALLS] is a control token, which grammars never produce and decoding drops: the grammar covers
// the JSON array after it, and the parser accepts the array with or without the marker text.
//
// Used by both APIs (server/api/tool_calls_api.h); grammar/tool_call_stream.h parses the same formats as a stream.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "grammar/json_schema.h"

namespace preface::grammar {

// Deepest nesting of objects and arrays accepted in a parsed call (its arguments included); deeper output is
// not a call.
inline constexpr size_t kMaxToolCallDepth = 64;

enum class ToolCallFormat { Hermes, Llama3, Mistral };

// The format a chat template's source implies, from the markers it writes; nullopt when none is recognised.
std::optional<ToolCallFormat> detect_tool_call_format(std::string_view template_source);

struct ToolSpec {
  std::string name;
  nlohmann::json parameters = nlohmann::json::object();  // a JSON Schema of the arguments object
};

// GBNF whose root matches one call (parallel: one or more) to any of `tools`, each call's arguments valid under
// that tool's parameters (save what the schema compile loosens: appended to `loosened` when given, with the
// path "[i].<path in tool i's schema>"). Throws GrammarError (where "[i]..." names the tool and the path in its schema).
std::string tool_call_gbnf(ToolCallFormat format, const std::vector<ToolSpec>& tools, bool parallel,
                           std::vector<Loosened>* loosened = nullptr);

struct ParsedToolCall {
  std::string name;
  nlohmann::json arguments;  // an object
};
struct ParsedOutput {
  std::string content;                 // text outside the calls (Hermes: before the first call), trimmed
  std::vector<ParsedToolCall> calls;
};

// The calls in `text`; nullopt when it holds none or one that does not parse (the caller returns the text as
// it is, never a broken call). Hermes: calls that parse before one that does not (a reply cut by max_tokens in
// its last call) are returned without it.
std::optional<ParsedOutput> parse_tool_calls(ToolCallFormat format, std::string_view text);

}  // namespace preface::grammar
