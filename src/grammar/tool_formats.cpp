#include "grammar/tool_formats.h"

namespace preface::grammar {
namespace {

// DeepSeek's full-width bar (U+FF5C) and lower one-eighth block (U+2581), as its markers spell them.
#define BAR "\xef\xbd\x9c"
#define SEP "\xe2\x96\x81"

// Each row as its family's chat template renders an assistant tool call (the shared templates in
// ../shared/templates show every one of them). Detection tries the rows in this order.
constexpr ToolFormat kRows[] = {
    {.id = "qwen3-xml", .models = "Qwen3-Coder, Qwen3.5/3.6, Nemotron 3", .syntax = ToolSyntax::NameXml,
     .call_open = "<tool_call>\n<function=", .call_close = "</function>\n</tool_call>", .separator = "\n",
     .name_close = ">\n", .param_open = "<parameter=", .param_mid = ">\n", .param_close = "\n</parameter>\n"},
    {.id = "seed-oss", .models = "Seed-OSS", .syntax = ToolSyntax::NameXml,
     .call_open = "<seed:tool_call>\n<function=", .call_close = "</function>\n</seed:tool_call>", .separator = "\n",
     .name_close = ">\n", .param_open = "<parameter=", .param_mid = ">", .param_close = "</parameter>\n"},
    {.id = "glm", .models = "GLM-4.5, GLM-4.6", .syntax = ToolSyntax::NameXml, .call_open = "<tool_call>",
     .call_close = "</tool_call>", .separator = "\n", .name_close = "\n", .param_open = "<arg_key>",
     .param_mid = "</arg_key>\n<arg_value>", .param_close = "</arg_value>\n"},
    {.id = "minimax-xml", .models = "MiniMax M2", .syntax = ToolSyntax::NameXml,
     .section_open = "<minimax:tool_call>\n", .section_close = "</minimax:tool_call>", .call_open = "<invoke name=\"",
     .call_close = "</invoke>\n", .name_close = "\">\n", .param_open = "<parameter name=\"", .param_mid = "\">",
     .param_close = "</parameter>\n"},
    {.id = "deepseek-dsml", .models = "DeepSeek V3.2", .syntax = ToolSyntax::NameXml,
     .section_open = "<" BAR "DSML" BAR "function_calls>\n", .section_close = "</" BAR "DSML" BAR "function_calls>",
     .call_open = "<" BAR "DSML" BAR "invoke name=\"", .call_close = "</" BAR "DSML" BAR "invoke>\n",
     .name_close = "\">\n", .param_open = "<" BAR "DSML" BAR "parameter name=\"", .param_mid = "\" string=\"",
     .param_close = "</" BAR "DSML" BAR "parameter>\n", .typed_params = true},
    {.id = "deepseek-r1", .models = "DeepSeek R1, V3 (0324)", .syntax = ToolSyntax::NameJson,
     .section_open = "<" BAR "tool" SEP "calls" SEP "begin" BAR ">", .section_close = "<" BAR "tool" SEP "calls" SEP "end" BAR ">",
     .call_open = "<" BAR "tool" SEP "call" SEP "begin" BAR ">function<" BAR "tool" SEP "sep" BAR ">",
     .call_close = "\n```<" BAR "tool" SEP "call" SEP "end" BAR ">", .separator = "\n", .name_close = "\n```json\n"},
    {.id = "deepseek-v3.1", .models = "DeepSeek V3.1", .syntax = ToolSyntax::NameJson,
     .section_open = "<" BAR "tool" SEP "calls" SEP "begin" BAR ">", .section_close = "<" BAR "tool" SEP "calls" SEP "end" BAR ">",
     .call_open = "<" BAR "tool" SEP "call" SEP "begin" BAR ">", .call_close = "<" BAR "tool" SEP "call" SEP "end" BAR ">",
     .name_close = "<" BAR "tool" SEP "sep" BAR ">"},
    {.id = "kimi-k2", .models = "Kimi K2", .syntax = ToolSyntax::NameJson,
     .section_open = "<|tool_calls_section_begin|>", .section_close = "<|tool_calls_section_end|>",
     .call_open = "<|tool_call_begin|>", .call_close = "<|tool_call_end|>",
     .name_close = "<|tool_call_argument_begin|>", .name_prefix = "functions.", .name_index = true},
    {.id = "mistral-v11", .models = "Mistral Small 3.2, Magistral, Devstral", .syntax = ToolSyntax::NameJson,
     .call_open = "[TOOL_CALLS]", .name_close = "[ARGS]", .call_id_marker = "[CALL_ID]", .short_call_ids = true},
    {.id = "gemma4", .models = "Gemma 4", .syntax = ToolSyntax::GemmaObject, .call_open = "<|tool_call>call:",
     .call_close = "<tool_call|>"},
    {.id = "command-r7b", .models = "Command R7B, Command A", .syntax = ToolSyntax::JsonObject,
     .section_open = "<|START_ACTION|>[\n    ", .section_close = "\n]<|END_ACTION|>", .separator = ",\n    ",
     .name_key = "tool_name", .args_key = "parameters", .vocab_marker = "<|START_ACTION|>"},
    {.id = "phi4-mini", .models = "Phi-4-mini", .syntax = ToolSyntax::JsonObject, .section_open = "<|tool_call|>[",
     .section_close = "]<|/tool_call|>", .separator = ", ", .vocab_marker = "<|/tool_call|>"},
    {.id = "granite-3", .models = "Granite 3.x", .syntax = ToolSyntax::JsonObject, .section_open = "<|tool_call|>[",
     .section_close = "]", .separator = ", ", .vocab_marker = "<|tool_call|>"},
    {.id = "lfm2-pythonic", .models = "LFM2, LFM2.5", .syntax = ToolSyntax::Pythonic,
     .section_open = "<|tool_call_start|>[", .section_close = "]<|tool_call_end|>", .separator = ", ",
     .vocab_marker = "<|tool_call_start|>"},
    {.id = "functionary-v2", .models = "Functionary v2.5 (Llama 3)", .syntax = ToolSyntax::NameJson,
     .call_open = "<|reserved_special_token_249|>", .name_close = "\n"},
    {.id = "hermes", .models = "Hermes 2 Pro/3, Qwen 2.5/3, QwQ, Granite 4, Falcon 3", .syntax = ToolSyntax::JsonObject,
     .call_open = "<tool_call>\n", .call_close = "\n</tool_call>", .separator = "\n"},
    {.id = "mistral-v3", .models = "Mistral 7B v0.3, Mistral Small 3.1, Mixtral (v3 tokenizers)",
     .syntax = ToolSyntax::JsonObject, .section_open = "[TOOL_CALLS] [", .section_close = "]", .separator = ", "},
    {.id = "llama3-json", .models = "Llama 3.1-3.3, Llama 4 (JSON calls)", .syntax = ToolSyntax::JsonObject,
     .parallel = false, .leads = true, .args_key = "parameters"},
};

#undef BAR
#undef SEP

}  // namespace

std::span<const ToolFormat> tool_formats() { return kRows; }

const ToolFormat* find_tool_format(std::string_view id) {
  for (const ToolFormat& f : kRows) {
    if (f.id == id) return &f;
  }
  return nullptr;
}

}  // namespace preface::grammar
