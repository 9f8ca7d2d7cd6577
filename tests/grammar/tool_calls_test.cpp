// Tool-call formats: detection from the real templates in ../shared/templates, and for each family (Hermes/Qwen,
// Llama 3.x, Mistral) random walks of the constrained grammar over a byte vocabulary that end in calls which
// parse back (parse_tool_calls) to allowed tool names with arguments valid under the tool's schema.
#include <gtest/gtest.h>

#include <fstream>
#include <random>

#include <nlohmann/json.hpp>

#include "grammar/grammar.h"
#include "grammar/matcher.h"
#include "grammar/tool_calls.h"
#include "support/json_schema_validator.h"
#include "support/shared_data.h"

namespace preface::grammar {
namespace {

using nlohmann::json;

std::string template_source(const std::string& file) {
  const auto path = test::shared_file("templates/" + file);
  if (path.empty()) return {};
  std::ifstream in(path);
  return json::parse(in).value("template", "");
}

TEST(ToolCalls, DetectsTheFamilyOfRealTemplates) {
  const std::pair<const char*, ToolCallFormat> cases[] = {
      {"NousResearch__Hermes-2-Pro-Llama-3-8B__tool_use.json", ToolCallFormat::Hermes},
      {"Qwen__Qwen3-1.7B.json", ToolCallFormat::Hermes},
      {"meta-llama__Llama-3.2-11B-Vision-Instruct.json", ToolCallFormat::Llama3},
      {"mistralai__Mistral-Small-3.1-24B-Instruct-2503.json", ToolCallFormat::Mistral},
  };
  for (const auto& [file, format] : cases) {
    const std::string src = template_source(file);
    if (src.empty()) GTEST_SKIP() << "shared test data not found";
    EXPECT_EQ(detect_tool_call_format(src), format) << file;
  }
  EXPECT_EQ(detect_tool_call_format(template_source("chatml.json")), std::nullopt);
}

const std::vector<ToolSpec> kTools = {
    {"get_weather", json::parse(R"({"type":"object","properties":{"city":{"type":"string","maxLength":6},
        "unit":{"enum":["c","f"]}},"required":["city","unit"],"additionalProperties":false})")},
    {"add", json::parse(R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}},
        "required":["a","b"]})")},
    {"noop", json::parse(R"({"type":"object","properties":{},"additionalProperties":false})")},
};

std::shared_ptr<const TokenVocab> byte_vocab() {
  std::vector<std::string> bytes{""};
  for (int b = 0; b < 256; ++b) bytes.emplace_back(1, static_cast<char>(b));
  for (const char* t : {"<tool_call>", "</tool_call>", "{\"name\": \"", "\"arguments\": ", "\"parameters\": ", "\n"}) {
    bytes.emplace_back(t);
  }
  return std::make_shared<TokenVocab>(std::move(bytes), std::vector<int32_t>{0}, false);
}

void walk_and_parse(ToolCallFormat format, bool parallel) {
  auto c = std::make_shared<Constraint>(parse_gbnf(tool_call_gbnf(format, kTools, parallel)), byte_vocab());
  std::mt19937_64 rng(7);
  int n_multi = 0;
  for (int w = 0; w < 24; ++w) {
    Matcher m(c, false);
    std::string text;
    for (int step = 0; step < 400 && !m.complete(); ++step) {
      const auto mask = m.allowed();
      std::vector<int32_t> allowed;
      for (int32_t id = 0; id < c->vocab().n_vocab(); ++id) {
        if (mask->test(id)) allowed.push_back(id);
      }
      ASSERT_FALSE(allowed.empty());
      // Prefer ending once possible (EOS), so walks finish; otherwise a uniform choice.
      const int32_t t = mask->test(0) && rng() % 3 == 0 ? 0 : allowed[rng() % allowed.size()];
      ASSERT_TRUE(m.accept(t));
      if (t == 0) break;
      text += c->vocab().bytes(t);
    }
    if (!m.accepting()) continue;  // the step budget ran out inside a long string
    const auto parsed = parse_tool_calls(format, text);
    ASSERT_TRUE(parsed.has_value()) << text;
    ASSERT_FALSE(parsed->calls.empty());
    if (!parallel || format == ToolCallFormat::Llama3) {
      EXPECT_EQ(parsed->calls.size(), 1u) << text;
    }
    n_multi += parsed->calls.size() > 1 ? 1 : 0;
    for (const ParsedToolCall& call : parsed->calls) {
      const auto it = std::find_if(kTools.begin(), kTools.end(), [&](const ToolSpec& t) { return t.name == call.name; });
      ASSERT_NE(it, kTools.end()) << call.name;
      EXPECT_EQ(test::JsonSchemaValidator(it->parameters).validate(call.arguments), "") << text;
    }
  }
  if (parallel && format != ToolCallFormat::Llama3) {
    EXPECT_GT(n_multi, 0);
  }
}

