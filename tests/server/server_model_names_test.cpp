// Model names: by default a single-model server answers any `model` with its one model and reports the served name
// (as llama.cpp's server does, so clients with a hard-wired name such as "gpt-4o" work); --alias adds names, the
// first being the reported one; --strict-model-names answers other names 404 model_not_found in both APIs.
#include "server_harness.h"

namespace preface::test {
namespace {

const json kChat = {{"messages", json::array({{{"role", "user"}, {"content", "Hi"}}})}, {"max_tokens", 2}};

json with_model(json body, const std::string& model) {
  body["model"] = model;
  return body;
}

TEST(ServerModelNames, AnyNameReachesTheOneModelAndTheServedNameIsReported) {
  TestServer srv;
  ASSERT_TRUE(srv.ok());
  auto c = srv.client();
  for (const char* model : {"gpt-4o", "gpt-3.5-turbo", "stories260K.gguf", ""}) {
    const HttpResult chat = post(*c, "/v1/chat/completions", with_model(kChat, model));
    ASSERT_EQ(chat.status, 200) << model << ": " << chat.body;
    EXPECT_EQ(chat.body_json()["model"], "stories260K.gguf") << model;
    const HttpResult msg = post(*c, "/v1/messages", with_model(kChat, model));
    ASSERT_EQ(msg.status, 200) << model << ": " << msg.body;
    EXPECT_EQ(msg.body_json()["model"], "stories260K.gguf") << model;
  }
}

TEST(ServerModelNames, AliasesAreAcceptedAndTheFirstIsReported) {
  TestServerConfig cfg;
  cfg.aliases = {"tiny", "tiny-2"};
  cfg.server.strict_model_names = true;
  TestServer srv(cfg);
  ASSERT_TRUE(srv.ok());
  auto c = srv.client();
  const HttpResult models = get(*c, "/v1/models");
  ASSERT_EQ(models.status, 200);
  EXPECT_EQ(models.body_json()["data"][0]["id"], "tiny");
  for (const char* model : {"tiny", "tiny-2", "stories260K.gguf", "stories260K"}) {
    const HttpResult r = post(*c, "/v1/chat/completions", with_model(kChat, model));
    ASSERT_EQ(r.status, 200) << model << ": " << r.body;
    EXPECT_EQ(r.body_json()["model"], "tiny") << model;
  }
}

TEST(ServerModelNames, StrictNamesAnswer404InEachApisShape) {
  TestServerConfig cfg;
  cfg.server.strict_model_names = true;
  TestServer srv(cfg);
  ASSERT_TRUE(srv.ok());
  auto c = srv.client();
  const HttpResult openai = post(*c, "/v1/chat/completions", with_model(kChat, "gpt-4o"));
  EXPECT_EQ(openai.status, 404) << openai.body;
  EXPECT_EQ(openai.body_json()["error"]["code"], "model_not_found");
  EXPECT_EQ(openai.body_json()["error"]["type"], "invalid_request_error");
  EXPECT_EQ(openai.body_json()["error"]["param"], "model");
  const HttpResult anthropic = post(*c, "/v1/messages", with_model(kChat, "claude-x"));
  EXPECT_EQ(anthropic.status, 404) << anthropic.body;
  EXPECT_EQ(anthropic.body_json()["error"]["type"], "not_found_error");
  EXPECT_NE(anthropic.body_json()["error"]["message"].get<std::string>().find("claude-x"), std::string::npos);
  // The server keeps serving the names it has.
  EXPECT_EQ(post(*c, "/v1/chat/completions", with_model(kChat, "stories260K")).status, 200);
}

}  // namespace
}  // namespace preface::test
