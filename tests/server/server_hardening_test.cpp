// Attacks that once took the whole server down (issue 28). Each case sends the hostile request to a real
// server, expects a clear 4xx in the API's own shape, and then checks the server still answers a normal request.
#include <string>

#include "server/api_error.h"
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

}  // namespace
}  // namespace preface::test
