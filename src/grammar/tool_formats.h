// Tool-call formats as a table: one row per family of models, saying how a reply writes its calls. The parser,
// the streaming parser and the grammar that forces a call (grammar/tool_calls.h) read a row; none of them knows a
// family by name. Which row a model uses is found from its chat template's own rendering of a tool call
// (server/api/tool_format_detect.h), not from a substring of the template.
//
// A reply is: optional text, then the call region: section_open, calls joined by separator, section_close. Each
// call is call_open, a body, call_close. The body's syntax:
//   JsonObject  {"<name_key>": NAME, "<args_key>": {...}}  (a call may also be OpenAI's {"function": {...}} shape)
//   NameJson    NAME name_close {...}                      (the arguments as one JSON object)
//   NameXml     NAME name_close then per argument: param_open KEY param_mid VALUE param_close
//               (VALUE: a string argument's raw text; any other argument as JSON)
//   Pythonic    NAME(KEY=VALUE, ...)                       (VALUE a Python literal; JSON's literals accepted)
//   GemmaObject NAME{KEY:VALUE,...}                        (strings between <|"|> marks, keys bare)
// Markers are matched with their surrounding whitespace optional, except where they bound a value (param_mid,
// param_close), whose newlines belong to the format: one leading and one trailing newline of a value are the
// format's when the markers write them.
//
// Markers that are control tokens of a vocabulary (DeepSeek's <｜tool▁calls▁begin｜>, Mistral's [TOOL_CALLS]) are
// written into the reply's text and allowed by grammars for the detected row (server/api/tool_format_detect.h).
#pragma once
#include <cstdint>
#include <span>
#include <string_view>

namespace preface::grammar {

enum class ToolSyntax : uint8_t { JsonObject, NameJson, NameXml, Pythonic, GemmaObject };

struct ToolFormat {
  std::string_view id{};      // stable name ("hermes", "qwen3-xml", ...), in logs and /props
  std::string_view models{};  // who writes it, for docs and messages
  ToolSyntax syntax = ToolSyntax::JsonObject;
  std::string_view section_open{}, section_close{};  // around a reply's calls; may be empty
  std::string_view call_open{}, call_close{};        // around each call; may be empty
  std::string_view separator{};                    // between calls (inside the section)
  bool parallel = true;                          // the family writes several calls in one reply
  // The calls must start the reply (no text before them): rows whose opening marker is not distinctive.
  bool leads = false;
  // JsonObject: the keys of the name and the arguments (the other usual key is accepted when reading).
  std::string_view name_key = "name", args_key = "arguments";
  // NameJson, NameXml, Pythonic, GemmaObject: what follows the name.
  std::string_view name_close{};
  std::string_view name_prefix{};  // written before the name (Kimi's "functions."); stripped when reading
  bool name_index = false;       // ":<n>" after the name (Kimi K2), the call's index in the reply
  std::string_view call_id_marker{};  // an optional "<marker>ID" between the name and name_close (Mistral's [CALL_ID])
  // NameXml: around each argument. typed_params: param_mid is `" string="true">` for a string argument and
  // `" string="false">` for another (DeepSeek V3.2's DSML), instead of param_mid.
  std::string_view param_open{}, param_mid{}, param_close{};
  bool typed_params = false;
  // Call ids of 9 letters and digits: the family's templates refuse others in the conversation (Mistral's).
  bool short_call_ids = false;
  // A vocabulary token that shows the family when the template never renders a call (LFM2's template writes
  // only text; its vocabulary has <|tool_call_start|>).
  std::string_view vocab_marker{};
};

// Every row, in the order detection tries them (more specific rows first).
std::span<const ToolFormat> tool_formats();
// The row named `id`; nullptr when there is none.
const ToolFormat* find_tool_format(std::string_view id);

}  // namespace preface::grammar
