// The hosted APIs' cache controls as their clients send them: Anthropic's cache_control ttl "5m"/"1h" with the
// usage split cache_creation.ephemeral_5m_input_tokens / ephemeral_1h_input_tokens; OpenAI's
// prompt_cache_retention ("in_memory" | "24h"; anything else is a 400 naming it), prompt_cache_key,
// prompt_cache_options {mode, ttl} and content blocks' prompt_cache_breakpoint are accepted.
#include <gtest/gtest.h>

#include "server_harness.h"

namespace preface::test {
namespace {

const std::string kSystem =
    "You are a storyteller. Once upon a time there was a little girl named Lily who loved to play outside in the "
    "park with her friends. One day she saw a big red ball under a tree and she wanted to play with it.";

json message(const std::string& user, const json& cache_control) {
  json system = {{"type", "text"}, {"text", kSystem}};
  if (!cache_control.is_null()) system["cache_control"] = cache_control;
  return {{"model", "m"},
          {"max_tokens", 2},
          {"system", json::array({system})},
          {"messages", {{{"role", "user"}, {"content", user}}}}};
}

TEST(HostedCacheControl, AnthropicUsageSplitsCacheCreationByTtl) {
  TestServer server;
  if (!server.ok()) GTEST_SKIP() << "stories260K.gguf not found";
  auto c = server.client();
  struct Case {
    json cache_control;
    bool one_hour;
    const char* salt;
  };
  for (const Case& k : {Case{{{"type", "ephemeral"}, {"ttl", "1h"}}, true, "a"},
                        Case{{{"type", "ephemeral"}, {"ttl", "5m"}}, false, "b"},
                        Case{json(), false, "c"}}) {
    json body = message("Tell me more.", k.cache_control);
    body["cache_salt"] = k.salt;  // a cold cache for each case
    const HttpResult r = post(*c, "/v1/messages", body);
    ASSERT_EQ(r.status, 200) << r.body;
    const json u = r.body_json()["usage"];
    const int created = u["cache_creation_input_tokens"].get<int>();
    const int h1 = u["cache_creation"]["ephemeral_1h_input_tokens"].get<int>();
    const int m5 = u["cache_creation"]["ephemeral_5m_input_tokens"].get<int>();
    SCOPED_TRACE(k.cache_control.dump());
    ASSERT_GT(created, 0);
    EXPECT_EQ(h1 + m5, created);
    if (k.one_hour) {
      EXPECT_GT(h1, 0);
    } else {
      EXPECT_EQ(h1, 0);
    }
  }
  // Streams: message_start (sent with the first token) carries the prompt's split, as message_delta does.
  json body = message("And then?", {{"type", "ephemeral"}, {"ttl", "1h"}});
  body["stream"] = true;
  body["cache_salt"] = "d";
  for (int round = 0; round < 2; ++round) {  // the second round reads the first's prompt from the cache
    const HttpResult s = post(*c, "/v1/messages", body);
    ASSERT_EQ(s.status, 200);
    json start, delta;
    for (const SseEvent& e : parse_sse(s.body)) {
      const json d = json::parse(e.data, nullptr, false);
      if (e.event == "message_start") start = d["message"]["usage"];
      if (e.event == "message_delta") delta = d["usage"];
    }
    ASSERT_TRUE(start.is_object() && delta.is_object()) << s.body;
    EXPECT_EQ(start["cache_read_input_tokens"], delta["cache_read_input_tokens"]) << start << delta;
    EXPECT_LE(start["cache_creation_input_tokens"].get<int>(), delta["cache_creation_input_tokens"].get<int>());
    EXPECT_EQ(start["input_tokens"].get<int>() + start["cache_read_input_tokens"].get<int>() +
                  start["cache_creation_input_tokens"].get<int>(),
              delta["input_tokens"].get<int>() + delta["cache_read_input_tokens"].get<int>() +
                  delta["cache_creation_input_tokens"].get<int>());
    if (round == 0) {
      EXPECT_GT(start["cache_creation"]["ephemeral_1h_input_tokens"].get<int>(), 0) << start;
    } else {
      EXPECT_GT(start["cache_read_input_tokens"].get<int>(), 0) << start;
    }
  }
}

TEST(HostedCacheControl, OpenAIPromptCacheFieldsAreAccepted) {
  TestServer server;
  if (!server.ok()) GTEST_SKIP() << "stories260K.gguf not found";
  auto c = server.client();
  const json messages = {{{"role", "system"},
                          {"content", {{{"type", "text"}, {"text", kSystem},
                                        {"prompt_cache_breakpoint", {{"mode", "explicit"}, {"ttl", "30m"}}}}}}},
                         {{"role", "user"}, {"content", "Hi"}}};
  for (const json& extra : {json{{"prompt_cache_retention", "24h"}, {"prompt_cache_key", "user-42"}},
                            json{{"prompt_cache_retention", "in_memory"}},
                            json{{"prompt_cache_retention", nullptr}},
                            json{{"prompt_cache_options", {{"mode", "implicit"}, {"ttl", "30m"}}}}}) {
    json body = {{"max_tokens", 2}, {"messages", messages}};
    body.update(extra);
    const HttpResult r = post(*c, "/v1/chat/completions", body);
    EXPECT_EQ(r.status, 200) << extra.dump() << ": " << r.body;
  }
  json completion = {{"prompt", kSystem}, {"max_tokens", 2}, {"prompt_cache_retention", "24h"}};
  EXPECT_EQ(post(*c, "/v1/completions", completion).status, 200);
  const HttpResult bad =
      post(*c, "/v1/chat/completions", json{{"max_tokens", 2}, {"messages", messages}, {"prompt_cache_retention", "7d"}});
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(bad.body.find("prompt_cache_retention"), std::string::npos) << bad.body;
}

}  // namespace
}  // namespace preface::test
