// Jinja chat templates end to end: POST /apply-template (messages, tools, add_generation_prompt,
// chat_template_kwargs; 400 with the template's raise_exception message), /v1/chat/completions rendering through
// the template with chat_template_kwargs, and a template that does not parse refused when the model attaches.
#include <fstream>

#include "server/server_harness.h"
#include "support/shared_data.h"

namespace preface::test {
namespace {

// A small template using what real ones use: a namespace, loop variables, tools via tojson, a kwarg, a raise.
constexpr const char* kTemplate = R"({%- if tools %}<tools>{{ tools | tojson }}</tools>
{% endif %}
{%- for m in messages %}
{%- if m.role == 'system' and not loop.first %}{{ raise_exception('System message must be first') }}{% endif %}
{%- if m.role == 'tool' %}<|tool|>{{ m.content }}<|end|>
{% elif m.tool_calls %}<|assistant|>{% for c in m.tool_calls %}<call>{{ c.function.name }}</call>{% endfor %}<|end|>
{% else %}<|{{ m.role }}|>{{ m.content | trim }}<|end|>
{% endif %}
{%- endfor %}
{%- if add_generation_prompt %}<|assistant|>{% if enable_thinking is defined and not enable_thinking %}<think></think>{% endif %}{% endif %})";

TestServerConfig jinja_config() {
  TestServerConfig c;
  c.chat_template_jinja = kTemplate;
  return c;
}

TEST(ServerJinja, ApplyTemplateRendersMessagesToolsAndKwargs) {
  TestServer s(jinja_config());
  ASSERT_TRUE(s.ok());
  auto c = s.client();
  HttpResult r = post(*c, "/apply-template", R"({"messages": [{"role": "user", "content": "  hi  "}]})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body_json()["prompt"], "<|user|>hi<|end|>\n<|assistant|>");
  r = post(*c, "/apply-template",
           R"({"messages": [{"role": "user", "content": "hi"}], "add_generation_prompt": false,
               "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]})");
  ASSERT_EQ(r.status, 200) << r.body;
  // the tool schema keeps the client's key order ("type" before "function")
  EXPECT_EQ(r.body_json()["prompt"],
            "<tools>[{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": {\"type\": \"object\"}}}]"
            "</tools>\n<|user|>hi<|end|>\n");
  r = post(*c, "/apply-template",
           R"({"messages": [{"role": "user", "content": "q"},
               {"role": "assistant", "content": null, "tool_calls": [{"id": "1", "type": "function",
                 "function": {"name": "get", "arguments": "{}"}}]},
               {"role": "tool", "tool_call_id": "1", "content": "42"}],
               "chat_template_kwargs": {"enable_thinking": false}})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body_json()["prompt"],
            "<|user|>q<|end|>\n<|assistant|><call>get</call><|end|>\n<|tool|>42<|end|>\n<|assistant|><think></think>");
}

TEST(ServerJinja, TemplateErrorsAre400WithTheTemplatesMessage) {
  TestServer s(jinja_config());
  ASSERT_TRUE(s.ok());
  auto c = s.client();
  const char* bad = R"({"messages": [{"role": "user", "content": "a"}, {"role": "system", "content": "b"}]})";
  HttpResult r = post(*c, "/apply-template", bad);
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.body_json()["error"]["message"], "System message must be first") << r.body;
  r = post(*c, "/v1/chat/completions", R"({"max_tokens": 2, "messages": [{"role": "user", "content": "a"},
                                            {"role": "system", "content": "b"}]})");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.body_json()["error"]["message"], "System message must be first") << r.body;
  EXPECT_EQ(post(*c, "/apply-template", R"({"messages": []})").status, 400);
  EXPECT_EQ(post(*c, "/apply-template", R"({"messages": [{"role": "user", "content": "a"}],
                                           "chat_template_kwargs": 3})").status, 400);
  // the server keeps serving
  EXPECT_EQ(post(*c, "/apply-template", R"({"messages": [{"role": "user", "content": "a"}]})").status, 200);
}

