// Every row of grammar/tool_formats.h: random walks of its forced-call grammar end in calls that parse back
// (parse_tool_calls) to allowed tools with arguments valid under their schemas; replies written the way each
// family's template renders calls parse to the expected calls; a reply cut anywhere gives only complete calls,
// those of the whole reply; nesting is bounded.
#include <gtest/gtest.h>

#include <random>

#include <nlohmann/json.hpp>

#include "grammar/grammar.h"
#include "grammar/matcher.h"
#include "grammar/tool_calls.h"
#include "support/json_schema_validator.h"
#include "support/tool_call_walk.h"

namespace preface::grammar {
namespace {

using nlohmann::json;

const std::vector<ToolSpec> kTools = {
    {"get_weather", json::parse(R"({"type":"object","properties":{"city":{"type":"string","maxLength":8},
        "unit":{"enum":["c","f"]}},"required":["city","unit"],"additionalProperties":false})")},
    {"add", json::parse(R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}},
        "required":["a","b"]})")},
    {"opt", json::parse(R"({"type":"object","properties":{"flag":{"type":"boolean"},"n":{"type":"number"},
        "note":{"type":"string"}}})")},
    {"tagged", json::parse(R"({"type":"object","properties":{"tags":{"type":"array","items":{"type":"string",
        "maxLength":4},"maxItems":2}},"required":["tags"]})")},
    {"noop", json::parse(R"({"type":"object","properties":{},"additionalProperties":false})")},
};

const ToolFormat& row(std::string_view id) {
  const ToolFormat* f = find_tool_format(id);
  EXPECT_NE(f, nullptr) << id;
  return f != nullptr ? *f : tool_formats()[0];
}

using test::marker_vocab;
using test::walk;

const ToolSpec& spec(const std::string& name) {
  for (const ToolSpec& t : kTools) {
    if (t.name == name) return t;
  }
  ADD_FAILURE() << "no tool " << name;
  return kTools[0];
}

class CallEveryRow : public ::testing::TestWithParam<std::string> {};

TEST_P(CallEveryRow, ForcedCallsParseBackValid) {
  const ToolFormat& f = row(GetParam());
  for (const bool parallel : {true, false}) {
    std::vector<Loosened> loosened;
    auto c = std::make_shared<Constraint>(parse_gbnf(tool_call_gbnf(f, kTools, parallel, &loosened)), marker_vocab());
    std::mt19937_64 rng(7);
    int n_parsed = 0, n_multi = 0;
    for (int w = 0; w < 24; ++w) {
      const std::string text = walk(c, rng);
      if (text.empty()) continue;
      const auto parsed = parse_tool_calls(f, text, kTools);
      ASSERT_TRUE(parsed.has_value()) << f.id << ": " << text;
      ASSERT_FALSE(parsed->calls.empty());
      EXPECT_EQ(parsed->content, "");
      if (!parallel || !f.parallel) {
        EXPECT_EQ(parsed->calls.size(), 1u) << text;
      }
      n_multi += parsed->calls.size() > 1 ? 1 : 0;
      for (const ParsedToolCall& call : parsed->calls) {
        if (f.syntax == ToolSyntax::GemmaObject && call.name == "tagged") continue;  // loosened: not JSON
        EXPECT_EQ(test::JsonSchemaValidator(spec(call.name).parameters).validate(call.arguments), "")
            << f.id << ": " << text;
      }
      ++n_parsed;
    }
    EXPECT_GT(n_parsed, 8) << f.id;
    if (parallel && f.parallel) {
      EXPECT_GT(n_multi, 0) << f.id;
    }
    for (const Loosened& l : loosened) {
      // Only what a raw string or Gemma's syntax cannot say is loosened, and it is named.
      EXPECT_EQ(l.path.rfind("[", 0), 0u) << l.path;
    }
  }
}

std::vector<std::string> row_ids() {
  std::vector<std::string> ids;
  for (const ToolFormat& f : tool_formats()) ids.emplace_back(f.id);
  return ids;
}

INSTANTIATE_TEST_SUITE_P(ToolCalls, CallEveryRow, ::testing::ValuesIn(row_ids()),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& ch : n) ch = std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
                           return n;
                         });

