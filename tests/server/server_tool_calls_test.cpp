// Tool calling end to end with the real templates of eleven families in ../shared/templates (Qwen3: Hermes
// <tool_call>, Llama 3.2: JSON with "parameters", Mistral Small 3.1: [TOOL_CALLS], and the 2026 ones: Qwen3.5's
// XML parameters, GLM's arg_key/arg_value, MiniMax's invoke, DeepSeek V3.1's and V3.2's, Kimi K2's, Gemma 4's,
// Mistral Small 3.2's NAME[ARGS]): with a forced choice every
// response, streamed or not, in both APIs, is a call to an allowed tool whose arguments validate against its
// schema (a random-weight model cannot choose to call, so only the constraint makes these pass); with auto the
// output is the same text as with none; the conversation's calls and results render; the agent loop's next turn
// reads the whole previous prompt from the cache; bad tool input is a 400 naming the parameter.
#include <fstream>
#include <map>

#include "server/server_harness.h"
#include "support/json_schema_validator.h"

namespace preface::test {
namespace {

const json kTools = json::parse(R"([
  {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
   "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 12},
     "unit": {"enum": ["celsius", "fahrenheit"]}}, "required": ["city", "unit"], "additionalProperties": false}}},
  {"type": "function", "function": {"name": "add", "description": "Adds two integers",
   "parameters": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
     "required": ["a", "b"], "additionalProperties": false}}}])");

struct Family {
  const char* file;
  const char* name;
};
constexpr Family kFamilies[] = {{"Qwen__Qwen3-1.7B.json", "hermes"},
                                {"meta-llama__Llama-3.2-11B-Vision-Instruct.json", "llama3"},
                                {"mistralai__Mistral-Small-3.1-24B-Instruct-2503.json", "mistral"}};
// The 2026 families, each in its own format (grammar/tool_formats.h), forced with a reasoning block closed first
// where the template opens one.
constexpr Family k2026Families[] = {{"2026/Qwen3.5-4B.json", "qwen3-xml"},
                                    {"2026/GLM-4.6.json", "glm"},
                                    {"2026/MiniMax-M2.json", "minimax-xml"},
                                    {"2026/deepseek-ai-DeepSeek-V3.1.json", "deepseek-v3.1"},
                                    {"2026/deepseek-ai-DeepSeek-V3.2.json", "deepseek-dsml"},
                                    {"2026/moonshotai-Kimi-K2.json", "kimi-k2"},
                                    {"2026/google-gemma-4-31B-it.json", "gemma4"},
                                    {"2026/Mistral-Small-3.2-24B-Instruct-2506.json", "mistral-v11"}};

std::vector<Family> all_families() {
  std::vector<Family> out(std::begin(kFamilies), std::end(kFamilies));
  out.insert(out.end(), std::begin(k2026Families), std::end(k2026Families));
  return out;
}

std::optional<std::string> template_text(const char* file) {
  const auto path = shared_file(std::string("templates/") + file);
  if (path.empty()) return std::nullopt;
  std::ifstream in(path);
  return json::parse(in)["template"].get<std::string>();
}

std::unique_ptr<TestServer> server_for(const char* file) {
  const auto t = template_text(file);
  if (!t) return nullptr;
  TestServerConfig c;
  c.chat_template_jinja = *t;
  return std::make_unique<TestServer>(c);
}

const json* tool_schema(const std::string& name) {
  for (const json& t : kTools) {
    if (t["function"]["name"] == name) return &t["function"]["parameters"];
  }
  return nullptr;
}

// Every call names an allowed tool and its arguments (a JSON object text) validate.
void expect_valid_calls(const std::vector<std::pair<std::string, std::string>>& calls, const std::string& only,
                        const std::string& context) {
  ASSERT_FALSE(calls.empty()) << context;
  for (const auto& [name, args] : calls) {
    const json* schema = tool_schema(name);
    ASSERT_NE(schema, nullptr) << name << " " << context;
    if (!only.empty()) {
      EXPECT_EQ(name, only) << context;
    }
    const json a = json::parse(args, nullptr, false);
    ASSERT_TRUE(a.is_object()) << args << " " << context;
    EXPECT_EQ(JsonSchemaValidator(*schema).validate(a), "") << args << " " << context;
  }
}

