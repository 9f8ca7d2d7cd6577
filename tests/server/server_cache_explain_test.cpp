// The cache explainer over HTTP (POST /v1/cache/explain, "cache_explain": true, X-Preface-Cache-Explain): each
// reason from a real scenario (never seen, edited token, full hit, partial block, eviction, TTL expiry, another
// salt of the same tenant), and no answer that depends on another tenant's cache.
#include <atomic>
#include <chrono>

#include "server_harness.h"

namespace preface::test {
namespace {

using namespace std::chrono_literals;

constexpr int32_t kBlock = 16;  // TestServerConfig's engine block size

const std::string kStory =
    "Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her friends. "
    "One day, she saw a big red ball under a tree. She wanted to play with it, but it was too high.";

HttpResult post_as(httplib::Client& c, const std::string& path, const json& body, const std::string& key) {
  httplib::Headers h;
  if (!key.empty()) h.emplace("Authorization", "Bearer " + key);
  HttpResult r;
  if (auto res = c.Post(path.c_str(), h, body.dump(), "application/json")) {
    r.status = res->status;
    r.body = res->body;
    r.headers = res->headers;
  }
  return r;
}

json explain(httplib::Client& c, const json& body, const std::string& key = "") {
  const HttpResult r = post_as(c, "/v1/cache/explain", body, key);
  EXPECT_EQ(r.status, 200) << r.body;
  return r.body_json();
}

void complete(httplib::Client& c, const std::vector<int32_t>& prompt, const std::string& key = "",
              const std::string& salt = "") {
  json body = {{"prompt", prompt}, {"max_tokens", 2}, {"temperature", 0}};
  if (!salt.empty()) body["cache_salt"] = salt;
  const HttpResult r = post_as(c, "/v1/completions", body, key);
  ASSERT_EQ(r.status, 200) << r.body;
}

TEST(ServerCacheExplain, NeverSeenThenHitThenAnEditedToken) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  auto c = s.client();
  const std::vector<int32_t> prompt = s.tokenizer().encode(kStory, true, false);
  ASSERT_GT(prompt.size(), 3u * kBlock);

  json e = explain(*c, {{"tokens", prompt}});
  EXPECT_EQ(e["reason"], "never_seen");
  EXPECT_EQ(e["cached_tokens"], 0);
  EXPECT_EQ(e["prompt_tokens"], prompt.size());
  EXPECT_EQ(e["diverged_at"], 0);
  EXPECT_TRUE(e["cached_token"].is_null());
  EXPECT_EQ(e["new_token"]["id"], prompt[0]);

  complete(*c, prompt);
  const int32_t n_cacheable = static_cast<int32_t>(prompt.size() - 1) / kBlock * kBlock;
  e = explain(*c, {{"tokens", prompt}});
  EXPECT_EQ(e["reason"], (prompt.size() - 1) % kBlock == 0 ? "full_hit" : "partial_block") << e.dump();
  EXPECT_EQ(e["cached_tokens"], n_cacheable);
  EXPECT_TRUE(e["diverged_at"].is_null());

  std::vector<int32_t> edited = prompt;
  const size_t k = kBlock + 5;
  edited[k] = prompt[k] == 100 ? 101 : 100;
  e = explain(*c, {{"tokens", edited}});
  EXPECT_EQ(e["reason"], "never_seen") << e.dump();
  EXPECT_EQ(e["diverged_at"], k);
  EXPECT_EQ(e["cached_token"]["id"], prompt[k]);
  EXPECT_EQ(e["cached_token"]["text"], s.tokenizer().token_to_bytes(prompt[k]));
  EXPECT_EQ(e["new_token"]["id"], edited[k]);
  EXPECT_EQ(e["cached_tokens"], k);  // block 0 and the copy-on-write part of block 1
  EXPECT_NE(e["detail"].get<std::string>().find("differs from the cached prefix at token " + std::to_string(k)),
            std::string::npos) << e["detail"];

  // The same prompt as text, as a completion request, explains the same way.
  const json as_text = explain(*c, {{"prompt", kStory}});
  EXPECT_EQ(as_text["cached_tokens"], n_cacheable);
}

TEST(ServerCacheExplain, PerRequestFieldAndHeaderAlsoOnStreams) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  auto c = s.client();
  const std::vector<int32_t> prompt = s.tokenizer().encode(kStory, true, false);
  complete(*c, prompt);
  HttpResult r = post(*c, "/v1/completions", json{{"prompt", prompt}, {"max_tokens", 2}, {"cache_explain", true}});
  ASSERT_EQ(r.status, 200) << r.body;
  const json body = r.body_json();
  ASSERT_TRUE(body.contains("cache_explain")) << r.body;
  EXPECT_EQ(body["cache_explain"]["cached_tokens"], body["usage"]["prompt_tokens_details"]["cached_tokens"]);
  EXPECT_NE(r.headers.find("X-Preface-Cache-Explain"), r.headers.end());