// A reply cut after any byte gives no call, or the complete calls the whole reply has before the cut.
TEST_P(CallEveryRow, CutRepliesGiveOnlyCompleteCalls) {
  const ToolFormat& f = row(GetParam());
  auto c = std::make_shared<Constraint>(parse_gbnf(tool_call_gbnf(f, kTools, true)), marker_vocab());
  std::mt19937_64 rng(5);
  int n_checked = 0;
  for (int w = 0; w < 30 && n_checked < 4; ++w) {
    const std::string text = walk(c, rng);
    const auto whole = text.empty() ? std::nullopt : parse_tool_calls(f, text, kTools);
    if (!whole || whole->calls.size() < 2) continue;
    ++n_checked;
    for (size_t cut = 0; cut < text.size(); ++cut) {
      const auto part = parse_tool_calls(f, std::string_view(text).substr(0, cut), kTools);
      if (!part) continue;
      ASSERT_LE(part->calls.size(), whole->calls.size());
      for (size_t i = 0; i < part->calls.size(); ++i) {
        EXPECT_EQ(part->calls[i].name, whole->calls[i].name) << cut << ": " << text;
        EXPECT_EQ(part->calls[i].arguments, whole->calls[i].arguments) << cut << ": " << text;
      }
    }
  }
  if (f.parallel) {
    EXPECT_GT(n_checked, 0) << f.id;
  }
}

struct Example {
  const char* row;
  std::string text;
  std::string content;
  json calls;  // [[name, arguments], ...]
};