json user_turn() { return json::array({{{"role", "user"}, {"content", "What is the weather in Paris?"}}}); }

// One call per reply: with parallel calls allowed, a random-weight model rarely chooses to stop calling, and a
// reply cut by max_tokens ends inside a call (finish_reason "length").
json openai_body(const json& choice, bool stream, int seed) {
  return {{"messages", user_turn()}, {"tools", kTools}, {"tool_choice", choice}, {"stream", stream},
          {"parallel_tool_calls", false}, {"max_tokens", 600}, {"temperature", 1.0}, {"seed", seed}};
}

// "call_" + hex, or 9 letters and digits (Mistral's templates refuse other ids).
bool call_id_ok(const json& id) {
  const std::string s = id.get<std::string>();
  return s.rfind("call_", 0) == 0 ||
         (s.size() == 9 && std::all_of(s.begin(), s.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)); }));
}

// The calls of an OpenAI response; streamed ones put together from delta.tool_calls by index.
std::vector<std::pair<std::string, std::string>> openai_calls(const HttpResult& r, bool stream, std::string* finish) {
  std::vector<std::pair<std::string, std::string>> calls;
  if (!stream) {
    const json b = r.body_json();
    *finish = b["choices"][0]["finish_reason"];
    for (const json& c : b["choices"][0]["message"].value("tool_calls", json::array())) {
      EXPECT_TRUE(call_id_ok(c["id"])) << c;
      calls.emplace_back(c["function"]["name"], c["function"]["arguments"]);
    }
    return calls;
  }
  bool done = false;
  for (const json& ch : openai_chunks(r.body, &done)) {
    if (ch["choices"].empty()) continue;
    const json& choice = ch["choices"][0];
    if (!choice["finish_reason"].is_null()) *finish = choice["finish_reason"];
    for (const json& tc : choice["delta"].value("tool_calls", json::array())) {
      const size_t i = tc["index"];
      if (i == calls.size()) {  // a call starts: id, type and name come first
        EXPECT_TRUE(call_id_ok(tc["id"])) << tc;
        EXPECT_EQ(tc["type"], "function");
        calls.emplace_back(tc["function"]["name"], "");
      }
      EXPECT_LT(i, calls.size()) << tc;
      calls[i].second += tc["function"].value("arguments", "");
    }
  }
  EXPECT_TRUE(done);
  return calls;
}

TEST(ServerToolCalls, ForcedOpenAICallsAreValidInEveryFamily) {
  for (const Family& fam : all_families()) {
    auto s = server_for(fam.file);
    if (!s || !s->ok()) GTEST_SKIP() << "shared test data not found";
    auto c = s->client();
    const json named = {{"type", "function"}, {"function", {{"name", "add"}}}};
    for (const json& choice : {json("required"), named}) {
      for (const bool stream : {false, true}) {
        for (int seed = 1; seed <= 3; ++seed) {
          const HttpResult r = post(*c, "/v1/chat/completions", openai_body(choice, stream, seed));
          const std::string context = std::string(fam.name) + " " + choice.dump() + (stream ? " stream" : "");
          ASSERT_EQ(r.status, 200) << r.body << context;
          std::string finish;
          const auto calls = openai_calls(r, stream, &finish);
          expect_valid_calls(calls, choice.is_object() ? "add" : "", context);
          EXPECT_EQ(finish, "tool_calls") << context;
        }
      }
    }
  }
}

json anthropic_tools() {
  json out = json::array();
  for (const json& t : kTools) {
    out.push_back({{"name", t["function"]["name"]}, {"description", t["function"]["description"]},
                   {"input_schema", t["function"]["parameters"]}});
  }
  return out;
}

