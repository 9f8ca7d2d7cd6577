// Fuzz target: model output read as tool calls in every row's format (grammar/tool_formats.h). parse_tool_calls
// never throws and returns calls with a name and an object of arguments; the validated stream, fed the text in
// pieces, releases exactly the parsed calls (or the whole text when it does not parse); the incremental stream
// releases whole calls only, each with an object of arguments. Input: a selector byte (the row), then the text.
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "grammar/tool_call_stream.h"
#include "grammar/tool_calls.h"
#include "support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace preface;
  using grammar::ToolCallEvent;
  if (size < 1) return 0;
  const auto rows = grammar::tool_formats();
  const grammar::ToolFormat& f = rows[data[0] % rows.size()];
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  const std::vector<grammar::ToolSpec> tools = {
      {"f", nlohmann::json::parse(R"({"properties":{"s":{"type":"string"},"n":{"type":"integer"}}})")}};
  const auto parsed = grammar::parse_tool_calls(f, text, tools);
  if (parsed) {
    fuzz::check(!parsed->calls.empty(), "a parse without calls");
    for (const auto& c : parsed->calls) {
      fuzz::check(!c.name.empty(), "a call without a name");
      fuzz::check(c.arguments.is_object(), "arguments that are not an object");
    }
  }
  for (const bool incremental : {false, true}) {
    grammar::ToolCallStream s(f, incremental, tools);
    std::string out_text;
    std::vector<std::pair<std::string, std::string>> calls;
    const auto take = [&](const std::vector<ToolCallEvent>& evs) {
      for (const ToolCallEvent& e : evs) {
        if (e.kind == ToolCallEvent::Kind::Text) out_text += e.text;
        if (e.kind == ToolCallEvent::Kind::CallStart) calls.emplace_back(e.text, "");
        if (e.kind == ToolCallEvent::Kind::Arguments) {
          fuzz::check(!calls.empty(), "arguments before a call");
          calls.back().second += e.text;
        }
      }
    };
    for (size_t pos = 0; pos < text.size(); pos += 3) take(s.push(text.substr(pos, 3)));
    take(s.finish());
    for (const auto& [name, args] : calls) {
      fuzz::check(!name.empty(), "a streamed call without a name");
      fuzz::check(nlohmann::json::parse(args, nullptr, false).is_object(), "streamed arguments not an object");
    }
    if (incremental) continue;
    if (!parsed) {
      fuzz::check(calls.empty() && out_text == text, "text that does not parse did not come back as it was");
      continue;
    }
    fuzz::check(calls.size() == parsed->calls.size(), "the stream and the parse disagree on the calls");
    for (size_t i = 0; i < calls.size(); ++i) {
      fuzz::check(calls[i].first == parsed->calls[i].name, "the stream and the parse disagree on a name");
      const auto replaced = [](const nlohmann::json& j) {
        return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      };
      fuzz::check(replaced(nlohmann::json::parse(calls[i].second)) == replaced(parsed->calls[i].arguments),
                  "the stream and the parse disagree on arguments");
    }
  }
  return 0;
}
