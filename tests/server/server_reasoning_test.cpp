// Reasoning split for <think> templates end to end (server/api/think_split.h): a Qwen3-templated server returns
// a reply's <think> block as message.reasoning_content (streamed as delta.reasoning_content), Responses reasoning
// items and Anthropic thinking blocks; Anthropic's `thinking` field reaches the template's enable_thinking, which
// defaults to true as llama.cpp sends it. The model cannot choose to think, so a grammar writes the reply.
#include <gtest/gtest.h>

#include <fstream>

#include "server_harness.h"

namespace preface::test {
namespace {

std::unique_ptr<TestServer> qwen3_server() {
  const auto file = shared_file("templates/Qwen__Qwen3-1.7B.json");
  if (file.empty()) return nullptr;
  TestServerConfig cfg;
  cfg.chat_template_jinja = json::parse(std::ifstream(file))["template"].get<std::string>();
  return std::make_unique<TestServer>(cfg);
}

const char* const kThinkingReply = "root ::= \"<think>\\nplan a\\n</think>\\n\\nThe answer.\"\n";

TEST(ServerReasoning, ThinkBlocksAreReasoningContent) {
  auto s = qwen3_server();
  if (!s || !s->ok()) GTEST_FAIL() << "needs ../shared/templates/Qwen__Qwen3-1.7B.json and stories260K";
  auto c = s->client();
  const json body = {{"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {"max_tokens", 60},
                     {"grammar", kThinkingReply}};
  const HttpResult r = post(*c, "/v1/chat/completions", body);
  ASSERT_EQ(r.status, 200) << r.body;
  const json msg = r.body_json()["choices"][0]["message"];
  EXPECT_EQ(msg["reasoning_content"], "\nplan a\n");
  EXPECT_EQ(msg["content"], "The answer.");

  json streamed = body;
  streamed["stream"] = true;
  const HttpResult sr = post(*c, "/v1/chat/completions", streamed);
  ASSERT_EQ(sr.status, 200) << sr.body;
  std::string reasoning, content;
  for (const SseEvent& ev : parse_sse(sr.body)) {
    if (ev.data == "[DONE]") continue;
    const json delta = json::parse(ev.data)["choices"][0]["delta"];
    reasoning += delta.value("reasoning_content", "");
    content += delta.value("content", "");
  }
  EXPECT_EQ(reasoning, "\nplan a\n");
  EXPECT_EQ(content, "The answer.");
}

TEST(ServerReasoning, ResponsesReasoningItemsAndAnthropicThinking) {
  auto s = qwen3_server();
  if (!s || !s->ok()) GTEST_FAIL() << "needs ../shared/templates/Qwen__Qwen3-1.7B.json and stories260K";
  auto c = s->client();
  // Responses: a reasoning item before the message (the grammar reaches the chat path as it would from chat).
  const HttpResult r = post(*c, "/v1/responses",
                            json{{"input", "Hi"}, {"max_output_tokens", 60}, {"grammar", kThinkingReply}});
  ASSERT_EQ(r.status, 200) << r.body;
  const json out = r.body_json()["output"];
  ASSERT_EQ(out.size(), 2u) << out;
  EXPECT_EQ(out[0]["type"], "reasoning");
  EXPECT_EQ(out[0]["content"][0]["text"], "\nplan a\n");
  EXPECT_EQ(out[1]["content"][0]["text"], "The answer.");

  // Anthropic: thinking disabled renders Qwen3's empty think block; enabled (the default) does not.
  const json messages = {{{"role", "user"}, {"content", "Hi"}}};
  auto count = [&](const json& thinking) {
    json b = {{"model", "m"}, {"messages", messages}};
    if (!thinking.is_null()) b["thinking"] = thinking;
    const HttpResult cr = post(*c, "/v1/messages/count_tokens", b);
    EXPECT_EQ(cr.status, 200) << cr.body;
    return cr.body_json().value("input_tokens", -1);
  };
  const int plain = count(nullptr);
  EXPECT_EQ(count(json{{"type", "enabled"}, {"budget_tokens", 1024}}), plain);
  EXPECT_GT(count(json{{"type", "disabled"}}), plain);
  const HttpResult bad = post(*c, "/v1/messages", json{{"model", "m"}, {"max_tokens", 4}, {"messages", messages},
                                                       {"thinking", {{"type", "enabled"}}}});
  EXPECT_EQ(bad.status, 400) << bad.body;
  EXPECT_NE(bad.body.find("budget_tokens"), std::string::npos) << bad.body;
  // /apply-template renders with the same default.
  const HttpResult t = post(*c, "/apply-template", json{{"messages", messages}});
  ASSERT_EQ(t.status, 200) << t.body;
  EXPECT_EQ(t.body_json()["prompt"].get<std::string>().find("<think>"), std::string::npos);
}

}  // namespace
}  // namespace preface::test
