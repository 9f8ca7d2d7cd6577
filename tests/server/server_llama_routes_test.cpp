// llama.cpp's own routes (server/api/llama_api.h) against the real server: /completion answers in llama.cpp's
// shape, streamed and not, with the prefix cache's count in tokens_cached; /completions is the same route;
// /infill needs FIM tokens (stories260K has none: 400); /props and /slots describe the server.
#include "server/server_harness.h"

namespace preface::test {
namespace {

TEST(ServerLlamaRoutes, CompletionAnswersInLlamaCppsShape) {
  TestServer s;
  if (!s.ok()) GTEST_SKIP() << "shared test data not found";
  auto c = s.client();
  const json body = {{"prompt", "Once upon a time, there was a little girl who liked to"}, {"n_predict", 6},
                     {"temperature", 0.0}, {"cache_prompt", true}};
  HttpResult r = post(*c, "/completion", body);
  ASSERT_EQ(r.status, 200) << r.body;
  const json a = r.body_json();
  EXPECT_FALSE(a["content"].get<std::string>().empty());
  EXPECT_EQ(a["stop"], true);
  EXPECT_EQ(a["tokens_predicted"], 6);
  EXPECT_EQ(a["stop_type"], "limit");
  EXPECT_GT(a["tokens_evaluated"].get<int>(), 10);
  EXPECT_EQ(a["timings"]["predicted_n"], 6);
  // The same prompt again reads it from the prefix cache, whichever route name.
  r = post(*c, "/completions", body);
  ASSERT_EQ(r.status, 200) << r.body;
  const json b = r.body_json();
  EXPECT_EQ(b["content"], a["content"]);
  EXPECT_GT(b["tokens_cached"].get<int>(), 0) << b;
  EXPECT_EQ(b["timings"]["cache_n"], b["tokens_cached"]);
  // Streamed: pieces with stop false, then a last event with stop true and the counts; no [DONE].
  json streamed = body;
  streamed["stream"] = true;
  r = post(*c, "/completion", streamed);
  ASSERT_EQ(r.status, 200) << r.body;
  std::string text;
  json last;
  for (const SseEvent& ev : parse_sse(r.body)) {
    ASSERT_NE(ev.data, "[DONE]");
    const json d = json::parse(ev.data);
    text += d.value("content", "");
    if (d["stop"] == true) last = d;
  }
  EXPECT_EQ(text, a["content"]);
  EXPECT_EQ(last["tokens_predicted"], 6) << last;
  // n_predict -1 is llama.cpp's "no limit" (here with a stop string that ends it).
  r = post(*c, "/completion", json{{"prompt", "Once upon a time"}, {"n_predict", -1}, {"stop", {"."}}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_TRUE(r.body_json()["stop_type"] == "word" || r.body_json()["stop_type"] == "eos") << r.body;
}

TEST(ServerLlamaRoutes, InfillPropsAndSlots) {
  TestServer s;
  if (!s.ok()) GTEST_SKIP() << "shared test data not found";
  auto c = s.client();
  const HttpResult infill = post(*c, "/infill", json{{"input_prefix", "def f("}, {"input_suffix", ")"}});
  EXPECT_EQ(infill.status, 400) << infill.body;
  EXPECT_NE(infill.body.find("fill-in-the-middle"), std::string::npos) << infill.body;
  HttpResult r = get(*c, "/props");
  ASSERT_EQ(r.status, 200) << r.body;
  const json p = r.body_json();
  EXPECT_EQ(p["default_generation_settings"]["n_ctx"], s.engine().describe().ctx_len);
  EXPECT_EQ(p["infill"], false);
  EXPECT_TRUE(p["chat_template"].is_string());
  r = get(*c, "/slots");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_TRUE(r.body_json().is_array());
}

}  // namespace
}  // namespace preface::test
