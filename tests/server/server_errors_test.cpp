// Every error path returns the right HTTP status in its API's own shape, and the server keeps serving: invalid
// JSON, wrong types, bad values, unknown model, a prompt longer than the context, 404, 405, 413, 503 (overload,
// and while the model loads).
#include <atomic>
#include <thread>

#include "server_harness.h"

namespace preface::test {
namespace {

struct ErrorCase {
  const char* what;
  const char* path;
  std::string body;
  int status;
  const char* message_part;  // a substring the message must contain ("" = any)
};

void expect_openai_error(const HttpResult& r, int status, const std::string& what) {
  EXPECT_EQ(r.status, status) << what << ": " << r.body;
  const json j = r.body_json();
  ASSERT_TRUE(j.is_object() && j.contains("error")) << what << ": " << r.body;
  const json& e = j["error"];
  EXPECT_TRUE(e["message"].is_string()) << what;
  EXPECT_TRUE(e["type"].is_string()) << what;
  EXPECT_TRUE(e.contains("param") && e.contains("code")) << what;
  EXPECT_EQ(e["type"], status >= 500 ? "server_error" : "invalid_request_error") << what;
}

void expect_anthropic_error(const HttpResult& r, int status, const std::string& type, const std::string& what) {
  EXPECT_EQ(r.status, status) << what << ": " << r.body;
  const json j = r.body_json();
  ASSERT_TRUE(j.is_object()) << what << ": " << r.body;
  EXPECT_EQ(j["type"], "error") << what;
  EXPECT_EQ(j["error"]["type"], type) << what;
  EXPECT_TRUE(j["error"]["message"].is_string()) << what;
}

TestServerConfig small_limits() {
  TestServerConfig c;
  c.server.limits.max_body_bytes = 64 << 10;
  c.server.limits.max_in_flight = 1;
  c.server.strict_model_names = true;  // so an unknown model is an error (tests/server/server_model_names_test.cpp)
  return c;
}

void expect_serving(httplib::Client& c) {
  const HttpResult ok = post(c, "/v1/completions", json{{"prompt", "Once"}, {"max_tokens", 3}, {"temperature", 0}});
  EXPECT_EQ(ok.status, 200) << ok.body;
}

TEST(ServerErrors, OpenAIErrorsInOpenAIShape) {
  TestServer srv(small_limits());
  ASSERT_TRUE(srv.ok());
  auto c = srv.client();
  json too_long_ids = json::array();
  for (int i = 0; i < 3000; ++i) too_long_ids.push_back(100);
  const std::vector<ErrorCase> cases = {
      {"invalid JSON", "/v1/chat/completions", "{not json", 400, "not valid JSON"},
      {"not an object", "/v1/chat/completions", "[1, 2]", 400, "JSON object"},
      {"messages wrong type", "/v1/chat/completions", R"({"messages": "hi"})", 400, "messages"},
      {"messages missing", "/v1/chat/completions", R"({"max_tokens": 3})", 400, "messages"},
      {"temperature wrong type", "/v1/chat/completions",
       R"({"messages": [{"role": "user", "content": "hi"}], "temperature": "hot"})", 400, "temperature"},
      {"temperature out of range", "/v1/completions", R"({"prompt": "hi", "temperature": 5})", 400, "temperature"},
      {"negative max_tokens", "/v1/completions", R"({"prompt": "hi", "max_tokens": -1})", 400, "max_tokens"},
      {"max_tokens float", "/v1/completions", R"({"prompt": "hi", "max_tokens": 1.5})", 400, "max_tokens"},
      {"unknown model", "/v1/completions", R"({"prompt": "hi", "model": "gpt-4o"})", 404, "gpt-4o"},
      {"n > 1", "/v1/completions", R"({"prompt": "hi", "n": 2})", 400, "'n'"},
      {"bad role", "/v1/chat/completions", R"({"messages": [{"role": "tool", "content": "x"}]})", 400, "role"},
      {"image part", "/v1/chat/completions",
       R"({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]})", 400,
       "text"},
      {"empty stop", "/v1/completions", R"({"prompt": "hi", "stop": [""]})", 400, "stop"},
      {"stop wrong type", "/v1/completions", R"({"prompt": "hi", "stop": 3})", 400, "stop"},
      {"top_logprobs without logprobs", "/v1/chat/completions",
       R"({"messages": [{"role": "user", "content": "x"}], "top_logprobs": 2})", 400, "logprobs"},
      {"prompt missing", "/v1/completions", R"({"max_tokens": 3})", 400, "prompt"},
      {"token id out of range", "/v1/completions", R"({"prompt": [1, 99999]})", 400, "99999"},
      {"prompt longer than the context", "/v1/completions", json{{"prompt", too_long_ids}}.dump(), 400, "3000"},
      {"tools", "/v1/chat/completions",
       R"({"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function"}]})", 400, "tools"},
      {"body too large", "/v1/completions", json{{"prompt", std::string(100 << 10, 'a')}}.dump(), 413, "limit"},
  };
  for (const ErrorCase& ec : cases) {
    const HttpResult r = post(*c, ec.path, ec.body);
    expect_openai_error(r, ec.status, ec.what);
    const std::string message = r.body_json().value("/error/message"_json_pointer, std::string());
    EXPECT_NE(message.find(ec.message_part), std::string::npos) << ec.what << ": " << message;
  }
  // The context error names both numbers and carries OpenAI's code.
  const HttpResult too_long = post(*c, "/v1/completions", json{{"prompt", too_long_ids}});
  EXPECT_NE(too_long.body.find("2048"), std::string::npos) << too_long.body;
  EXPECT_EQ(too_long.body_json()["error"]["code"], "context_length_exceeded");
  EXPECT_EQ(post(*c, "/v1/completions", R"({"prompt": "hi", "model": "x"})").body_json()["error"]["code"],
            "model_not_found");

  const HttpResult not_found = get(*c, "/v1/nothing");
  expect_openai_error(not_found, 404, "unknown route");
  const HttpResult wrong_method = get(*c, "/v1/completions");
  expect_openai_error(wrong_method, 405, "wrong method");
  ASSERT_TRUE(wrong_method.headers.count("Allow"));
  EXPECT_EQ(wrong_method.headers.find("Allow")->second, "POST");
  expect_openai_error(post(*c, "/v1/models", "{}"), 405, "POST on a GET route");

  // Accepted model names: the file name, its stem, and no model at all.
  for (const char* model : {"stories260K.gguf", "stories260K"}) {
    EXPECT_EQ(post(*c, "/v1/completions", json{{"prompt", "a"}, {"max_tokens", 1}, {"model", model}}).status, 200);
  }
  expect_serving(*c);
}

TEST(ServerErrors, AnthropicErrorsInAnthropicShape) {
  TestServer srv(small_limits());
  ASSERT_TRUE(srv.ok());
  auto c = srv.client();
  const std::string user = R"("messages": [{"role": "user", "content": "hi"}])";
  const std::vector<ErrorCase> cases = {
      {"invalid JSON", "/v1/messages", "{", 400, "JSON"},
      {"max_tokens missing", "/v1/messages", "{" + user + "}", 400, "max_tokens"},
      {"max_tokens zero", "/v1/messages", R"({"max_tokens": 0, )" + user + "}", 400, "max_tokens"},
      {"temperature above 1", "/v1/messages", R"({"max_tokens": 5, "temperature": 1.5, )" + user + "}", 400,
       "temperature"},
      {"bad role", "/v1/messages", R"({"max_tokens": 5, "messages": [{"role": "system", "content": "x"}]})", 400,
       "role"},
      {"image block", "/v1/messages",
       R"({"max_tokens": 5, "messages": [{"role": "user", "content": [{"type": "image", "source": {}}]}]})", 400,
       "text"},
      {"bad ttl", "/v1/messages",
       R"({"max_tokens": 5, "messages": [{"role": "user", "content": [{"type": "text", "text": "a",
           "cache_control": {"type": "ephemeral", "ttl": "2h"}}]}]})",
       400, "ttl"},
      {"1h after 5m", "/v1/messages",
       R"({"max_tokens": 5, "system": [{"type": "text", "text": "a", "cache_control": {"type": "ephemeral"}}],
           "messages": [{"role": "user", "content": [{"type": "text", "text": "b",
           "cache_control": {"type": "ephemeral", "ttl": "1h"}}]}]})",
       400, "1h"},
      {"bad cache_control type", "/v1/messages",
       R"({"max_tokens": 5, "system": [{"type": "text", "text": "a", "cache_control": {"type": "forever"}}], )" +
           user + "}",
       400, "ephemeral"},
      {"prefill with trailing space", "/v1/messages",
       R"({"max_tokens": 5, "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Yes "}]})",
       400, "whitespace"},
  };
  for (const ErrorCase& ec : cases) {
    const HttpResult r = post(*c, ec.path, ec.body);
    expect_anthropic_error(r, ec.status, "invalid_request_error", ec.what);
    const std::string message = r.body_json().value("/error/message"_json_pointer, std::string());
    EXPECT_NE(message.find(ec.message_part), std::string::npos) << ec.what << ": " << message;
  }
  // Five breakpoints: one more than allowed.
  json blocks = json::array();
  for (int i = 0; i < 5; ++i) {
    blocks.push_back({{"type", "text"}, {"text", "part " + std::to_string(i)}, {"cache_control", {{"type", "ephemeral"}}}});
  }
  expect_anthropic_error(post(*c, "/v1/messages", json{{"max_tokens", 5}, {"messages", {{{"role", "user"}, {"content", blocks}}}}}),
                         400, "invalid_request_error", "five breakpoints");
  expect_anthropic_error(post(*c, "/v1/messages", json{{"max_tokens", 5}, {"messages", {{{"role", "user"}, {"content", std::string(100 << 10, 'a')}}}}}),
                         413, "request_too_large", "body too large");
  expect_anthropic_error(get(*c, "/v1/messages"), 405, "invalid_request_error", "wrong method");
  expect_anthropic_error(post(*c, "/v1/messages/nothing", "{}"), 404, "not_found_error", "unknown route");
  // A prefill the reply continues.
  const HttpResult prefill = post(*c, "/v1/messages", json{{"max_tokens", 3}, {"messages", {{{"role", "user"}, {"content", "hi"}}, {{"role", "assistant"}, {"content", "Once"}}}}});
  EXPECT_EQ(prefill.status, 200) << prefill.body;
  expect_serving(*c);
}