  httplib::Headers h{{"X-Preface-Cache-Explain", "1"}};
  auto res = c->Post("/v1/chat/completions", h,
                     json{{"messages", {{{"role", "user"}, {"content", kStory}}}}, {"max_tokens", 2},
                          {"stream", true}}
                         .dump(),
                     "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  // The chat render shares only BOS with the completion's prompt (one copy-on-write token).
  EXPECT_EQ(res->get_header_value("X-Preface-Cache-Explain"), "reason=never_seen; cached_tokens=1; diverged_at=1");
  // Without the opt-in, neither appears.
  r = post(*c, "/v1/completions", json{{"prompt", prompt}, {"max_tokens", 2}});
  EXPECT_FALSE(r.body_json().contains("cache_explain"));
  EXPECT_EQ(r.headers.find("X-Preface-Cache-Explain"), r.headers.end());
}

TEST(ServerCacheExplain, EvictedUnderATinyPool) {
  TestServerConfig cfg;
  cfg.engine.kv_cache_bytes = 0;  // replaced below: room for about 12 blocks
  TestServer probe;
  ASSERT_TRUE(probe.ok());
  const uint64_t block_bytes = probe.engine().describe().kv_bytes / probe.engine().describe().n_kv_blocks;
  probe.stop();
  cfg.engine.kv_cache_bytes = 12 * block_bytes;
  TestServer s(cfg);
  ASSERT_TRUE(s.ok());
  auto c = s.client();
  const std::vector<int32_t> a = s.tokenizer().encode(kStory, true, false);
  complete(*c, a);
  for (const char* other : {"The cat sat on the mat and looked at the bird in the tall green tree for a long time.",
                            "A dog ran across the field to find the ball that the boy threw over the old fence.",
                            "The sun was warm and the sky was blue, so the children went to the beach to swim."}) {
    complete(*c, s.tokenizer().encode(std::string(other) + " " + other, true, false));
  }
  ASSERT_GT(s.engine().counters().n_evictions, 0);
  const json e = explain(*c, {{"tokens", a}});
  EXPECT_EQ(e["reason"], "evicted") << e.dump();
  EXPECT_GE(e["removed_seconds_ago"].get<double>(), 0.0);
  EXPECT_NE(e["detail"].get<std::string>().find("blocks were in use"), std::string::npos) << e["detail"];
}

TEST(ServerCacheExplain, ExpiredByTheCacheTtl) {
  static std::atomic<int64_t> fake_ms{0};
  TestServerConfig cfg;
  cfg.engine.cache_ttl = 10s;
  cfg.engine.clock = [] { return std::chrono::steady_clock::time_point{} + std::chrono::milliseconds(fake_ms.load()); };
  TestServer s(cfg);
  ASSERT_TRUE(s.ok());
  auto c = s.client();
  const std::vector<int32_t> a = s.tokenizer().encode(kStory, true, false);
  complete(*c, a);
  fake_ms += 60000;
  complete(*c, s.tokenizer().encode("Something else entirely, to run one more step.", true, false));
  const json e = explain(*c, {{"tokens", a}});
  EXPECT_EQ(e["reason"], "expired") << e.dump();
  EXPECT_NEAR(e["removed_seconds_ago"].get<double>(), 0.0, 1.0);
}

// Tenant B's cache never changes what tenant A is told; A's own other salt is named.
TEST(ServerCacheExplain, OtherTenantsAreInvisibleOwnSaltsAreNamed) {
  TestServerConfig cfg;
  cfg.server.api_keys = {{"key-a", "alice"}, {"key-b", "bob"}};
  TestServer s(cfg);
  ASSERT_TRUE(s.ok());
  auto c = s.client();
  const std::vector<int32_t> p = s.tokenizer().encode(kStory, true, false);
  const json before = explain(*c, {{"tokens", p}}, "key-a");
  complete(*c, p, "key-b");
  const json after = explain(*c, {{"tokens", p}}, "key-a");
  EXPECT_EQ(before, after);
  EXPECT_EQ(after["reason"], "never_seen");
  EXPECT_EQ(after["cached_tokens"], 0);
  EXPECT_EQ(explain(*c, {{"tokens", p}}, "key-b")["cached_tokens"].get<int>(), (static_cast<int>(p.size()) - 1) / kBlock * kBlock);

  complete(*c, p, "key-a", "project-x");
  const json other_salt = explain(*c, {{"tokens", p}}, "key-a");
  EXPECT_EQ(other_salt["reason"], "other_namespace") << other_salt.dump();
  EXPECT_NE(other_salt["detail"].get<std::string>().find("cache_salt"), std::string::npos);
  EXPECT_EQ(post_as(*c, "/v1/cache/explain", {{"tokens", p}}, "").status, 401);
}

TEST(ServerCacheExplain, ChatAndAnthropicBodiesAndBadInput) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  auto c = s.client();
  const json chat = {{"messages", {{{"role", "user"}, {"content", kStory}}}}};
  HttpResult r = post(*c, "/v1/chat/completions", json{{"messages", chat["messages"]}, {"max_tokens", 2}});
  ASSERT_EQ(r.status, 200);
  const int cached = explain(*c, chat)["cached_tokens"];
  EXPECT_GT(cached, 0);
  const json anthropic = {{"system", "Be brief."}, {"messages", {{{"role", "user"}, {"content", kStory}}}}};
  EXPECT_EQ(explain(*c, anthropic)["reason"], "never_seen");  // another render: the system turn comes first
  EXPECT_EQ(post(*c, "/v1/cache/explain", json{{"tokens", {1, -5}}}).status, 400);
  EXPECT_EQ(post(*c, "/v1/cache/explain", json{{"tokens", json::array()}}).status, 400);
  EXPECT_EQ(post(*c, "/v1/cache/explain", "[1, 2").status, 400);
}

}  // namespace
}  // namespace preface::test
