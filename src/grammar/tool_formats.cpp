#include "grammar/tool_formats.h"

#include <vector>

namespace preface::grammar {
namespace {

// Each row as its family's chat template renders an assistant tool call (the shared templates in
// ../shared/templates show every one of them). Detection tries the rows in this order.
ToolFormat row(std::string_view id, std::string_view models, ToolSyntax syntax) {
  ToolFormat f;
  f.id = id;
  f.models = models;
  f.syntax = syntax;
  return f;
}

std::vector<ToolFormat> build() {
  std::vector<ToolFormat> rows;
  {
    ToolFormat f = row("qwen3-xml", "Qwen3-Coder, Qwen3.5/3.6, Nemotron 3", ToolSyntax::NameXml);
    f.call_open = "<tool_call>\n<function=";
    f.name_close = ">\n";
    f.param_open = "<parameter=";
    f.param_mid = ">\n";
    f.param_close = "\n</parameter>\n";
    f.call_close = "</function>\n</tool_call>";
    f.separator = "\n";
    rows.push_back(f);
  }
  {
    ToolFormat f = row("seed-oss", "Seed-OSS", ToolSyntax::NameXml);
    f.call_open = "<seed:tool_call>\n<function=";
    f.name_close = ">\n";
    f.param_open = "<parameter=";
    f.param_mid = ">";
    f.param_close = "</parameter>\n";
    f.call_close = "</function>\n</seed:tool_call>";
    f.separator = "\n";
    rows.push_back(f);
  }
  {
    ToolFormat f = row("glm", "GLM-4.5, GLM-4.6", ToolSyntax::NameXml);
    f.call_open = "<tool_call>";
    f.name_close = "\n";
    f.param_open = "<arg_key>";
    f.param_mid = "</arg_key>\n<arg_value>";
    f.param_close = "</arg_value>\n";
    f.call_close = "</tool_call>";
    f.separator = "\n";
    rows.push_back(f);
  }
  {
    ToolFormat f = row("minimax-xml", "MiniMax M2", ToolSyntax::NameXml);
    f.section_open = "<minimax:tool_call>\n";
    f.section_close = "</minimax:tool_call>";
    f.call_open = "<invoke name=\"";
    f.name_close = "\">\n";
    f.param_open = "<parameter name=\"";
    f.param_mid = "\">";
    f.param_close = "</parameter>\n";
    f.call_close = "</invoke>\n";
    rows.push_back(f);
  }
  {
    ToolFormat f = row("deepseek-dsml", "DeepSeek V3.2", ToolSyntax::NameXml);
    f.section_open = "<\xef\xbd\x9c" "DSML\xef\xbd\x9c" "function_calls>\n";
    f.section_close = "</\xef\xbd\x9c" "DSML\xef\xbd\x9c" "function_calls>";
    f.call_open = "<\xef\xbd\x9c" "DSML\xef\xbd\x9c" "invoke name=\"";
    f.name_close = "\">\n";
    f.param_open = "<\xef\xbd\x9c" "DSML\xef\xbd\x9c" "parameter name=\"";
    f.param_mid = "\" string=\"";
    f.typed_params = true;
    f.param_close = "</\xef\xbd\x9c" "DSML\xef\xbd\x9c" "parameter>\n";
    f.call_close = "</\xef\xbd\x9c" "DSML\xef\xbd\x9c" "invoke>\n";
    rows.push_back(f);
  }
  {
    ToolFormat f = row("deepseek-r1", "DeepSeek R1, V3 (0324)", ToolSyntax::NameJson);
    f.section_open = "<\xef\xbd\x9ctool\xe2\x96\x81" "calls\xe2\x96\x81" "begin\xef\xbd\x9c>";
    f.section_close = "<\xef\xbd\x9ctool\xe2\x96\x81" "calls\xe2\x96\x81" "end\xef\xbd\x9c>";
    f.call_open = "<\xef\xbd\x9ctool\xe2\x96\x81" "call\xe2\x96\x81" "begin\xef\xbd\x9c>function<\xef\xbd\x9ctool\xe2\x96\x81sep\xef\xbd\x9c>";
    f.name_close = "\n```json\n";
    f.call_close = "\n```<\xef\xbd\x9ctool\xe2\x96\x81" "call\xe2\x96\x81" "end\xef\xbd\x9c>";
    f.separator = "\n";
    rows.push_back(f);
  }
  {
    ToolFormat f = row("deepseek-v3.1", "DeepSeek V3.1", ToolSyntax::NameJson);
    f.section_open = "<\xef\xbd\x9ctool\xe2\x96\x81" "calls\xe2\x96\x81" "begin\xef\xbd\x9c>";
    f.section_close = "<\xef\xbd\x9ctool\xe2\x96\x81" "calls\xe2\x96\x81" "end\xef\xbd\x9c>";
    f.call_open = "<\xef\xbd\x9ctool\xe2\x96\x81" "call\xe2\x96\x81" "begin\xef\xbd\x9c>";
    f.name_close = "<\xef\xbd\x9ctool\xe2\x96\x81sep\xef\xbd\x9c>";
    f.call_close = "<\xef\xbd\x9ctool\xe2\x96\x81" "call\xe2\x96\x81" "end\xef\xbd\x9c>";
    rows.push_back(f);
  }
  {
    ToolFormat f = row("kimi-k2", "Kimi K2", ToolSyntax::NameJson);
    f.section_open = "<|tool_calls_section_begin|>";
    f.section_close = "<|tool_calls_section_end|>";
    f.call_open = "<|tool_call_begin|>";
    f.name_prefix = "functions.";
    f.name_index = true;
    f.name_close = "<|tool_call_argument_begin|>";
    f.call_close = "<|tool_call_end|>";
    rows.push_back(f);
  }
  {
    ToolFormat f = row("mistral-v11", "Mistral Small 3.2, Magistral, Devstral", ToolSyntax::NameJson);
    f.call_open = "[TOOL_CALLS]";
    f.call_id_marker = "[CALL_ID]";
    f.name_close = "[ARGS]";
    f.short_call_ids = true;
    rows.push_back(f);
  }
  {
    ToolFormat f = row("gemma4", "Gemma 4", ToolSyntax::GemmaObject);
    f.call_open = "<|tool_call>call:";
    f.call_close = "<tool_call|>";
    rows.push_back(f);
  }
  {
    ToolFormat f = row("command-r7b", "Command R7B, Command A", ToolSyntax::JsonObject);
    f.section_open = "<|START_ACTION|>[\n    ";
    f.section_close = "\n]<|END_ACTION|>";
    f.separator = ",\n    ";
    f.name_key = "tool_name";
    f.args_key = "parameters";
    f.vocab_marker = "<|START_ACTION|>";
    rows.push_back(f);
  }
  {
    ToolFormat f = row("phi4-mini", "Phi-4-mini", ToolSyntax::JsonObject);
    f.section_open = "<|tool_call|>[";
    f.section_close = "]<|/tool_call|>";
    f.separator = ", ";
    f.vocab_marker = "<|/tool_call|>";
    rows.push_back(f);
  }
  {
    ToolFormat f = row("granite-3", "Granite 3.x", ToolSyntax::JsonObject);
    f.section_open = "<|tool_call|>[";
    f.section_close = "]";
    f.separator = ", ";
    f.vocab_marker = "<|tool_call|>";
    rows.push_back(f);
  }
  {
    ToolFormat f = row("lfm2-pythonic", "LFM2, LFM2.5", ToolSyntax::Pythonic);
    f.section_open = "<|tool_call_start|>[";
    f.section_close = "]<|tool_call_end|>";
    f.separator = ", ";
    f.vocab_marker = "<|tool_call_start|>";
    rows.push_back(f);
  }
  {
    ToolFormat f = row("functionary-v2", "Functionary v2.5 (Llama 3)", ToolSyntax::NameJson);
    f.call_open = "<|reserved_special_token_249|>";
    f.name_close = "\n";
    rows.push_back(f);
  }
  {
    ToolFormat f = row("hermes", "Hermes 2 Pro/3, Qwen 2.5/3, QwQ, Granite 4, Falcon 3", ToolSyntax::JsonObject);
    f.call_open = "<tool_call>\n";
    f.call_close = "\n</tool_call>";
    f.separator = "\n";
    rows.push_back(f);
  }
  {
    ToolFormat f = row("mistral-v3", "Mistral 7B v0.3, Mistral Small 3.1, Mixtral (v3 tokenizers)", ToolSyntax::JsonObject);
    f.section_open = "[TOOL_CALLS] [";
    f.section_close = "]";
    f.separator = ", ";
    rows.push_back(f);
  }
  {
    ToolFormat f = row("llama3-json", "Llama 3.1-3.3, Llama 4 (JSON calls)", ToolSyntax::JsonObject);
    f.args_key = "parameters";
    f.parallel = false;
    f.leads = true;
    rows.push_back(f);
  }
  return rows;
}

}  // namespace

std::span<const ToolFormat> tool_formats() {
  static const std::vector<ToolFormat> rows = build();
  return rows;
}

const ToolFormat* find_tool_format(std::string_view id) {
  for (const ToolFormat& f : tool_formats()) {
    if (f.id == id) return &f;
  }
  return nullptr;
}

}  // namespace preface::grammar
