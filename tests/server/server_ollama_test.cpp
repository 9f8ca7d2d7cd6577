// Ollama's API end to end (server/api/ollama_api.h): /api/chat and /api/generate streamed as NDJSON and whole,
// the same text either way and the same as /v1/chat/completions; options mapped; errors as {"error": "..."};
// tags, ps, show and version.
#include <gtest/gtest.h>

#include <sstream>

#include "server_harness.h"

namespace preface::test {
namespace {

std::vector<json> ndjson(const std::string& body) {
  std::vector<json> out;
  std::istringstream in(body);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) out.push_back(json::parse(line));
  }
  return out;
}

TEST(ServerOllama, ChatAndGenerateStreamAndNot) {
  TestServer server;
  if (!server.ok()) GTEST_SKIP() << "shared test data not found";
  auto c = server.client();
  const json messages = {{{"role", "system"}, {"content", "You tell stories."}}, {{"role", "user"}, {"content", "Hi"}}};
  const json chat = {{"model", "llama3.2"}, {"messages", messages},
                     {"options", {{"num_predict", 12}, {"temperature", 0}, {"num_ctx", 8192}}}};
  const HttpResult streamed = post(*c, "/api/chat", chat);
  ASSERT_EQ(streamed.status, 200) << streamed.body;
  EXPECT_EQ(streamed.headers.find("Content-Type")->second, "application/x-ndjson");
  const std::vector<json> lines = ndjson(streamed.body);
  ASSERT_GE(lines.size(), 2u);
  std::string text;
  for (size_t i = 0; i + 1 < lines.size(); ++i) {
    EXPECT_EQ(lines[i]["done"], false);
    EXPECT_EQ(lines[i]["model"], "llama3.2");
    EXPECT_EQ(lines[i]["message"]["role"], "assistant");
    text += lines[i]["message"]["content"].get<std::string>();
  }
  const json& last = lines.back();
  EXPECT_EQ(last["done"], true);
  EXPECT_EQ(last["done_reason"], "length");
  EXPECT_EQ(last["eval_count"], 12);
  EXPECT_GT(last["prompt_eval_count"].get<int>(), 0);

  json whole_body = chat;
  whole_body["stream"] = false;
  const HttpResult whole = post(*c, "/api/chat", whole_body);
  ASSERT_EQ(whole.status, 200) << whole.body;
  EXPECT_EQ(whole.body_json()["message"]["content"], text);
  EXPECT_GT(whole.body_json()["prompt_cached_count"].get<int>(), 0);  // the same prompt again
  const HttpResult openai = post(*c, "/v1/chat/completions",
                                 json{{"messages", messages}, {"max_tokens", 12}, {"temperature", 0}});
  EXPECT_EQ(openai.body_json()["choices"][0]["message"]["content"], text);

  const HttpResult gen = post(*c, "/api/generate", json{{"model", "m"}, {"prompt", "Once upon a time"},
                                                        {"raw", true}, {"stream", false},
                                                        {"options", {{"num_predict", 6}, {"temperature", 0}}}});
  ASSERT_EQ(gen.status, 200) << gen.body;
  const HttpResult completion = post(*c, "/v1/completions",
                                     json{{"prompt", "Once upon a time"}, {"max_tokens", 6}, {"temperature", 0}});
  EXPECT_EQ(gen.body_json()["response"], completion.body_json()["choices"][0]["text"]);
  EXPECT_EQ(gen.body_json()["done"], true);
}

TEST(ServerOllama, ErrorsAndModelRoutes) {
  TestServer server;
  if (!server.ok()) GTEST_SKIP() << "shared test data not found";
  auto c = server.client();
  const json messages = {{{"role", "user"}, {"content", "Hi"}}};
  struct Case {
    json body;
    const char* path;
    const char* says;
  };
  const Case cases[] = {
      {json{{"messages", messages}, {"options", {{"mirostat", 2}}}}, "/api/chat", "options.mirostat"},
      {json{{"messages", messages}, {"options", {{"temperature", 9}}}}, "/api/chat", "options.temperature"},
      {json{{"messages", {{{"role", "user"}, {"content", "x"}, {"images", {"AAAA"}}}}}}, "/api/chat", "images"},
      {json{{"messages", messages}, {"format", 5}}, "/api/chat", "format"},
      {json{{"prompt", ""}}, "/api/generate", "prompt"},
      {json{{"prompt", "x"}, {"suffix", "y"}}, "/api/generate", "suffix"},
  };
  for (const Case& k : cases) {
    const HttpResult r = post(*c, k.path, k.body);
    EXPECT_EQ(r.status, 400) << k.body;
    const json e = r.body_json();
    ASSERT_TRUE(e["error"].is_string()) << r.body;  // the ollama clients print it as it is
    EXPECT_NE(e["error"].get<std::string>().find(k.says), std::string::npos) << r.body;
  }
  EXPECT_TRUE(get(*c, "/api/nothing").body_json()["error"].is_string());
  EXPECT_EQ(get(*c, "/api/tags").body_json()["models"][0]["name"], "stories260K.gguf");
  EXPECT_EQ(get(*c, "/api/ps").body_json()["models"][0]["context_length"], server.engine().describe().ctx_len);
  EXPECT_TRUE(get(*c, "/api/version").body_json()["version"].is_string());
  const HttpResult show = post(*c, "/api/show", json{{"model", "stories260K.gguf"}});
  ASSERT_EQ(show.status, 200) << show.body;
  EXPECT_EQ(show.body_json()["capabilities"][0], "completion");
  // Format "json": an object.
  const HttpResult j = post(*c, "/api/chat", json{{"messages", messages}, {"format", "json"}, {"stream", false},
                                                  {"options", {{"num_predict", 60}}}});
  ASSERT_EQ(j.status, 200) << j.body;
  EXPECT_EQ(j.body_json()["message"]["content"].get<std::string>().rfind("{", 0), 0u) << j.body;
}

}  // namespace
}  // namespace preface::test