// The tool_use blocks of an Anthropic response; streamed ones from content_block_start + input_json_delta.
std::vector<std::pair<std::string, std::string>> anthropic_calls(const HttpResult& r, bool stream, std::string* stop) {
  std::vector<std::pair<std::string, std::string>> calls;
  if (!stream) {
    const json b = r.body_json();
    *stop = b["stop_reason"];
    for (const json& block : b["content"]) {
      if (block["type"] != "tool_use") continue;
      EXPECT_EQ(block["id"].get<std::string>().rfind("toolu_", 0), 0u);
      calls.emplace_back(block["name"], block["input"].dump());
    }
    return calls;
  }
  std::map<int, size_t> call_of_block;
  int open = -1;
  for (const SseEvent& ev : parse_sse(r.body)) {
    const json d = json::parse(ev.data);
    if (ev.event == "content_block_start") {
      EXPECT_EQ(open, -1) << "a block started before the previous one stopped";
      open = d["index"];
      if (d["content_block"]["type"] == "tool_use") {
        EXPECT_EQ(d["content_block"]["input"], json::object());
        call_of_block[open] = calls.size();
        calls.emplace_back(d["content_block"]["name"], "");
      }
    } else if (ev.event == "content_block_delta") {
      EXPECT_EQ(d["index"], open);
      if (d["delta"]["type"] == "input_json_delta") calls.at(call_of_block.at(open)).second += d["delta"]["partial_json"];
    } else if (ev.event == "content_block_stop") {
      EXPECT_EQ(d["index"], open);
      open = -1;
    } else if (ev.event == "message_delta") {
      *stop = d["delta"]["stop_reason"];
    }
  }
  return calls;
}

TEST(ServerToolCalls, ForcedAnthropicCallsAreValidInEveryFamily) {
  for (const Family& fam : all_families()) {
    auto s = server_for(fam.file);
    if (!s || !s->ok()) GTEST_SKIP() << "shared test data not found";
    auto c = s->client();
    for (const json& choice : {json{{"type", "any"}, {"disable_parallel_tool_use", true}},
                               json{{"type", "tool"}, {"name", "get_weather"}, {"disable_parallel_tool_use", true}}}) {
      for (const bool stream : {false, true}) {
        for (int k = 0; k < 3; ++k) {
          const json body = {{"messages", user_turn()}, {"tools", anthropic_tools()}, {"tool_choice", choice},
                             {"stream", stream}, {"max_tokens", 600}, {"temperature", 1.0}};
          const HttpResult r = post(*c, "/v1/messages", body);
          const std::string context = std::string(fam.name) + " " + choice.dump() + (stream ? " stream" : "");
          ASSERT_EQ(r.status, 200) << r.body << context;
          std::string stop;
          const auto calls = anthropic_calls(r, stream, &stop);
          expect_valid_calls(calls, choice["type"] == "tool" ? "get_weather" : "", context);
          EXPECT_EQ(stop, "tool_use") << context;
        }
      }
    }
  }
}