TEST(ToolCalls, RepliesInEachFamilysShapeParse) {
  const std::string dsml_bar = "\xef\xbd\x9c";
  const std::string ds_begin = "<\xef\xbd\x9ctool\xe2\x96\x81" "calls\xe2\x96\x81" "begin\xef\xbd\x9c>";
  const std::string ds_end = "<\xef\xbd\x9ctool\xe2\x96\x81" "calls\xe2\x96\x81" "end\xef\xbd\x9c>";
  const std::string ds_call = "<\xef\xbd\x9ctool\xe2\x96\x81" "call\xe2\x96\x81" "begin\xef\xbd\x9c>";
  const std::string ds_call_end = "<\xef\xbd\x9ctool\xe2\x96\x81" "call\xe2\x96\x81" "end\xef\xbd\x9c>";
  const std::string ds_sep = "<\xef\xbd\x9ctool\xe2\x96\x81sep\xef\xbd\x9c>";
  const std::vector<Example> examples = {
      {"hermes",
       "Sure.\n<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}\n</tool_call>\n<tool_call>\n"
       "{\"arguments\": {}, \"name\": \"noop\"}\n</tool_call>",
       "Sure.", json::parse(R"([["add", {"a": 1, "b": 2}], ["noop", {}]])")},
      {"qwen3-xml",
       "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis, France\n</parameter>\n<parameter=unit>\nc\n"
       "</parameter>\n</function>\n</tool_call>\n<tool_call>\n<function=add>\n<parameter=a>\n1\n</parameter>\n"
       "<parameter=b>\n-2\n</parameter>\n</function>\n</tool_call>",
       "", json::parse(R"([["get_weather", {"city": "Paris, France", "unit": "c"}], ["add", {"a": 1, "b": -2}]])")},
      {"qwen3-xml", "<tool_call>\n<function=opt>\n<parameter=note>\n12\n</parameter>\n</function>\n</tool_call>", "",
       json::parse(R"([["opt", {"note": "12"}]])")},  // a string property stays a string
      {"glm",
       "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n<arg_key>unit</arg_key>\n"
       "<arg_value>f</arg_value>\n</tool_call><tool_call>noop\n</tool_call>",
       "", json::parse(R"([["get_weather", {"city": "Paris", "unit": "f"}], ["noop", {}]])")},
      {"minimax-xml",
       "Checking.\n<minimax:tool_call>\n<invoke name=\"add\">\n<parameter name=\"a\">3</parameter>\n<parameter "
       "name=\"b\">4</parameter>\n</invoke>\n</minimax:tool_call>",
       "Checking.", json::parse(R"([["add", {"a": 3, "b": 4}]])")},
      {"deepseek-dsml",
       "<" + dsml_bar + "DSML" + dsml_bar + "function_calls>\n<" + dsml_bar + "DSML" + dsml_bar +
           "invoke name=\"tagged\">\n<" + dsml_bar + "DSML" + dsml_bar + "parameter name=\"tags\" string=\"false\">[\"x\"]</" +
           dsml_bar + "DSML" + dsml_bar + "parameter>\n</" + dsml_bar + "DSML" + dsml_bar + "invoke>\n</" + dsml_bar +
           "DSML" + dsml_bar + "function_calls>",
       "", json::parse(R"([["tagged", {"tags": ["x"]}]])")},
      {"deepseek-v3.1",
       ds_begin + ds_call + "add" + ds_sep + "{\"a\": 1, \"b\": 2}" + ds_call_end + ds_call + "noop" + ds_sep + "{}" +
           ds_call_end + ds_end,
       "", json::parse(R"([["add", {"a": 1, "b": 2}], ["noop", {}]])")},
      {"deepseek-r1",
       ds_begin + ds_call + "function" + ds_sep + "add\n```json\n{\"a\": 5, \"b\": 6}\n```" + ds_call_end + ds_end, "",
       json::parse(R"([["add", {"a": 5, "b": 6}]])")},
      {"kimi-k2",
       "<|tool_calls_section_begin|><|tool_call_begin|>functions.add:0<|tool_call_argument_begin|>{\"a\": 1, \"b\": "
       "1}<|tool_call_end|><|tool_call_begin|>functions.noop:1<|tool_call_argument_begin|>{}<|tool_call_end|>"
       "<|tool_calls_section_end|>",
       "", json::parse(R"([["add", {"a": 1, "b": 1}], ["noop", {}]])")},
      {"mistral-v11", "[TOOL_CALLS]add[CALL_ID]abc123xyz[ARGS]{\"a\": 1, \"b\": 2}[TOOL_CALLS]noop[ARGS]{}", "",
       json::parse(R"([["add", {"a": 1, "b": 2}], ["noop", {}]])")},
      {"gemma4",
       "<|tool_call>call:get_weather{city:<|\"|>Paris, France<|\"|>,unit:<|\"|>c<|\"|>}<tool_call|><|tool_call>call:"
       "tagged{tags:[<|\"|>a<|\"|>,<|\"|>b<|\"|>],nested:{k:1,ok:true}}<tool_call|>",
       "", json::parse(R"([["get_weather", {"city": "Paris, France", "unit": "c"}],
                          ["tagged", {"tags": ["a", "b"], "nested": {"k": 1, "ok": true}}]])")},
      {"lfm2-pythonic",
       "<|tool_call_start|>[get_weather(city='Paris', unit=\"c\"), opt(flag=True, n=-1.5, note=None), noop()]"
       "<|tool_call_end|>",
       "", json::parse(R"([["get_weather", {"city": "Paris", "unit": "c"}],
                          ["opt", {"flag": true, "n": -1.5, "note": null}], ["noop", {}]])")},
      {"llama3-json", " {\"name\": \"add\", \"parameters\": {\"a\": 1, \"b\": 2}} ", "",
       json::parse(R"([["add", {"a": 1, "b": 2}]])")},
      {"mistral-v3", "[TOOL_CALLS] [{\"name\": \"noop\", \"arguments\": {}, \"id\": \"call1a2b3\"}]", "",
       json::parse(R"([["noop", {}]])")},
      {"hermes",
       "<tool_call>\n[{\"id\": \"x\", \"type\": \"function\", \"function\": {\"name\": \"add\", \"arguments\": "
       "{\"a\": 1, \"b\": 2}}}]\n</tool_call>",
       "", json::parse(R"([["add", {"a": 1, "b": 2}]])")},  // Falcon 3's array in one call
  };
  for (const Example& e : examples) {
    const auto parsed = parse_tool_calls(row(e.row), e.text, kTools);
    ASSERT_TRUE(parsed.has_value()) << e.row << ": " << e.text;
    EXPECT_EQ(parsed->content, e.content) << e.row;
    json got = json::array();
    for (const ParsedToolCall& c : parsed->calls) got.push_back({c.name, c.arguments});
    EXPECT_EQ(got, e.calls) << e.row << ": " << e.text;
  }
}

