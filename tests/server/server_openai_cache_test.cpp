// OpenAI's prompt cache controls (server/api/openai_cache.h): prompt_cache_retention "24h", prompt_cache_options
// {mode, ttl} and content parts' prompt_cache_breakpoint become cache pins over the right prompt prefixes with the
// right TTLs; a pinned prefix survives the evictions that drop an unpinned one; the usage reports the pin; any
// other value is a 400 naming the field.
#include <gtest/gtest.h>

#include "server/api/openai_api.h"
#include "server/api/openai_cache.h"
#include "server/observability/metrics.h"
#include "server_harness.h"

namespace preface::test {
namespace {

using std::chrono::seconds;

json part(const std::string& text, const json& breakpoint = nullptr) {
  json p = {{"type", "text"}, {"text", text}};
  if (!breakpoint.is_null()) p["prompt_cache_breakpoint"] = breakpoint;
  return p;
}

json with(json base, const json& patch) {
  base.update(patch);
  return base;
}

// A system message of one part and a user message of two; `bp_system` / `bp_user` mark the system part and the
// user's first part.
json chat_body(const json& bp_system, const json& bp_user) {
  return {{"max_tokens", 2},
          {"messages",
           {{{"role", "system"}, {"content", {part("You tell stories.", bp_system)}}},
            {{"role", "user"}, {"content", {part("The cat sat.", bp_user), part(" The dog ran.")}}}}}};
}

class OpenAICachePins : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!server_.ok()) GTEST_SKIP() << "stories260K.gguf not found";
    ctx_ = std::make_unique<server::ServerContext>(server_.engine(), server_.tokenizer(), chat::ChatTemplate::ChatML,
                                                   "m", std::vector<std::string>{}, false, server::ServerLimits{},
                                                   metrics_);
  }
  server::OpenAIRequest chat(const json& body) { return server::parse_chat_request(body, *ctx_); }
  std::string prefix_text(const server::OpenAIRequest& r, int32_t n) const {
    const std::vector<int32_t>& p = r.generation.params.prompt;
    return server_.tokenizer().decode(std::vector<int32_t>(p.begin(), p.begin() + n));
  }

  TestServer server_;
  server::Metrics metrics_;
  std::unique_ptr<server::ServerContext> ctx_;
};

TEST_F(OpenAICachePins, BreakpointsResolveToThePrefixEndingWithTheirPart) {
  json body = chat_body({{"mode", "explicit"}, {"ttl", "12h"}}, {{"mode", "explicit"}});
  body["prompt_cache_options"] = {{"mode", "explicit"}};
  const server::OpenAIRequest r = chat(body);
  const auto& pins = r.generation.params.cache_pins;
  ASSERT_EQ(pins.size(), 2u);
  EXPECT_EQ(pins[0].ttl, seconds(12 * 3600));
  EXPECT_EQ(pins[1].ttl, seconds(1800));  // the request's TTL (prompt_cache_options.ttl's default, 30m)
  const std::string p0 = prefix_text(r, pins[0].n_tokens), p1 = prefix_text(r, pins[1].n_tokens);
  EXPECT_NE(p0.find("You tell stories."), std::string::npos) << p0;
  EXPECT_EQ(p0.find("cat"), std::string::npos) << p0;
  EXPECT_NE(p1.find("The cat sat."), std::string::npos) << p1;
  EXPECT_EQ(p1.find("dog"), std::string::npos) << p1;
  EXPECT_LT(pins[0].n_tokens, pins[1].n_tokens);
}

