// The Responses API end to end (server/api/responses_api.h): create, retrieve, input_items, delete; streamed
// events; previous_response_id resuming on the previous response's own tokens (all of it a prefix hit), per
// tenant; store: false; errors named with the Responses field.
#include <gtest/gtest.h>

#include "server_harness.h"

namespace preface::test {
namespace {

TestServerConfig two_tenants() {
  TestServerConfig c;
  c.server.api_keys = {{"key-a", "alice"}, {"key-b", "bob"}};
  return c;
}

std::unique_ptr<httplib::Client> client_as(const TestServer& s, const std::string& key) {
  auto c = s.client();
  c->set_default_headers({{"Authorization", "Bearer " + key}});
  return c;
}

HttpResult del(httplib::Client& c, const std::string& path) {
  HttpResult r;
  if (auto res = c.Delete(path.c_str())) {
    r.status = res->status;
    r.body = res->body;
  }
  return r;
}

std::string output_text(const json& response) {
  std::string text;
  for (const json& item : response["output"]) {
    if (item["type"] != "message") continue;
    for (const json& part : item["content"]) text += part["text"].get<std::string>();
  }
  return text;
}

TEST(ServerResponses, CreateRetrieveListDeleteAndResumeExactly) {
  TestServer server(two_tenants());
  if (!server.ok()) GTEST_SKIP() << "shared test data not found";
  auto alice = client_as(server, "key-a");
  auto bob = client_as(server, "key-b");
  const int32_t block = server.engine().describe().block_size;

  const HttpResult first = post(*alice, "/v1/responses",
                                json{{"input", "Once upon a time"}, {"instructions", "Tell a story."},
                                     {"max_output_tokens", 24}, {"temperature", 0}, {"metadata", {{"k", "v"}}}});
  ASSERT_EQ(first.status, 200) << first.body;
  const json r1 = first.body_json();
  const std::string id = r1["id"].get<std::string>();
  EXPECT_EQ(id.rfind("resp_", 0), 0u) << id;
  EXPECT_EQ(r1["object"], "response");
  EXPECT_TRUE(r1["status"] == "completed" || r1["status"] == "incomplete") << r1["status"];
  EXPECT_EQ(r1["instructions"], "Tell a story.");
  EXPECT_EQ(r1["metadata"], json({{"k", "v"}}));
  ASSERT_EQ(r1["output"].size(), 1u) << r1;
  EXPECT_EQ(r1["output"][0]["type"], "message");
  EXPECT_EQ(r1["output"][0]["content"][0]["type"], "output_text");
  EXPECT_FALSE(output_text(r1).empty());
  const int32_t in1 = r1["usage"]["input_tokens"], out1 = r1["usage"]["output_tokens"];
  EXPECT_GT(in1, 0);
  EXPECT_EQ(r1["usage"]["total_tokens"], in1 + out1);

  // Retrieve and list: the owner only.
  const HttpResult got = get(*alice, "/v1/responses/" + id);
  ASSERT_EQ(got.status, 200) << got.body;
  EXPECT_EQ(got.body_json(), r1);
  EXPECT_EQ(get(*bob, "/v1/responses/" + id).status, 404);
  const HttpResult items = get(*alice, "/v1/responses/" + id + "/input_items");
  ASSERT_EQ(items.status, 200) << items.body;
  ASSERT_EQ(items.body_json()["data"].size(), 1u);
  EXPECT_EQ(items.body_json()["data"][0]["role"], "user");
  EXPECT_EQ(items.body_json()["data"][0]["content"][0]["text"], "Once upon a time");

  // A follow-up resumes on the previous response's tokens: everything up to its reply is cached.
  const HttpResult second = post(*alice, "/v1/responses",
                                 json{{"input", "And then?"}, {"instructions", "Tell a story."},
                                      {"previous_response_id", id}, {"max_output_tokens", 8}, {"temperature", 0}});
  ASSERT_EQ(second.status, 200) << second.body;
  const json r2 = second.body_json();
  EXPECT_EQ(r2["previous_response_id"], id);
  EXPECT_EQ(r2["preface"]["resumed"], true) << r2;
  const int32_t cached = r2["usage"]["input_tokens_details"]["cached_tokens"];
  EXPECT_GE(cached, (in1 + out1 - 1) / block * block) << r2["usage"];
  EXPECT_GT(r2["usage"]["input_tokens"].get<int32_t>(), in1 + out1 - 1);
  // Another tenant cannot continue it.
  const HttpResult stolen = post(*bob, "/v1/responses", json{{"input", "x"}, {"previous_response_id", id}});
  EXPECT_EQ(stolen.status, 404) << stolen.body;
  EXPECT_EQ(stolen.body_json()["error"]["param"], "previous_response_id");

  // Delete: gone for its owner, never visible to the other tenant.
  EXPECT_EQ(del(*bob, "/v1/responses/" + id).status, 404);
  const HttpResult deleted = del(*alice, "/v1/responses/" + id);
  ASSERT_EQ(deleted.status, 200) << deleted.body;
  EXPECT_EQ(deleted.body_json()["deleted"], true);
  EXPECT_EQ(get(*alice, "/v1/responses/" + id).status, 404);
  EXPECT_EQ(post(*alice, "/v1/responses", json{{"input", "x"}, {"previous_response_id", id}}).status, 404);
  server.stop();  // checks the pool: no block held
}

TEST(ServerResponses, StreamedEventsBuildTheSameResponse) {
  TestServer server;
  if (!server.ok()) GTEST_SKIP() << "shared test data not found";
  auto c = server.client();
  const json body = {{"input", "Once upon a time"}, {"max_output_tokens", 20}, {"temperature", 0}};
  const json plain = post(*c, "/v1/responses", body).body_json();
  json streamed_body = body;
  streamed_body["stream"] = true;
  const HttpResult r = post(*c, "/v1/responses", streamed_body);
  ASSERT_EQ(r.status, 200) << r.body;
  const std::vector<SseEvent> events = parse_sse(r.body);
  ASSERT_GE(events.size(), 6u);
  std::string deltas;
  int64_t seq = -1;
  json last;
  for (const SseEvent& ev : events) {
    const json data = json::parse(ev.data);
    EXPECT_EQ(data["type"], ev.event);
    EXPECT_EQ(data["sequence_number"].get<int64_t>(), seq + 1);
    seq = data["sequence_number"];
    if (ev.event == "response.output_text.delta") deltas += data["delta"].get<std::string>();
    last = data;
  }
  EXPECT_EQ(events.front().event, "response.created");
  EXPECT_EQ(events[1].event, "response.in_progress");
  EXPECT_EQ(events[2].event, "response.output_item.added");
  EXPECT_EQ(events[3].event, "response.content_part.added");
  EXPECT_TRUE(last["type"] == "response.completed" || last["type"] == "response.incomplete") << last["type"];
  EXPECT_EQ(deltas, output_text(plain));
  EXPECT_EQ(output_text(last["response"]), output_text(plain));
  EXPECT_EQ(last["response"]["status"], plain["status"]);
  // Streamed responses are stored too.
  EXPECT_EQ(get(*c, "/v1/responses/" + last["response"]["id"].get<std::string>()).status, 200);
  server.stop();  // checks the pool: no block held
}

TEST(ServerResponses, StoreFalseAndErrorsNameTheResponsesField) {
  TestServer server;
  if (!server.ok()) GTEST_SKIP() << "shared test data not found";
  auto c = server.client();
  const HttpResult unstored = post(*c, "/v1/responses", json{{"input", "Hi"}, {"max_output_tokens", 2}, {"store", false}});
  ASSERT_EQ(unstored.status, 200) << unstored.body;
  EXPECT_EQ(get(*c, "/v1/responses/" + unstored.body_json()["id"].get<std::string>()).status, 404);
  struct Case {
    json body;
    const char* param;
  };
  const Case cases[] = {
      {json{{"max_output_tokens", 2}}, "input"},
      {json{{"input", 5}}, "input"},
      {json{{"input", {{{"type", "message"}, {"role", "robot"}, {"content", "x"}}}}}, "input[0].role"},
      {json{{"input", {{{"role", "user"}, {"content", {{{"type", "input_image"}}}}}}}}, "input[0].content[0]"},
      {json{{"input", "x"}, {"max_output_tokens", 0}}, "max_output_tokens"},
      {json{{"input", "x"}, {"text", {{"format", {{"type", "json_schema"}, {"name", "s"},
                                                    {"schema", {{"type", "strng"}}}}}}}},
       "text.format.schema.type"},
      {json{{"input", "x"}, {"background", true}}, "background"},
      {json{{"input", "x"}, {"tools", {{{"type", "web_search"}}}}}, "tools[0].type"},
  };
  for (const Case& k : cases) {
    const HttpResult r = post(*c, "/v1/responses", k.body);
    EXPECT_EQ(r.status, 400) << k.body << " -> " << r.body;
    EXPECT_EQ(r.body_json()["error"]["param"], k.param) << r.body;
  }
  // Structured output through text.format, as the SDK's responses.parse sends it.
  const HttpResult structured =
      post(*c, "/v1/responses",
           json{{"input", "Hi"}, {"max_output_tokens", 200}, {"temperature", 0},
                {"text", {{"format", {{"type", "json_schema"}, {"name", "s"}, {"strict", true},
                                      {"schema", {{"type", "object"}, {"properties", {{"ok", {{"type", "boolean"}}}}},
                                                  {"required", {"ok"}}, {"additionalProperties", false}}}}}}}});
  ASSERT_EQ(structured.status, 200) << structured.body;
  EXPECT_TRUE(json::parse(output_text(structured.body_json()))["ok"].is_boolean()) << structured.body;
  server.stop();  // checks the pool: no block held
}

}  // namespace
}  // namespace preface::test