TEST(ToolCalls, ConstrainedCallsParseAndValidateHermes) { walk_and_parse(ToolCallFormat::Hermes, true); }
TEST(ToolCalls, ConstrainedCallsParseAndValidateLlama3) { walk_and_parse(ToolCallFormat::Llama3, false); }
TEST(ToolCalls, ConstrainedCallsParseAndValidateMistral) { walk_and_parse(ToolCallFormat::Mistral, true); }
TEST(ToolCalls, SingleCallWhenNotParallel) { walk_and_parse(ToolCallFormat::Hermes, false); }

TEST(ToolCalls, ParsingModelOutput) {
  auto h = parse_tool_calls(ToolCallFormat::Hermes,
                            "Let me check.\n<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}\n"
                            "</tool_call>\n<tool_call>{\"name\":\"noop\",\"arguments\":\"{}\"}</tool_call>");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->content, "Let me check.");
  ASSERT_EQ(h->calls.size(), 2u);
  EXPECT_EQ(h->calls[0].arguments, json({{"a", 1}, {"b", 2}}));
  EXPECT_EQ(h->calls[1].name, "noop");
  EXPECT_FALSE(parse_tool_calls(ToolCallFormat::Hermes, "plain text"));
  EXPECT_FALSE(parse_tool_calls(ToolCallFormat::Hermes, "<tool_call>{\"name\": 5}</tool_call>"));  // broken
  EXPECT_FALSE(parse_tool_calls(ToolCallFormat::Hermes, "<tool_call>{\"name\": \"x\"}"));           // unclosed
  // Cut by max_tokens in the second call: the first stands, the half call is dropped.
  const auto cut = parse_tool_calls(ToolCallFormat::Hermes,
                                    "<tool_call>\n{\"name\": \"a\", \"arguments\": {\"k\": 1}}\n</tool_call>\n"
                                    "<tool_call>\n{\"name\": \"b\", \"arguments\": {\"ci");
  ASSERT_TRUE(cut);
  ASSERT_EQ(cut->calls.size(), 1u);
  EXPECT_EQ(cut->calls[0].name, "a");
  auto l = parse_tool_calls(ToolCallFormat::Llama3, " {\"name\": \"add\", \"parameters\": {\"a\": 1}} ");
  ASSERT_TRUE(l);
  EXPECT_EQ(l->calls[0].arguments["a"], 1);
  EXPECT_FALSE(parse_tool_calls(ToolCallFormat::Llama3, "{\"name\": \"add\", \"parameters\": [1]}"));
  auto m = parse_tool_calls(ToolCallFormat::Mistral, "[TOOL_CALLS][{\"name\": \"noop\", \"arguments\": {}}]");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->calls[0].name, "noop");
  EXPECT_TRUE(parse_tool_calls(ToolCallFormat::Mistral, "[{\"name\": \"noop\", \"arguments\": {}}]"));
  EXPECT_FALSE(parse_tool_calls(ToolCallFormat::Mistral, "[]"));
}

// Output nested deeper than kMaxToolCallDepth is not a call (its copies would recurse once per level), whether
// the nesting is in the call or in an arguments string.
TEST(ToolCalls, DeepOutputIsNotACall) {
  // Appended: GCC 12's -Wrestrict misfires on "literal" + std::string&&.
  const auto args = [](size_t depth) {
    std::string a = "{\"a\":";
    return a.append(depth, '[').append(depth, ']').append("}");
  };
  const auto hermes = [](const std::string& a) {
    std::string s = "<tool_call>{\"name\":\"f\",\"arguments\":";
    return s.append(a).append("}</tool_call>");
  };
  const auto as_string = [](const std::string& a) { return json(a).dump(); };
  ASSERT_TRUE(parse_tool_calls(ToolCallFormat::Hermes, hermes(args(kMaxToolCallDepth - 2))));
  ASSERT_TRUE(parse_tool_calls(ToolCallFormat::Hermes, hermes(as_string(args(kMaxToolCallDepth - 1)))));
  EXPECT_FALSE(parse_tool_calls(ToolCallFormat::Hermes, hermes(args(kMaxToolCallDepth))));
  EXPECT_FALSE(parse_tool_calls(ToolCallFormat::Hermes, hermes(as_string(args(150000)))));
  std::string llama = "{\"name\":\"f\",\"parameters\":";
  EXPECT_FALSE(parse_tool_calls(ToolCallFormat::Llama3, llama.append(args(150000)).append("}")));
}

TEST(ToolCalls, BadToolSchemasAreNamed) {
  try {
    tool_call_gbnf(ToolCallFormat::Hermes, {{"a", json::object()}, {"b", json::parse(R"({"type":"strng"})")}}, true);
    FAIL() << "accepted";
  } catch (const GrammarError& e) {
    EXPECT_STREQ(e.what(), "[1].type: unknown type 'strng'");
  }
  std::vector<Loosened> loosened;
  tool_call_gbnf(ToolCallFormat::Hermes,
                 {{"a", json::object()}, {"b", json::parse(R"({"properties":{"x":{"not":{}}}})")}}, true, &loosened);
  ASSERT_EQ(loosened.size(), 1u);
  EXPECT_EQ(loosened[0].text("tools"), "tools[1].properties.x: 'not' is not enforced");
}

}  // namespace
}  // namespace preface::grammar
