// Attacks that once took the whole server down (issue 28). Each case sends the hostile request to a real
// server, expects a clear 4xx in the API's own shape, and then checks the server still answers a normal request.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "engine/fault_backend.h"
#include "server/api/api_error.h"
#include "server_harness.h"

namespace preface::test {
namespace {

std::string nested(const std::string& open, const std::string& leaf, const std::string& close, size_t depth) {
  std::string s;
  s.reserve(depth * (open.size() + close.size()) + leaf.size());
  for (size_t i = 0; i < depth; ++i) s += open;
  s += leaf;
  for (size_t i = 0; i < depth; ++i) s += close;
  return s;
}

void expect_serving(httplib::Client& c) {
  const HttpResult ok = post(c, "/v1/completions", json{{"prompt", "Once"}, {"max_tokens", 3}, {"temperature", 0}});
  EXPECT_EQ(ok.status, 200) << ok.body;
}

// messages[0].content nested 150,000 levels deep (a 300 KB body) overflowed the stack with ~131k frames of JSON
// copying; arrays a million deep and deep objects did the same, through every JSON route.
TEST(ServerHardening, DeeplyNestedJsonIs400) {
  TestServer server;
  if (!server.ok()) GTEST_FAIL() << "needs ../shared/models/stories260K.gguf";
  auto c = server.client();
  struct Case {
    const char* what;
    const char* path;
    std::string body;
  };
  const Case cases[] = {
      {"chat content 150k deep", "/v1/chat/completions",
       R"({"messages":[{"role":"user","content":)" + nested("[", "", "]", 150000) + "}]}"},
      {"array 1M deep", "/v1/completions", R"({"prompt":)" + nested("[", "1", "]", 1000000) + "}"},
      {"objects 200k deep", "/v1/completions", R"({"prompt":"a","x":)" + nested(R"({"a":)", "1", "}", 200000) + "}"},
      {"anthropic content", "/v1/messages",
       R"({"max_tokens":4,"messages":[{"role":"user","content":)" + nested("[", "", "]", 150000) + "}]}"},
      {"tokenize", "/tokenize", R"({"content":)" + nested("[", "", "]", 150000) + "}"},
      {"just past the limit", "/v1/completions",
       R"({"prompt":"a","x":)" + nested("[", "", "]", server::kMaxJsonDepth) + "}"},
  };
  for (const Case& k : cases) {
    const HttpResult r = post(*c, k.path, k.body);
    EXPECT_EQ(r.status, 400) << k.what << ": " << r.body.substr(0, 300);
    EXPECT_NE(r.body.find("deeper than"), std::string::npos) << k.what << ": " << r.body.substr(0, 300);
    expect_serving(*c);
  }
  // The deepest accepted nesting still parses (and is then refused or ignored by field checks, not by depth).
  const HttpResult at_limit =
      post(*c, "/v1/completions",
           R"({"prompt":"Once","max_tokens":2,"x":)" + nested("[", "", "]", server::kMaxJsonDepth - 1) + "}");
  EXPECT_EQ(at_limit.body.find("deeper than"), std::string::npos) << at_limit.body.substr(0, 300);
  expect_serving(*c);
}

// Nesting the body's depth check cannot see, because it is inside a string (issue 41): each request once killed
// the server (a tool call's arguments parsed and deep-copied without a limit; the GBNF parser and the JSON
// Schema pattern compiler recursing once per group). Each now names the limit: a 400, or for a schema pattern a
// warning beside the looser grammar.
TEST(ServerHardening, NestingInsideStringsIs400) {
  // A tool-aware template (Qwen3's), so that tool schemas are compiled.
  const auto template_file = shared_file("templates/Qwen__Qwen3-1.7B.json");
  ASSERT_FALSE(template_file.empty()) << "needs ../shared/templates/Qwen__Qwen3-1.7B.json";
  TestServerConfig cfg;
  cfg.chat_template_jinja = json::parse(std::ifstream(template_file))["template"].get<std::string>();
  TestServer server(cfg);
  if (!server.ok()) GTEST_FAIL() << "needs ../shared/models/stories260K.gguf";
  auto c = server.client();
  const std::string deep_args = R"({"a":)" + nested("[", "", "]", 150000) + "}";
  const json chat_with_call = {
      {"max_tokens", 2},
      {"messages",
       {{{"role", "user"}, {"content", "Hi"}},
        {{"role", "assistant"},
         {"content", nullptr},
         {"tool_calls",
          {{{"id", "call_1"}, {"type", "function"}, {"function", {{"name", "f"}, {"arguments", deep_args}}}}}}},
        {{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "ok"}}}}};
  const json deep_pattern = {{"type", "string"}, {"pattern", nested("(", "a", ")", 30000)}};
  // Rendered into the prompt too, so nested less deeply (the prompt fits the context), still past the limit.
  const json tool_pattern = {{"type", "string"}, {"pattern", nested("(", "a", ")", 600)}};
  const json deep_pattern_tool = {
      {"type", "function"},
      {"function", {{"name", "f"}, {"parameters", {{"type", "object"}, {"properties", {{"x", tool_pattern}}}}}}}};
  const std::string deep_gbnf = "root ::= " + nested("(", "\"a\"", ")", 30000) + "\n";
  // A pattern nested too deeply is loosened (any string; 200 with a warning), GBNF and arguments are a 400.
  struct Case {
    const char* what;
    const char* path;
    json body;
    const char* says;
    int status = 400;
  };
  const Case cases[] = {
      {"tool call arguments", "/v1/chat/completions", chat_with_call, "deeper than"},
      {"tool call arguments, explained", "/v1/cache/explain", chat_with_call, "deeper than"},
      {"grammar", "/v1/completions", {{"prompt", "a"}, {"max_tokens", 2}, {"grammar", deep_gbnf}}, "nested deeper"},
      {"guided_grammar", "/v1/completions", {{"prompt", "a"}, {"max_tokens", 2}, {"guided_grammar", deep_gbnf}},
       "nested deeper"},
      {"response_format pattern", "/v1/chat/completions",
       {{"max_tokens", 2},
        {"messages", {{{"role", "user"}, {"content", "Hi"}}}},
        {"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "s"}, {"schema", deep_pattern}}}}}},
       "nested deeper", 200},
      {"guided_json pattern", "/v1/completions", {{"prompt", "a"}, {"max_tokens", 2}, {"guided_json", deep_pattern}},
       "nested deeper", 200},
      {"output_format pattern", "/v1/messages",
       {{"max_tokens", 2},
        {"messages", {{{"role", "user"}, {"content", "Hi"}}}},
        {"output_format", {{"type", "json_schema"}, {"schema", deep_pattern}}}},
       "nested deeper", 200},
      {"tool parameter pattern", "/v1/chat/completions",
       {{"max_tokens", 2},
        {"messages", {{{"role", "user"}, {"content", "Hi"}}}},
        {"tools", {deep_pattern_tool}},
        {"tool_choice", "required"}},
       "nested deeper", 200},
  };
  for (const Case& k : cases) {
    const HttpResult r = post(*c, k.path, k.body);
    EXPECT_EQ(r.status, k.status) << k.what << ": " << r.body.substr(0, 300);
    EXPECT_NE(r.body.find(k.says), std::string::npos) << k.what << ": " << r.body.substr(0, 300);
    if (k.status == 200) {
      const auto h = r.headers.find("X-Preface-Warnings");
      ASSERT_NE(h, r.headers.end()) << k.what;
      EXPECT_NE(h->second.find(k.says), std::string::npos) << k.what;
    }
    expect_serving(*c);
  }
}

// A step that throws inside the engine (a backend failing on purpose) answers that request with a 500 in the API's
// shape, streamed or not; the server keeps serving, exactly, and no KV block stays held (TestServer::stop checks).
constexpr int32_t kFaultPos = 300;  // only the long prompts below reach it

TEST(ServerHardening, FailedEngineStepAnswers500AndServesOn) {
  TestServerConfig cfg;
  cfg.backend = [](model::Model& m, const engine::EngineConfig& c) -> std::unique_ptr<engine::Backend> {
    return std::make_unique<FaultBackend>(m, c, kFaultPos);
  };
  TestServer server(cfg);
  if (!server.ok()) GTEST_FAIL() << "needs ../shared/models/stories260K.gguf";
  auto c = server.client();
  const json good = {{"prompt", "Once upon a time"}, {"max_tokens", 6}, {"temperature", 0}};
  const HttpResult before = post(*c, "/v1/completions", good);
  ASSERT_EQ(before.status, 200) << before.body;

  const json long_prompt(std::vector<int32_t>(kFaultPos + 8, 200));
  const HttpResult failed = post(*c, "/v1/completions", json{{"prompt", long_prompt}, {"max_tokens", 4}});
  EXPECT_EQ(failed.status, 500) << failed.body;
  EXPECT_NE(failed.body.find("injected fault"), std::string::npos) << failed.body;
  const HttpResult streamed =
      post(*c, "/v1/completions", json{{"prompt", long_prompt}, {"max_tokens", 4}, {"stream", true}});
  EXPECT_EQ(streamed.status, 200);  // the headers went out before the failure; the stream says what happened
  EXPECT_NE(streamed.body.find("injected fault"), std::string::npos) << streamed.body;

  const HttpResult after = post(*c, "/v1/completions", good);
  ASSERT_EQ(after.status, 200) << after.body;
  EXPECT_EQ(after.body_json()["choices"][0]["text"], before.body_json()["choices"][0]["text"]);
  EXPECT_EQ(server.engine().counters().n_failed_steps, 2);
}

// A non-streamed request whose client disconnected kept generating to the end (40 vanished clients: ~79k tokens
// over 58 s). The server now looks at the connection between tokens and cancels.
TEST(ServerHardening, VanishedNonStreamingClientIsCancelled) {
  TestServerConfig cfg;
  FaultBackend* backend = nullptr;
  cfg.backend = [&backend](model::Model& m, const engine::EngineConfig& c) -> std::unique_ptr<engine::Backend> {
    auto b = std::make_unique<FaultBackend>(m, c, -1);
    b->forward_delay = std::chrono::milliseconds(5);  // 400 tokens: 2 s
    backend = b.get();
    return b;
  };
  TestServer server(cfg);
  if (!server.ok()) GTEST_FAIL() << "needs ../shared/models/stories260K.gguf";
  for (int client = 0; client < 3; ++client) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_GE(fd, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(server.port()));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    const std::string body = json{{"prompt", "Once upon a time"}, {"max_tokens", 400}, {"ignore_eos", true}}.dump();
    const std::string request = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                                "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
    ASSERT_EQ(::send(fd, request.data(), request.size(), 0), static_cast<ssize_t>(request.size()));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    ::close(fd);
  }
  ASSERT_TRUE(wait_for([&] { return server.engine().counters().n_requests_finished == 3; },
                       std::chrono::milliseconds(4000)))
      << "the vanished clients' generations ran on";
  EXPECT_LT(server.engine().counters().n_generated_tokens, 3 * 200) << "tokens generated for nobody";
  EXPECT_EQ(server.engine().counters().n_blocks_in_use, 0);
  auto c = server.client();
  expect_serving(*c);
}

// A second server on a port already in use failed to notice (SO_REUSEPORT): the kernel then split connections
// between two processes, possibly serving two models. Binding is exclusive and the error says why.
TEST(ServerHardening, PortInUseIsRefused) {
  server::ServerOptions o;
  o.port = 0;
  o.log_requests = false;
  server::Server first(o);
  o.port = first.bind();
  server::Server second(o);
  try {
    second.bind();
    ADD_FAILURE() << "a second server bound port " << o.port;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("another process is listening there"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace preface::test
