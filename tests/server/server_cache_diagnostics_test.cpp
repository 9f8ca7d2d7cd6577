// The hosted APIs' cache diagnostics over HTTP: Anthropic's diagnostics.previous_message_id and OpenAI's
// prompt_cache_options.comparison_response_id against a real server.
#include "server_harness.h"

namespace preface::test {
namespace {

json anthropic_turn(const std::string& system, const json& messages, const json& previous) {
  return {{"max_tokens", 2}, {"system", system}, {"messages", messages},
          {"diagnostics", {{"previous_message_id", previous}}}};
}

TEST(ServerCacheDiagnostics, AnthropicNamesWhatChanged) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  auto c = s.client();
  const json first = {{{"role", "user"}, {"content", "Tell me a story about a cat."}}};
  HttpResult r = post(*c, "/v1/messages", anthropic_turn("You are a storyteller.", first, nullptr));
  ASSERT_EQ(r.status, 200) << r.body;
  json body = r.body_json();
  ASSERT_TRUE(body.contains("diagnostics"));
  EXPECT_TRUE(body["diagnostics"]["cache_miss_reason"].is_null());
  const std::string id1 = body["id"];

  json second = first;
  second.push_back({{"role", "assistant"}, {"content", "Once upon a time"}});
  second.push_back({{"role", "user"}, {"content", "Go on."}});
  r = post(*c, "/v1/messages", anthropic_turn("You are a storyteller.", second, id1));
  body = r.body_json();
  EXPECT_TRUE(body["diagnostics"]["cache_miss_reason"].is_null()) << r.body;
  const std::string id2 = body["id"];

  r = post(*c, "/v1/messages", anthropic_turn("You are a poet.", second, id2));
  body = r.body_json();
  const json reason = body["diagnostics"]["cache_miss_reason"];
  EXPECT_EQ(reason["type"], "system_changed") << r.body;
  EXPECT_GT(reason["cache_missed_input_tokens"].get<int>(), 0);
  EXPECT_LE(reason["cache_missed_input_tokens"].get<int>(), body["usage"]["input_tokens"].get<int>() +
                                                                 body["usage"]["cache_read_input_tokens"].get<int>() +
                                                                 body["usage"]["cache_creation_input_tokens"].get<int>());
  EXPECT_FALSE(reason.contains("near_miss"));

  r = post(*c, "/v1/messages", anthropic_turn("You are a storyteller. ", second, id2));
  EXPECT_EQ(r.body_json()["diagnostics"]["cache_miss_reason"]["near_miss"], "whitespace") << r.body;

  json edited = second;
  edited[0]["content"] = "Tell me a story about a dog.";
  r = post(*c, "/v1/messages", anthropic_turn("You are a storyteller.", edited, id2));
  EXPECT_EQ(r.body_json()["diagnostics"]["cache_miss_reason"]["type"], "messages_changed") << r.body;

  r = post(*c, "/v1/messages", anthropic_turn("You are a storyteller.", second, "msg_unknown"));
  EXPECT_EQ(r.body_json()["diagnostics"]["cache_miss_reason"]["type"], "previous_message_not_found");

  // Streamed: the comparison rides on message_start.
  json streamed = anthropic_turn("You are a poet.", second, id2);
  streamed["stream"] = true;
  r = post(*c, "/v1/messages", streamed);
  const std::vector<SseEvent> events = parse_sse(r.body);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events[0].event, "message_start");
  EXPECT_EQ(json::parse(events[0].data)["message"]["diagnostics"]["cache_miss_reason"]["type"], "system_changed");
  // Without the opt-in there is no diagnostics field.
  r = post(*c, "/v1/messages", json{{"max_tokens", 2}, {"messages", first}});
  EXPECT_FALSE(r.body_json().contains("diagnostics"));
}

TEST(ServerCacheDiagnostics, AnthropicIdsAreScopedToTheirTenant) {
  TestServerConfig cfg;
  cfg.server.api_keys = {{"key-a", "alice"}, {"key-b", "bob"}};
  TestServer s(cfg);
  ASSERT_TRUE(s.ok());
  auto c = s.client();
  const json msgs = {{{"role", "user"}, {"content", "Hello there."}}};
  auto send = [&](const std::string& key, const json& previous) {
    httplib::Headers h{{"x-api-key", key}};
    auto res = c->Post("/v1/messages", h, anthropic_turn("S", msgs, previous).dump(), "application/json");
    EXPECT_TRUE(res && res->status == 200);
    return json::parse(res ? res->body : "{}");
  };
  const std::string alice_id = send("key-a", nullptr)["id"];
  EXPECT_EQ(send("key-b", alice_id)["diagnostics"]["cache_miss_reason"]["type"], "previous_message_not_found");
  EXPECT_TRUE(send("key-a", alice_id)["diagnostics"]["cache_miss_reason"].is_null());
}

TEST(ServerCacheDiagnostics, OpenAIComparisonResponseId) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  auto c = s.client();
  const json msgs = {{{"role", "system"}, {"content", "Be kind."}}, {{"role", "user"}, {"content", "Hi"}}};
  auto chat = [&](const json& messages, const json& options, const std::string& model = "") {
    json body = {{"messages", messages}, {"max_tokens", 2}, {"prompt_cache_options", options}};
    if (!model.empty()) body["model"] = model;
    const HttpResult r = post(*c, "/v1/chat/completions", body);
    EXPECT_EQ(r.status, 200) << r.body;
    return r.body_json();
  };
  const json first = chat(msgs, json::object());
  EXPECT_FALSE(first.contains("prompt_cache_diagnostics"));  // nothing to compare with: stored only
  const std::string id = first["id"];
  EXPECT_EQ(chat(msgs, {{"comparison_response_id", id}})["prompt_cache_diagnostics"]["type"], "cache_hit");
  json edited = msgs;
  edited[0]["content"] = "Be very kind.";
  const json miss = chat(edited, {{"comparison_response_id", id}})["prompt_cache_diagnostics"];
  EXPECT_EQ(miss["type"], "cache_miss") << miss.dump();
  EXPECT_EQ(miss["reason"]["type"], "input_changed");
  EXPECT_GT(miss["cache_missed_tokens"].get<int>(), 0);
  EXPECT_EQ(chat(msgs, {{"comparison_response_id", "chatcmpl-nope"}})["prompt_cache_diagnostics"]["type"],
            "comparison_response_not_found");
  // Another accepted name of the same model is another `model` for the comparison.
  const json other_model = chat(msgs, {{"comparison_response_id", id}}, "stories260K");
  EXPECT_EQ(other_model["prompt_cache_diagnostics"]["reason"]["type"], "model_changed") << other_model.dump();
}

}  // namespace
}  // namespace preface::test