TEST(ServerToolCalls, AnthropicToolLoopRendersAndHitsTheCache) {
  auto s = server_for(kFamilies[0].file);
  if (!s || !s->ok()) GTEST_SKIP() << "shared test data not found";
  auto c = s->client();
  json messages = user_turn();
  int32_t previous_prompt = 0;
  for (int turn = 0; turn < 3; ++turn) {
    const json body = {{"messages", messages}, {"tools", anthropic_tools()}, {"max_tokens", 160},
                       {"tool_choice", {{"type", "any"}, {"disable_parallel_tool_use", true}}}};
    const HttpResult r = post(*c, "/v1/messages", body);
    ASSERT_EQ(r.status, 200) << r.body;
    const json b = r.body_json();
    const json u = b["usage"];
    const int32_t prompt = u["input_tokens"].get<int32_t>() + u["cache_read_input_tokens"].get<int32_t>() +
                           u["cache_creation_input_tokens"].get<int32_t>();
    if (turn > 0) {
      EXPECT_GE(u["cache_read_input_tokens"].get<int32_t>(),
                previous_prompt - static_cast<int32_t>(s->engine().describe().block_size)) << u;
    }
    previous_prompt = prompt;
    ASSERT_EQ(b["content"].back()["type"], "tool_use") << b;
    messages.push_back({{"role", "assistant"}, {"content", b["content"]}});
    messages.push_back({{"role", "user"}, {"content", json::array({{{"type", "tool_result"},
        {"tool_use_id", b["content"].back()["id"]}, {"content", "sunny"}}})}});
  }
  json bad = {{"messages", json::array({{{"role", "user"}, {"content", json::array({{{"type", "tool_result"},
      {"tool_use_id", "toolu_x"}, {"content", "1"}}})}}})}, {"max_tokens", 4}};
  EXPECT_EQ(post(*c, "/v1/messages", bad).status, 400);
  bad = {{"messages", user_turn()}, {"tools", anthropic_tools()}, {"max_tokens", 4},
         {"tool_choice", {{"type", "tool"}, {"name", "nope"}}}};
  const HttpResult r = post(*c, "/v1/messages", bad);
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.body_json()["error"]["message"].get<std::string>().find("nope") != std::string::npos, true) << r.body;
}

TEST(ServerToolCalls, AutoGivesTheTextNoneGives) {
  auto s = server_for(kFamilies[0].file);
  if (!s || !s->ok()) GTEST_SKIP() << "shared test data not found";
  auto c = s->client();
  for (const bool stream : {false, true}) {
    std::string texts[2];
    for (int k = 0; k < 2; ++k) {
      json body = openai_body(k == 0 ? "auto" : "none", stream, 5);
      body["max_tokens"] = 24;
      const HttpResult r = post(*c, "/v1/chat/completions", body);
      ASSERT_EQ(r.status, 200) << r.body;
      if (!stream) {
        const json m = r.body_json()["choices"][0]["message"];
        EXPECT_FALSE(m.contains("tool_calls")) << r.body;
        texts[k] = m["content"];
      } else {
        bool done = false;
        for (const json& ch : openai_chunks(r.body, &done)) {
          if (ch["choices"].empty()) continue;
          EXPECT_FALSE(ch["choices"][0]["delta"].contains("tool_calls"));
          texts[k] += ch["choices"][0]["delta"].value("content", "");
        }
      }
    }
    EXPECT_FALSE(texts[0].empty());
    EXPECT_EQ(texts[0], texts[1]);
  }
}

TEST(ServerToolCalls, AgentLoopRendersCallsAndResultsAndHitsTheCache) {
  for (const Family& fam : all_families()) {
    SCOPED_TRACE(fam.name);
    // The 2026 templates' long system prompts and markers (spelled byte by byte in the test model's vocabulary)
    // fit two turns in its context (Mistral Small 3.2's built-in system prompt leaves room for one).
    if (std::string(fam.name) == "mistral-v11") continue;
    const bool older = std::any_of(std::begin(kFamilies), std::end(kFamilies),
                                   [&](const Family& f) { return std::string(f.name) == fam.name; });
    auto s = server_for(fam.file);
    if (!s || !s->ok()) GTEST_SKIP() << "shared test data not found";
    auto c = s->client();
    json messages = user_turn();
    int32_t previous_prompt = 0;
    for (int turn = 0; turn < (older ? 3 : 2); ++turn) {
      json body = openai_body("required", false, 10 + turn);
      body["messages"] = messages;
      const HttpResult r = post(*c, "/v1/chat/completions", body);
      ASSERT_EQ(r.status, 200) << r.body << fam.name;
      const json b = r.body_json();
      ASSERT_TRUE(b.contains("choices")) << r.body;
      const json usage = b["usage"];
      if (turn > 0) {  // everything the previous turn sent but its last partial block came from the cache
        EXPECT_GE(usage["prompt_tokens_details"]["cached_tokens"].get<int32_t>(),
                  previous_prompt - static_cast<int32_t>(s->engine().describe().block_size))
            << fam.name << " turn " << turn << " " << usage;
      }
      previous_prompt = usage["prompt_tokens"];
      const json msg = b["choices"][0]["message"];
      ASSERT_TRUE(msg.contains("tool_calls") && msg["tool_calls"].is_array()) << fam.name << " " << msg;
      ASSERT_EQ(msg["tool_calls"].size(), 1u) << msg;
      messages.push_back(msg);
      messages.push_back({{"role", "tool"}, {"tool_call_id", msg["tool_calls"][0]["id"]}, {"content", "{\"ok\": 1}"}});
    }
  }
}