TEST(ToolCalls, OutputThatIsNotACallIsText) {
  EXPECT_FALSE(parse_tool_calls(row("hermes"), "plain text"));
  EXPECT_FALSE(parse_tool_calls(row("hermes"), "<tool_call>{\"name\": 5}</tool_call>"));  // broken
  EXPECT_FALSE(parse_tool_calls(row("hermes"), "<tool_call>{\"name\": \"x\"}"));           // unclosed
  EXPECT_FALSE(parse_tool_calls(row("hermes"), "<tool_call>\n{\"name\": \"x\", \"arguments\": {}}\n</tool_call> and more"));
  EXPECT_FALSE(parse_tool_calls(row("llama3-json"), "{\"name\": \"add\", \"parameters\": [1]}"));
  EXPECT_FALSE(parse_tool_calls(row("mistral-v3"), "[TOOL_CALLS][]"));
  EXPECT_FALSE(parse_tool_calls(row("qwen3-xml"), "<tool_call>\n{\"name\": \"add\", \"arguments\": {}}\n</tool_call>"));
  EXPECT_FALSE(parse_tool_calls(row("gemma4"), "<|tool_call>call:add{a:b}<tool_call|>"));  // a bare word
  EXPECT_FALSE(parse_tool_calls(row("lfm2-pythonic"), "<|tool_call_start|>[add(1, 2)]<|tool_call_end|>"));
  // A cut reply keeps the complete calls before the cut.
  const auto cut = parse_tool_calls(row("hermes"),
                                    "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1}}\n</tool_call>\n"
                                    "<tool_call>\n{\"name\": \"add\", \"argu");
  ASSERT_TRUE(cut);
  ASSERT_EQ(cut->calls.size(), 1u);
  EXPECT_EQ(cut->calls[0].arguments, json::parse(R"({"a": 1})"));
}

TEST(ToolCalls, NestingIsBounded) {
  const auto args = [](size_t depth) { return std::string(depth, '[') + std::string(depth, ']'); };
  const auto hermes = [](const std::string& a) {
    return "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": " + a + "}}\n</tool_call>";
  };
  const auto hermes_text = [](const std::string& a) {  // the arguments as a string holding their JSON
    return "<tool_call>\n{\"name\": \"f\", \"arguments\": " + json("{\"a\": " + a + "}").dump() + "}\n</tool_call>";
  };
  ASSERT_TRUE(parse_tool_calls(row("hermes"), hermes(args(kMaxToolCallDepth - 2))));
  EXPECT_FALSE(parse_tool_calls(row("hermes"), hermes(args(kMaxToolCallDepth))));
  ASSERT_TRUE(parse_tool_calls(row("hermes"), hermes_text(args(kMaxToolCallDepth - 2))));
  EXPECT_FALSE(parse_tool_calls(row("hermes"), hermes_text(args(150000))));
  std::string llama = "{\"name\": \"f\", \"parameters\": {\"a\": ";
  EXPECT_FALSE(parse_tool_calls(row("llama3-json"), llama.append(args(150000)).append("}")));
  std::string gemma = "<|tool_call>call:f{a:" + args(150000) + "}<tool_call|>";
  EXPECT_FALSE(parse_tool_calls(row("gemma4"), gemma));
  std::string py = "<|tool_call_start|>[f(a=" + args(150000) + ")]<|tool_call_end|>";
  EXPECT_FALSE(parse_tool_calls(row("lfm2-pythonic"), py));
}

TEST(ToolCalls, BadSchemasNameTheToolAndPath) {
  for (const ToolFormat& f : tool_formats()) {
    try {
      tool_call_gbnf(f, {{"a", json::object()}, {"b", json::parse(R"({"properties":{"x":{"type":"strng"}}})")}}, true);
      ADD_FAILURE() << f.id << ": no error";
    } catch (const GrammarError& e) {
      EXPECT_EQ(e.where, "[1].properties.x.type") << f.id;
    }
  }
}

TEST(ToolCalls, RawStringConstraintsAreReportedLoosened) {
  std::vector<Loosened> loosened;
  tool_call_gbnf(row("qwen3-xml"),
                 {{"f", json::parse(R"({"properties":{"d":{"type":"string","format":"date-time"}}})")}}, true,
                 &loosened);
  ASSERT_EQ(loosened.size(), 1u);
  EXPECT_EQ(loosened[0].path, "[0].properties.d.format");
  loosened.clear();
  tool_call_gbnf(row("hermes"), {{"f", json::parse(R"({"properties":{"d":{"type":"string","format":"date-time"}}})")}},
                 true, &loosened);
  EXPECT_TRUE(loosened.empty());  // JSON rows enforce it
}

}  // namespace
}  // namespace preface::grammar