TEST_F(OpenAICachePins, ImplicitModeAndRetentionPinTheWholePrompt) {
  // No control: nothing pinned (automatic caching only); "in_memory" is the same.
  EXPECT_TRUE(chat(chat_body(nullptr, nullptr)).generation.params.cache_pins.empty());
  json in_memory = chat_body(nullptr, nullptr);
  in_memory["prompt_cache_retention"] = "in_memory";
  EXPECT_TRUE(chat(in_memory).generation.params.cache_pins.empty());

  json implicit = chat_body(nullptr, {{"mode", "explicit"}});
  implicit["prompt_cache_options"] = {{"comparison_response_id", "chatcmpl-x"}};  // diagnostics only
  EXPECT_EQ(chat(implicit).generation.params.cache_pins.size(), 1u);
  implicit["prompt_cache_options"] = {{"mode", "implicit"}};  // ttl "30m"
  server::OpenAIRequest r = chat(implicit);
  ASSERT_EQ(r.generation.params.cache_pins.size(), 2u);
  EXPECT_EQ(r.generation.params.cache_pins[1].n_tokens, static_cast<int32_t>(r.generation.params.prompt.size()));
  EXPECT_EQ(r.generation.params.cache_pins[1].ttl, seconds(1800));

  json day = chat_body({{"mode", "explicit"}}, nullptr);
  day["prompt_cache_retention"] = "24h";  // breakpoints without a ttl inherit it
  r = chat(day);
  ASSERT_EQ(r.generation.params.cache_pins.size(), 2u);
  EXPECT_EQ(r.generation.params.cache_pins[0].ttl, seconds(24 * 3600));
  EXPECT_EQ(r.generation.params.cache_pins[1].ttl, seconds(24 * 3600));
  EXPECT_EQ(r.generation.params.cache_pins[1].n_tokens, static_cast<int32_t>(r.generation.params.prompt.size()));

  const server::OpenAIRequest c = server::parse_completion_request(
      json{{"prompt", "Once upon a time"}, {"max_tokens", 2}, {"prompt_cache_retention", "24h"}}, *ctx_);
  ASSERT_EQ(c.generation.params.cache_pins.size(), 1u);
  EXPECT_EQ(c.generation.params.cache_pins[0].n_tokens, static_cast<int32_t>(c.generation.params.prompt.size()));
}

// At most four breakpoints are written, the implicit one included: of more explicit ones the latest are kept.
TEST_F(OpenAICachePins, AtMostFourBreakpointsTheLatestKept) {
  json content = json::array();
  for (int i = 0; i < 6; ++i) content.push_back(part("Part " + std::to_string(i) + ".", {{"mode", "explicit"}}));
  const json body = {{"max_tokens", 2}, {"messages", {{{"role", "user"}, {"content", content}}}}};
  const server::OpenAIRequest explicit_only = chat(with(body, {{"prompt_cache_options", {{"mode", "explicit"}}}}));
  ASSERT_EQ(explicit_only.generation.params.cache_pins.size(), 4u);
  const std::string first = prefix_text(explicit_only, explicit_only.generation.params.cache_pins[0].n_tokens);
  EXPECT_NE(first.find("Part 2."), std::string::npos) << first;
  EXPECT_EQ(first.find("Part 3."), std::string::npos) << first;
  const server::OpenAIRequest implicit = chat(with(body, {{"prompt_cache_options", {{"ttl", "30m"}}}}));
  ASSERT_EQ(implicit.generation.params.cache_pins.size(), 4u);
  const std::string second = prefix_text(implicit, implicit.generation.params.cache_pins[0].n_tokens);
  EXPECT_NE(second.find("Part 3."), std::string::npos) << second;
  EXPECT_EQ(second.find("Part 4."), std::string::npos) << second;
}

TEST(OpenAICacheControls, UnknownValuesAreA400NamingTheField) {
  TestServer server;
  if (!server.ok()) GTEST_SKIP() << "stories260K.gguf not found";
  auto c = server.client();
  struct Case {
    json patch;
    const char* field;
  };
  const json base = chat_body(nullptr, nullptr);
  for (const Case& k : {Case{{{"prompt_cache_retention", "7d"}}, "prompt_cache_retention"},
                        Case{{{"prompt_cache_options", {{"mode", "sometimes"}}}}, "prompt_cache_options.mode"},
                        Case{{{"prompt_cache_options", {{"ttl", "7d"}}}}, "prompt_cache_options.ttl"},
                        Case{{{"prompt_cache_options", "30m"}}, "prompt_cache_options"},
                        Case{{{"prompt_cache_retention", "24h"}, {"prompt_cache_options", {{"ttl", "30m"}}}},
                             "prompt_cache_options.ttl"}}) {
    const HttpResult r = post(*c, "/v1/chat/completions", with(base, k.patch));
    EXPECT_EQ(r.status, 400) << k.patch.dump();
    EXPECT_EQ(r.body_json()["error"]["param"], k.field) << r.body;
  }
  for (const auto& [breakpoint, field] :
       {std::pair{json{{"mode", "implicit"}}, "messages[1].content[0].prompt_cache_breakpoint.mode"},
        std::pair{json{{"mode", "explicit"}, {"ttl", "1h"}}, "messages[1].content[0].prompt_cache_breakpoint.ttl"},
        std::pair{json("yes"), "messages[1].content[0].prompt_cache_breakpoint"}}) {
    const HttpResult r = post(*c, "/v1/chat/completions", chat_body(nullptr, breakpoint));
    EXPECT_EQ(r.status, 400) << breakpoint.dump();
    EXPECT_EQ(r.body_json()["error"]["param"], field) << r.body;
  }
}

