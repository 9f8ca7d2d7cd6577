#include "server/api/tool_format_detect.h"

#include <algorithm>

#include "grammar/tool_calls.h"
#include "server/api/reply_channels.h"

namespace preface::server {
namespace {

using nlohmann::ordered_json;

constexpr const char* kProbeName = "preface_probe_fn";

// The probe conversation: a user turn, an assistant call of the probe tool, its result, an answer. Variants for
// templates that want content null or "" beside calls, or arguments as text.
ordered_json probe_messages(int variant) {
  ordered_json args = {{"probe_key", "probe value"}};
  ordered_json call = {{"id", "call1a2b3"},
                       {"type", "function"},
                       {"function", {{"name", kProbeName}, {"arguments", variant == 2 ? ordered_json(args.dump()) : args}}}};
  ordered_json assistant = {{"role", "assistant"}, {"content", variant == 1 ? ordered_json(nullptr) : ordered_json("")}};
  assistant["tool_calls"] = ordered_json::array({call});
  return ordered_json::array({
      {{"role", "user"}, {"content", "Call the probe."}},
      assistant,
      {{"role", "tool"}, {"tool_call_id", "call1a2b3"}, {"name", kProbeName}, {"content", "probe result"}},
      {{"role", "assistant"}, {"content", "Done."}},
  });
}

ordered_json probe_tools() {
  return ordered_json::array({{{"type", "function"},
                               {"function",
                                {{"name", kProbeName},
                                 {"description", "A probe."},
                                 {"parameters",
                                  {{"type", "object"},
                                   {"properties", {{"probe_key", {{"type", "string"}}}}},
                                   {"required", {"probe_key"}}}}}}}});
}

// Whether the row reads the probe call somewhere in `text`.
bool finds_probe(const grammar::ToolFormat& f, const std::string& text) {
  const std::vector<grammar::ToolSpec> tools = {
      {kProbeName, nlohmann::json::parse(R"({"type":"object","properties":{"probe_key":{"type":"string"}}})")}};
  const nlohmann::json want = {{"probe_key", "probe value"}};
  std::string_view open = !f.section_open.empty() ? f.section_open : f.call_open;
  open.remove_prefix(std::min(open.size(), open.find_first_not_of(" \t\r\n")));
  while (!open.empty() && (open.back() == ' ' || open.back() == '\n' || open.back() == '\t')) open.remove_suffix(1);
  for (size_t at = 0; at < text.size(); ++at) {
    at = open.empty() ? text.find_first_of("{[", at) : text.find(open, at);
    if (at == std::string::npos) return false;
    const auto calls = grammar::scan_call_region(f, std::string_view(text).substr(at), tools);
    if (!calls.empty() && calls[0].complete && calls[0].name == kProbeName &&
        nlohmann::json::parse(calls[0].arguments, nullptr, false) == want) {
      return true;
    }
  }
  return false;
}

const grammar::ToolFormat* by_rendering(const chat::ChatRenderer& renderer) {
  if (!renderer.is_jinja()) return nullptr;
  for (int variant = 0; variant < 3; ++variant) {
    std::string text;
    try {
      text = renderer.render_json(probe_messages(variant), probe_tools(), false).text;
    } catch (const std::exception&) {
      continue;
    }
    if (text.find(kProbeName) == std::string::npos) continue;
    for (const grammar::ToolFormat& f : grammar::tool_formats()) {
      if (finds_probe(f, text)) return &f;
    }
  }
  return nullptr;
}

const grammar::ToolFormat* by_vocabulary(const Tokenizer& tok) {
  for (const grammar::ToolFormat& f : grammar::tool_formats()) {
    if (f.vocab_marker.empty()) continue;
    for (int32_t id = 0; id < tok.n_vocab(); ++id) {
      if (tok.piece(id) == f.vocab_marker) return &f;
    }
  }
  return nullptr;
}

const grammar::ToolFormat* by_template_text(std::string_view source) {
  if (source.find("<tool_call>") != std::string_view::npos) return grammar::find_tool_format("hermes");
  if (source.find("[TOOL_CALLS]") != std::string_view::npos) return grammar::find_tool_format("mistral-v3");
  if (source.find("<|python_tag|>") != std::string_view::npos ||
      source.find("\"parameters\": dictionary of argument name and its value") != std::string_view::npos) {
    return grammar::find_tool_format("llama3-json");
  }
  return nullptr;
}

std::vector<int32_t> marker_tokens(const grammar::ToolFormat& f, const Tokenizer& tok) {
  const std::string_view markers[] = {f.section_open, f.section_close, f.call_open,  f.call_close,
                                      f.separator,    f.name_close,    f.param_open, f.param_mid,
                                      f.param_close,  f.call_id_marker};
  std::vector<int32_t> out;
  for (int32_t id = 0; id < tok.n_vocab(); ++id) {
    if (tok.attr(id) != TokenAttr::Control || tok.is_end_of_generation(id)) continue;
    const std::string& piece = tok.piece(id);
    if (piece.size() < 2) continue;
    for (const std::string_view m : markers) {
      if (m.find(piece) != std::string_view::npos) {
        out.push_back(id);
        break;
      }
    }
  }
  return out;
}

}  // namespace

ToolCallSetup detect_tool_calls(const chat::ChatRenderer& renderer, const Tokenizer& tokenizer) {
  ToolCallSetup s;
  if (template_is_harmony(renderer.source())) return s;
  if ((s.format = by_rendering(renderer)) != nullptr) {
    s.how = "rendering";
  } else if ((s.format = by_vocabulary(tokenizer)) != nullptr) {
    s.how = "vocabulary";
  } else if ((s.format = by_template_text(renderer.source())) != nullptr) {
    s.how = "template text";
  }
  if (s.format != nullptr) s.marker_tokens = marker_tokens(*s.format, tokenizer);
  return s;
}

}  // namespace preface::server
