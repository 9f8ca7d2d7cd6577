// Tool calling in both APIs (issue 25 items 2-4): the `tools` and `tool_choice` fields, the conversation's tool
// calls and tool results as the chat template receives them, and how the output is read back as calls.
//
// Tools reach the Jinja template as OpenAI function schemas, {"type": "function", "function": {"name",
// "description", "parameters"}}, with every schema's keys sorted (canonical JSON), so that the rendered system
// prompt + tools are byte-identical on every call of an agent loop whatever key order its client sends.
//
// Output: in the model family's own format (a row of grammar/tool_formats.h), detected from the template's own
// rendering of a call (server/api/tool_format_detect.h). With
// tool_choice required / any / a named tool, decoding is constrained to calls of the allowed tools in that
// format, their arguments valid under the tools' schemas (save keywords the grammar cannot enforce, which become
// GenerationRequest::warnings), so the call is valid by construction (and streamed as generated). With auto or
// none a schema is only rendered, never compiled. With auto, the output is parsed when it ends; what does not parse is text. With none, or when the
// template's format is not recognised (auto only; a forced choice is then a 400), the output is text.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "grammar/tool_call_stream.h"
#include "grammar/tool_calls.h"
#include "server/api/api_error.h"
#include "server/api/context.h"

namespace preface::server {

enum class ToolChoice { Auto, None, Required };

struct ToolsRequest {
  nlohmann::ordered_json tools = nullptr;  // for the template; null when the request has none
  std::vector<grammar::ToolSpec> specs;     // the same tools, for the call grammar
  ToolChoice choice = ToolChoice::Auto;
  std::optional<std::string> named;         // choice Required limited to this tool
  bool parallel = true;                     // more than one call per response
};

// How a response reads its output back as calls.
struct ToolOutput {
  const grammar::ToolFormat* format = nullptr;  // the model's row (server/api/tool_format_detect.h); never null
  bool constrained = false;  // decoding was constrained to calls: each call streams as soon as it is complete
  std::vector<grammar::ToolSpec> tools;  // the request's tools (types raw-string arguments)

  std::unique_ptr<grammar::ToolCallStream> stream() const {
    return std::make_unique<grammar::ToolCallStream>(*format, constrained, tools);
  }
  std::optional<grammar::ParsedOutput> parse(std::string_view text) const {
    return grammar::parse_tool_calls(*format, text, tools);
  }
};

// OpenAI: tools [{"type": "function", "function": {name, description, parameters, strict}}], tool_choice
// ("auto" | "none" | "required" | {"type": "function", "function": {"name"}}), parallel_tool_calls.
// Anthropic: tools [{name, description, input_schema}], tool_choice {"type": "auto" | "any" | "tool" | "none",
// "name", "disable_parallel_tool_use"}. Both throw ApiError 400 naming the parameter.
ToolsRequest parse_openai_tools(const JsonFields& f, const nlohmann::json& body);
ToolsRequest parse_anthropic_tools(const JsonFields& f);

// For a forced choice, compiles the allowed tools' schemas (a malformed one is a 400 naming e.g.
// tools[1].function.parameters.properties.x; loosened keywords go to request.warnings) and sets
// request.params.constraint to the call grammar (400 when another constraint is set).
// Returns how to read the output (nullopt: as text). `schema_field`: "function.parameters" or "input_schema".
std::optional<ToolOutput> apply_tools(const ToolsRequest& tools, ServerContext& ctx, GenerationRequest& request,
                                      const std::string& schema_field);

// OpenAI chat messages as the template receives them: roles system (developer)/user/assistant/tool, content as
// text, assistant tool_calls with arguments as JSON objects, tool messages with a tool_call_id that must name a
// call of an earlier assistant message (else 400 messages[i].tool_call_id).
nlohmann::ordered_json openai_template_messages(const JsonFields& f, int32_t max_messages);
// Whether the chat needs the template's JSON path: tools given, or a message with tool_calls or role tool.
bool openai_uses_tools(const nlohmann::json& body);

// A JSON value with every object's keys sorted.
nlohmann::ordered_json canonical_json(const nlohmann::json& v);
// A tool call's arguments: an object, or a string holding one (kept in its own key order); nullopt otherwise.
// Throws ApiError 400 when the string nests deeper than kMaxJsonDepth (the limit of the body it came in).
std::optional<nlohmann::ordered_json> arguments_object(const nlohmann::json& v);

}  // namespace preface::server