TEST(ServerJinja, ChatCompletionsRenderThroughTheTemplate) {
  TestServer s(jinja_config());
  ASSERT_TRUE(s.ok());
  auto c = s.client();
  const HttpResult models = get(*c, "/v1/models");
  EXPECT_EQ(models.body_json()["data"][0]["meta"]["chat_template"], "jinja");
  const char* chat = R"({"max_tokens": 1, "temperature": 0, "messages": [{"role": "user", "content": "hi"}],
                         "chat_template_kwargs": {"enable_thinking": false}})";
  const HttpResult r = post(*c, "/v1/chat/completions", chat);
  ASSERT_EQ(r.status, 200) << r.body;
  // The prompt is the template's text: count its tokens the way the server does.
  const std::string prompt = "<|user|>hi<|end|>\n<|assistant|><think></think>";
  const auto ids = s.tokenizer().encode(prompt, s.tokenizer().add_bos_default(), true);
  EXPECT_EQ(r.body_json()["usage"]["prompt_tokens"], ids.size());
  EXPECT_EQ(post(*c, "/v1/chat/completions", R"({"max_tokens": 1, "messages": [{"role": "user", "content": "x"}],
                                                "chat_template_kwargs": []})").status, 400);
}

// gpt-oss's harmony template: reasoning_effort reaches it (the system message's "Reasoning: ..."), in chat
// completions and /apply-template; a harmony template over a vocabulary without harmony's control tokens (here
// stories260K's) generates plain content, with no reasoning split.
TEST(ServerJinja, ReasoningEffortReachesTheHarmonyTemplate) {
  const auto path = shared_file("templates/2026/openai-gpt-oss-120b.json");
  ASSERT_FALSE(path.empty()) << "needs ../shared/templates/2026/openai-gpt-oss-120b.json";
  std::ifstream in(path);
  const nlohmann::json spec = nlohmann::json::parse(in);
  TestServerConfig cfg;
  cfg.chat_template_jinja = spec["template"].get<std::string>();
  TestServer s(cfg);
  ASSERT_TRUE(s.ok());
  auto c = s.client();
  HttpResult r = post(*c, "/apply-template", R"({"messages": [{"role": "user", "content": "hi"}]})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_NE(r.body_json()["prompt"].get<std::string>().find("Reasoning: medium"), std::string::npos) << r.body;
  r = post(*c, "/apply-template", R"({"messages": [{"role": "user", "content": "hi"}], "reasoning_effort": "high"})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_NE(r.body_json()["prompt"].get<std::string>().find("Reasoning: high"), std::string::npos) << r.body;
  r = post(*c, "/apply-template", R"({"messages": [{"role": "user", "content": "hi"}], "reasoning_effort": "high",
                                      "chat_template_kwargs": {"reasoning_effort": "low"}})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_NE(r.body_json()["prompt"].get<std::string>().find("Reasoning: low"), std::string::npos) << r.body;
  EXPECT_EQ(post(*c, "/apply-template", R"({"messages": [{"role": "user", "content": "hi"}],
                                           "reasoning_effort": "extreme"})").status, 400);
  const char* chat = R"({"max_tokens": 3, "temperature": 0, "reasoning_effort": "high",
                         "messages": [{"role": "user", "content": "hi"}]})";
  const HttpResult low = post(*c, "/v1/chat/completions", chat);
  ASSERT_EQ(low.status, 200) << low.body;
  const nlohmann::json body = low.body_json();
  const nlohmann::json& message = body["choices"][0]["message"];
  EXPECT_TRUE(message["content"].is_string()) << low.body;
  EXPECT_FALSE(message.contains("reasoning_content")) << low.body;
  // Tools render into harmony's functions namespace, and an auto tool_choice generates (calls come back from the
  // reply's channels, which this vocabulary cannot produce).
  const char* tools = R"({"max_tokens": 2, "messages": [{"role": "user", "content": "weather?"}],
                          "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather.",
                            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]})";
  r = post(*c, "/apply-template", tools);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_NE(r.body_json()["prompt"].get<std::string>().find("namespace functions"), std::string::npos) << r.body;
  EXPECT_EQ(post(*c, "/v1/chat/completions", tools).status, 200);
  EXPECT_EQ(post(*c, "/v1/chat/completions", R"({"max_tokens": 1, "reasoning_effort": 3,
                                                "messages": [{"role": "user", "content": "hi"}]})").status, 400);
}

TEST(ServerJinja, BadTemplatesAreRefusedAtAttach) {
  for (const char* bad : {"{% if messages %}unclosed", "{{ raise_exception('never') }}", "{% include 'x' %}"}) {
    SCOPED_TRACE(bad);
    TestServerConfig c;
    c.chat_template_jinja = bad;
    try {
      TestServer s(c);
      ADD_FAILURE() << "attached";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("chat template"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace preface::test