// /apply-template renders what chat completions renders: a call's arguments given as JSON text reach the template
// as an object (Qwen3's template writes them with tojson), where they used to be a 400.
TEST(ServerToolCalls, ApplyTemplateTakesArgumentsAsText) {
  auto s = server_for(kFamilies[0].file);
  if (!s || !s->ok()) GTEST_SKIP() << "shared test data not found";
  auto c = s->client();
  json messages = user_turn();
  messages.push_back({{"role", "assistant"}, {"content", nullptr},
                      {"tool_calls", {{{"id", "call_1"}, {"type", "function"},
                                       {"function", {{"name", "get_weather"}, {"arguments", "{\"city\": \"Paris\"}"}}}}}}});
  messages.push_back({{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "sunny"}});
  const HttpResult r = post(*c, "/apply-template", json{{"messages", messages}, {"tools", kTools}});
  ASSERT_EQ(r.status, 200) << r.body;
  const std::string prompt = r.body_json()["prompt"];
  EXPECT_NE(prompt.find("{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}"), std::string::npos)
      << prompt;
}

TEST(ServerToolCalls, BadToolInputIsA400NamingTheParameter) {
  auto s = server_for(kFamilies[0].file);
  if (!s || !s->ok()) GTEST_SKIP() << "shared test data not found";
  auto c = s->client();
  auto param_of = [&](const json& body, const char* path = "/v1/chat/completions") {
    const HttpResult r = post(*c, path, body);
    EXPECT_EQ(r.status, 400) << r.body;
    return r.body_json()["error"]["param"].get<std::string>();
  };
  json b = openai_body({{"type", "function"}, {"function", {{"name", "nope"}}}}, false, 1);
  EXPECT_EQ(param_of(b), "tool_choice");
  b = openai_body("required", false, 1);
  b["tools"][1]["function"]["parameters"]["properties"]["a"] = {{"type", "strng"}};
  EXPECT_EQ(param_of(b), "tools[1].function.parameters.properties.a.type");
  b["tool_choice"] = "auto";  // only rendered, never compiled
  EXPECT_EQ(post(*c, "/v1/chat/completions", b).status, 200);
  b["tools"][1]["function"]["parameters"]["properties"]["a"] = {{"type", "integer"}, {"multipleOf", 3}};
  b["tool_choice"] = "required";  // compiled: what the grammar cannot enforce is a warning, not a 400
  const HttpResult loose = post(*c, "/v1/chat/completions", b);
  ASSERT_EQ(loose.status, 200) << loose.body;
  EXPECT_EQ(loose.body_json()["warnings"],
            json::array({"tools[1].function.parameters.properties.a: 'multipleOf' is not enforced"}));
  b = openai_body("auto", false, 1);
  b["messages"].push_back({{"role", "tool"}, {"tool_call_id", "call_x"}, {"content", "1"}});
  EXPECT_EQ(param_of(b), "messages[1].tool_call_id");
  b = openai_body("required", false, 1);
  b["response_format"] = {{"type", "json_object"}};
  EXPECT_EQ(param_of(b), "tool_choice");
  b = {{"prompt", "x"}, {"tools", kTools}};
  EXPECT_EQ(param_of(b, "/v1/completions"), "tools");
  EXPECT_EQ(post(*c, "/v1/chat/completions", openai_body("required", false, 1)).status, 200);  // still serving
}

}  // namespace
}  // namespace preface::test