// With max_in_flight = 1, a second generation while one streams gets 503 with Retry-After, in each API's shape.
TEST(ServerErrors, OverloadedGets503WithRetryAfter) {
  TestServer srv(small_limits());
  ASSERT_TRUE(srv.ok());
  std::atomic<bool> release{false};
  std::thread holder([&] {
    auto c = srv.client();
    httplib::Request req;
    req.method = "POST";
    req.path = "/v1/completions";
    req.body = json{{"prompt", "Once"}, {"max_tokens", 2000}, {"stream", true}, {"ignore_eos", true}}.dump();
    req.set_header("Content-Type", "application/json");
    req.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) { return !release.load(); };
    httplib::Response res;
    httplib::Error err;
    c->send(req, res, err);
  });
  ASSERT_TRUE(wait_for([&] { return srv.server().n_in_flight() == 1; }));
  auto c = srv.client();
  const HttpResult openai = post(*c, "/v1/completions", json{{"prompt", "hi"}, {"max_tokens", 1}});
  expect_openai_error(openai, 503, "overloaded");
  EXPECT_EQ(openai.headers.count("Retry-After"), 1u);
  const HttpResult anthropic =
      post(*c, "/v1/messages", json{{"max_tokens", 1}, {"messages", {{{"role", "user"}, {"content", "hi"}}}}});
  expect_anthropic_error(anthropic, 503, "overloaded_error", "overloaded");
  EXPECT_EQ(anthropic.headers.count("Retry-After"), 1u);
  // Counting tokens and rendering a template parse and render bodies too: inside the same limit.
  expect_anthropic_error(post(*c, "/v1/messages/count_tokens",
                              json{{"messages", {{{"role", "user"}, {"content", "hi"}}}}}),
                         503, "overloaded_error", "overloaded");
  EXPECT_EQ(post(*c, "/apply-template", json{{"messages", {{{"role", "user"}, {"content", "hi"}}}}}).status, 503);
  // Operations endpoints are not limited.
  EXPECT_EQ(get(*c, "/health").status, 200);
  release = true;
  holder.join();
  ASSERT_TRUE(wait_for([&] { return srv.server().n_in_flight() == 0; }));
  expect_serving(*c);
}

// Before attach(): /health and the APIs answer 503 (Retry-After), /metrics still works.
TEST(ServerErrors, LoadingServes503) {
  server::ServerOptions o;
  o.port = 0;
  o.log_requests = false;
  server::Server srv(o);
  const int port = srv.bind();
  srv.start();
  httplib::Client c("127.0.0.1", port);
  const HttpResult health = get(c, "/health");
  EXPECT_EQ(health.status, 503);
  EXPECT_EQ(health.headers.count("Retry-After"), 1u);
  expect_openai_error(post(c, "/v1/chat/completions", R"({"messages": []})"), 503, "loading");
  expect_anthropic_error(post(c, "/v1/messages", "{}"), 503, "overloaded_error", "loading");
  const HttpResult metrics = get(c, "/metrics");
  EXPECT_EQ(metrics.status, 200);
  EXPECT_NE(metrics.body.find("preface_model_loaded 0"), std::string::npos);
  srv.stop();
}

}  // namespace
}  // namespace preface::test
