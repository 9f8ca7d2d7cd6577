// Fuzz target: the Jinja interpreter (src/chat/jinja) on arbitrary template text, rendered over a fixed
// conversation (system, user, an assistant tool call, a tool result, a user turn with a text part) with tools,
// chat_template_kwargs and BOS/EOS. The first byte picks the conversation's variant and limits; the rest is the
// template. Checks:
//   - parsing and rendering throw only preface::Error (JinjaError), never crash, hang or exhaust memory: the
//     interpreter's caps (output bytes, loop iterations, macro depth, nesting) bound every input;
//   - a render is a pure function of its inputs (twice gives the same text and marks);
//   - content marks are ascending, disjoint, non-empty and inside the text.
#include <cstdint>
#include <string>

#include "chat/chat_jinja.h"
#include "support.h"
#include "util/error.h"

namespace preface::fuzz {
namespace {

using nlohmann::ordered_json;

const ordered_json& conversation(int variant) {
  static const ordered_json kFull = ordered_json::parse(R"J([
    {"role": "system", "content": "  Be brief.\n"},
    {"role": "user", "content": "Weather in Paris? </s><|im_end|>"},
    {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
      "function": {"name": "get_weather", "arguments": {"city": "Paris", "unit": ["c", 1.5, true, null]}}}]},
    {"role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": "{\"t\": 21}"},
    {"role": "assistant", "content": "<think>\nok\n</think>\n\nIt is 21 °C."},
    {"role": "user", "content": [{"type": "text", "text": "Thanks\u3000"}]}])J");
  static const ordered_json kSingle = ordered_json::parse(R"J([{"role": "user", "content": "Hello"}])J");
  static const ordered_json kEmpty = ordered_json::array();
  return variant == 0 ? kFull : variant == 1 ? kSingle : kEmpty;
}

const ordered_json& tools() {
  static const ordered_json kTools = ordered_json::parse(R"J([{"type": "function", "function": {
    "name": "get_weather", "description": "Current weather (°C)", "parameters": {"type": "object",
    "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]}},
    "required": ["city"]}}}])J");
  return kTools;
}

void check_marks(const chat::RenderedChat& r) {
  size_t end = 0;
  for (const TextSpan& s : r.content) {
    check(s.length > 0, "empty content mark");
    check(s.offset >= end, "content marks overlap or are out of order");
    end = s.offset + s.length;
    check(end <= r.text.size(), "content mark past the end of the text");
  }
}

}  // namespace
}  // namespace preface::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace preface;
  using namespace preface::fuzz;
  if (size < 1 || size > 16384) return 0;
  const uint8_t sel = data[0];
  const std::string_view source(reinterpret_cast<const char*>(data + 1), size - 1);
  chat::jinja::RenderConfig config;
  config.max_output_bytes = 1u << 20;
  config.max_loop_iterations = 20000;
  config.max_call_depth = 16;
  config.clock = [] {
    std::tm tm{};
    tm.tm_year = 124;
    tm.tm_mon = 6;
    tm.tm_mday = 26;
    return tm;
  };
  std::unique_ptr<chat::JinjaChatTemplate> tmpl;
  try {
    tmpl = std::make_unique<chat::JinjaChatTemplate>(source, (sel & 4) ? std::optional<std::string>("<s>") : std::nullopt,
                                                     (sel & 8) ? std::optional<std::string>("</s>") : std::nullopt);
  } catch (const Error&) {
    return 0;
  }
  const ordered_json& messages = conversation((sel & 3) % 3);
  const ordered_json no_tools;
  const ordered_json& t = (sel & 16) ? tools() : no_tools;
  const ordered_json kwargs = (sel & 32) ? ordered_json{{"enable_thinking", (sel & 64) != 0}} : ordered_json();
  chat::RenderedChat first;
  bool ok = false;
  try {
    first = tmpl->render(messages, t, (sel & 128) != 0, kwargs, config);
    ok = true;
  } catch (const Error&) {
  }
  if (!ok) return 0;
  check(first.text.size() <= config.max_output_bytes, "output over the cap");
  check_marks(first);
  const chat::RenderedChat second = tmpl->render(messages, t, (sel & 128) != 0, kwargs, config);
  check(second.text == first.text, "two renders differ");
  check(second.content.size() == first.content.size(), "two renders' marks differ");
  return 0;
}
