// Tool calls in a model family's own output format (a row of grammar/tool_formats.h): the grammar that makes a
// `required` or named tool_choice produce a valid call by construction, and the parser that turns model output
// back into calls. Used by every API (server/api/tool_calls_api.h); grammar/tool_call_stream.h parses the same
// formats as a stream.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "grammar/json_schema.h"
#include "grammar/tool_formats.h"

namespace preface::grammar {

// Deepest nesting of objects and arrays accepted in a parsed call (its arguments included); deeper output is
// not a call.
inline constexpr size_t kMaxToolCallDepth = 64;

struct ToolSpec {
  std::string name;
  nlohmann::json parameters = nlohmann::json::object();  // a JSON Schema of the arguments object
};

// GBNF whose root matches one call (parallel and the row allows it: one or more) to any of `tools`, each call's
// arguments valid under that tool's parameters, save what cannot be enforced, appended to `loosened` (when given)
// with the path "[i].<path in tool i's schema>": what the JSON Schema compile loosens, and in rows whose argument
// syntax is not JSON (NameXml strings, GemmaObject) string constraints other than enum/const and nested values.
// Arguments come in the schema's property order; required ones always, optional ones may be left out.
// `prefix`: text before the calls (a reasoning block's closing tag when the prompt left one open).
// Throws GrammarError (where "[i]..." names the tool and the path in its schema).
std::string tool_call_gbnf(const ToolFormat& format, const std::vector<ToolSpec>& tools, bool parallel,
                           std::vector<Loosened>* loosened = nullptr, std::string_view prefix = "");

// Whether a property schema is a string's (type "string", or an enum / const of strings only): rows that write
// strings raw (NameXml, GemmaObject) write such an argument as its text, any other as JSON.
bool is_string_schema(const nlohmann::json& property);

struct ParsedToolCall {
  std::string name;
  nlohmann::json arguments;  // an object
};
struct ParsedOutput {
  std::string content;                 // text before the calls, trimmed
  std::vector<ParsedToolCall> calls;
};

// The calls in `text`: text, then the call region, then nothing but whitespace. nullopt when it holds no call,
// or when its first call does not parse (the caller returns the text as it is, never a broken call); calls that
// parse before one that does not (a reply cut by max_tokens) are returned without it and what follows. `tools`
// (may be empty) types the arguments of rows that write strings raw: a value whose property is a string stays a
// string, another is read as JSON when it parses.
std::optional<ParsedOutput> parse_tool_calls(const ToolFormat& format, std::string_view text,
                                             const std::vector<ToolSpec>& tools = {});

// Where the call region starts in `text` (npos: not yet, or never). `partial` is set when the text's end could
// still become the start of a region (a prefix of the opening marker), at the offset returned through it.
size_t find_call_region(const ToolFormat& format, std::string_view text, size_t* partial = nullptr);

// A call region read so far (streaming): every call begun, the last one possibly unfinished.
struct ScannedCall {
  std::string name;       // empty until the name is complete
  std::string arguments;  // JSON text of the arguments so far; each scan's text extends the previous one's
  bool complete = false;  // the call's closing marker was read
};
// Reads a region that is valid so far (constrained output), stopping at the end of the text. Stops early (and
// returns what it read) where the text is not a call region.
std::vector<ScannedCall> scan_call_region(const ToolFormat& format, std::string_view region,
                                          const std::vector<ToolSpec>& tools = {});

}  // namespace preface::grammar