// End to end on a pool of a few dozen blocks: a prefix sent with prompt_cache_retention "24h" is pinned (the
// usage says so) and still hits after enough other prompts went through to evict every unpinned block; the
// same-sized prefix sent "in_memory" is evicted.
TEST(OpenAICacheControls, A24hPrefixSurvivesEvictionsThatDropAnInMemoryOne) {
  TestServerConfig cfg;
  cfg.engine.kv_cache_bytes = 256u << 10;
  TestServer server(cfg);
  if (!server.ok()) GTEST_SKIP() << "stories260K.gguf not found";
  auto c = server.client();
  const auto story = [](const std::string& who) {
    return who + " went to the park. The sun was warm and the birds sang in the tall green trees all day long.";
  };
  // Completions: the prompts differ from their second token (a chat template's shared opening could fill the
  // first block, which the pinned prompt would then share with every other).
  const auto ask = [&](const std::string& prompt, const char* retention) {
    json body = {{"max_tokens", 1}, {"prompt", prompt}};
    if (retention != nullptr) body["prompt_cache_retention"] = retention;
    const HttpResult r = post(*c, "/v1/completions", body);
    EXPECT_EQ(r.status, 200) << r.body;
    return r.body_json()["usage"]["prompt_tokens_details"];
  };
  const json pinned = ask(story("Lily"), "24h");
  EXPECT_GT(pinned["cache_pinned_tokens"].get<int>(), 0) << pinned;
  EXPECT_EQ(pinned["cache_pin_ttl_seconds"], 24 * 3600) << pinned;
  EXPECT_FALSE(pinned.contains("cache_pin_refused_blocks")) << pinned;
  const json unpinned = ask(story("Tom"), "in_memory");
  EXPECT_FALSE(unpinned.contains("cache_pinned_tokens")) << unpinned;
  ASSERT_TRUE(wait_for([&] { return server.engine().counters().n_pinned_blocks > 0; }));
  const int32_t n_pinned = server.engine().counters().n_pinned_blocks;

  const int32_t n_blocks = server.engine().counters().n_blocks_total;
  for (int i = 0; i < 400 && server.engine().counters().n_evictions <= 2 * n_blocks; ++i) {
    ask(std::to_string(i) + " " + story("Someone number " + std::to_string(i)), nullptr);
  }
  ASSERT_GT(server.engine().counters().n_evictions, 2 * n_blocks) << "the pool never turned over";
  EXPECT_EQ(server.engine().counters().n_pinned_blocks, n_pinned);
  // The pinned blocks hit whole; of the unpinned prompt at most rows of a partially matching block (the BOS
  // token every prompt shares) are copied, no block of its own survived.
  EXPECT_GE(ask(story("Lily"), nullptr)["cached_tokens"].get<int>(), pinned["cache_pinned_tokens"].get<int>())
      << "the pinned prefix was evicted";
  EXPECT_LT(ask(story("Tom"), nullptr)["cached_tokens"].get<int>(), server.engine().describe().block_size)
      << "the unpinned prefix survived";
}

// A chat's breakpoint shows in its usage, streamed (include_usage) or not.
TEST(OpenAICacheControls, ChatUsageReportsThePin) {
  TestServer server;
  if (!server.ok()) GTEST_SKIP() << "stories260K.gguf not found";
  auto c = server.client();
  json body = chat_body({{"mode", "explicit"}, {"ttl", "12h"}}, nullptr);
  body["prompt_cache_options"] = {{"mode", "explicit"}};
  const HttpResult r = post(*c, "/v1/chat/completions", body);
  ASSERT_EQ(r.status, 200) << r.body;
  const json details = r.body_json()["usage"]["prompt_tokens_details"];
  EXPECT_EQ(details["cache_pin_ttl_seconds"], 12 * 3600) << details;
  const int pinned = details["cache_pinned_tokens"].get<int>();
  EXPECT_GE(pinned, 0);
  EXPECT_LT(pinned, r.body_json()["usage"]["prompt_tokens"].get<int>());
  EXPECT_EQ(pinned % server.engine().describe().block_size, 0);
  body["stream"] = true;
  body["stream_options"] = {{"include_usage", true}};
  bool seen = false;
  for (const SseEvent& e : parse_sse(post(*c, "/v1/chat/completions", body).body)) {
    const json d = json::parse(e.data, nullptr, false);
    if (d.is_object() && d.contains("usage") && d["usage"].is_object()) {
      seen = true;
      EXPECT_EQ(d["usage"]["prompt_tokens_details"]["cache_pinned_tokens"], pinned) << e.data;
    }
  }
  EXPECT_TRUE(seen);
}

}  // namespace
}  // namespace preface::test
