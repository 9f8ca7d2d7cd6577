// Prompt caching seen through the HTTP APIs: cached_tokens of a request sharing a prefix follows the block rules
// and its output equals a cold server's bit for bit (logprobs included); 16 concurrent streaming clients with
// overlapping prefixes each get exactly what they get alone; a client that disconnects mid-stream has its
// request cancelled and its blocks freed. Every server is stopped with the pool checked (no block in use).
#include <algorithm>
#include <atomic>
#include <barrier>
#include <thread>

#include "chat/chat_template.h"
#include "server_harness.h"

namespace preface::test {
namespace {

constexpr int32_t kBlock = 16;  // TestServerConfig's engine block size

const std::string kStory =
    "Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her friends. "
    "One day, she saw a big red ball under a tree. She wanted to play with it, but it was too high. Lily asked her "
    "mom for help. Her mom smiled and said, \"Let's get it together.\" They found a long stick and pushed the ball "
    "down. Lily was very happy. She said thank you to her mom and played with the ball all day.";

size_t common_prefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  return static_cast<size_t>(std::mismatch(a.begin(), a.end(), b.begin(), b.end()).first - a.begin());
}

// Text plus every per-token logprob record: equal outputs mean equal tokens and bit-equal logits.
struct StreamOutput {
  std::string text;
  json logprobs = json::array();
  std::string finish_reason;
  bool done = false;
};

StreamOutput stream_completion(httplib::Client& c, const json& request) {
  json req = request;
  req["stream"] = true;
  const HttpResult r = post(c, "/v1/completions", req);
  StreamOutput out;
  EXPECT_EQ(r.status, 200) << r.body << " httplib error " << r.error;
  for (const json& chunk : openai_chunks(r.body, &out.done)) {
    const json& choice = chunk["choices"][0];
    out.text += choice["text"].get<std::string>();
    if (choice["logprobs"].is_object()) {
      for (size_t i = 0; i < choice["logprobs"]["tokens"].size(); ++i) {
        out.logprobs.push_back({choice["logprobs"]["tokens"][i], choice["logprobs"]["token_logprobs"][i],
                                choice["logprobs"]["top_logprobs"][i]});
      }
    }
    if (choice["finish_reason"].is_string()) out.finish_reason = choice["finish_reason"];
  }
  return out;
}

TEST(ServerCache, SharedPrefixIsCachedAndOutputMatchesColdServer) {
  TestServer warm;
  ASSERT_TRUE(warm.ok());
  const Tokenizer& tok = warm.tokenizer();
  const std::string a = kStory + " The end.";
  const std::string b = kStory + " Then they went home and had a nap.";
  const std::vector<int32_t> ta = tok.encode(a, true, true), tb = tok.encode(b, true, true);
  const auto n_shared = static_cast<int32_t>(common_prefix(ta, tb));
  ASSERT_GT(n_shared, 3 * kBlock);
  constexpr int32_t kNew = 10;
  auto c = warm.client();
  const json req_a = {{"prompt", a}, {"max_tokens", kNew}, {"temperature", 0}, {"ignore_eos", true}};
  const HttpResult ra = post(*c, "/v1/completions", req_a);
  ASSERT_EQ(ra.status, 200) << ra.body;
  EXPECT_EQ(ra.body_json()["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  EXPECT_EQ(ra.body_json()["usage"]["prompt_tokens_details"]["cache_write_tokens"],
            static_cast<int32_t>(ta.size()) / kBlock * kBlock);

  // Block rules: whole blocks of the shared prefix hit; the rows of the block holding the divergence point are
  // copied (copy-on-write) when a's request filled and registered that block. a computed ta.size() + kNew - 1
  // tokens.
  const int32_t n_full = n_shared / kBlock * kBlock;
  const bool partial_block_registered = n_full + kBlock <= static_cast<int32_t>(ta.size()) + kNew - 1;
  const int32_t expected_cached =
      std::min(partial_block_registered ? n_shared : n_full, static_cast<int32_t>(tb.size()) - 1);
  const json req_b = {{"prompt", b}, {"max_tokens", kNew}, {"temperature", 0}, {"logprobs", 3}};
  const HttpResult rb = post(*c, "/v1/completions", req_b);
  ASSERT_EQ(rb.status, 200) << rb.body;
  const json usage = rb.body_json()["usage"];
  EXPECT_EQ(usage["prompt_tokens"], static_cast<int32_t>(tb.size()));
  EXPECT_EQ(usage["prompt_tokens_details"]["cached_tokens"], expected_cached) << "shared prefix " << n_shared;
  EXPECT_GE(usage["prompt_tokens_details"]["cached_tokens"].get<int32_t>(), n_shared - 1);

  // The same request on a cold server: identical text, finish reason and logprobs (so identical logits).
  TestServer cold;
  ASSERT_TRUE(cold.ok());
  auto cc = cold.client();
  const HttpResult rb_cold = post(*cc, "/v1/completions", req_b);
  ASSERT_EQ(rb_cold.status, 200);
  EXPECT_EQ(rb_cold.body_json()["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  EXPECT_EQ(rb.body_json()["choices"], rb_cold.body_json()["choices"]);

  // A different cache_salt shares nothing.
  json salted = req_b;
  salted["cache_salt"] = "tenant-2";
  const HttpResult rs = post(*c, "/v1/completions", salted);
  EXPECT_EQ(rs.body_json()["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  EXPECT_EQ(rs.body_json()["choices"], rb_cold.body_json()["choices"]);
}

// The next turn of a conversation re-reads the previous turn's prompt from the cache.
TEST(ServerCache, ChatNextTurnHitsPreviousTurn) {
  TestServer srv;
  ASSERT_TRUE(srv.ok());
  auto c = srv.client();
  json messages = {{{"role", "system"}, {"content", "You tell stories to children."}},
                   {{"role", "user"}, {"content", kStory}}};
  const HttpResult t1 = post(*c, "/v1/chat/completions", json{{"messages", messages}, {"max_tokens", 12}, {"temperature", 0}});
  ASSERT_EQ(t1.status, 200) << t1.body;
  messages.push_back({{"role", "assistant"}, {"content", t1.body_json()["choices"][0]["message"]["content"]}});
  messages.push_back({{"role", "user"}, {"content", "What happened next?"}});
  const HttpResult t2 = post(*c, "/v1/chat/completions", json{{"messages", messages}, {"max_tokens", 12}, {"temperature", 0}});
  ASSERT_EQ(t2.status, 200) << t2.body;

  std::vector<chat::ChatMessage> m1, m2;
  for (size_t i = 0; i < messages.size(); ++i) {
    chat::ChatMessage m{messages[i]["role"], messages[i]["content"]};
    if (i < 2) m1.push_back(m);
    m2.push_back(m);
  }
  const auto p1 = chat::render_chat_tokens(srv.tokenizer(), chat::ChatTemplate::ChatML, m1, true);
  const auto p2 = chat::render_chat_tokens(srv.tokenizer(), chat::ChatTemplate::ChatML, m2, true);
  EXPECT_EQ(t1.body_json()["usage"]["prompt_tokens"], static_cast<int32_t>(p1.size()));
  EXPECT_EQ(t2.body_json()["usage"]["prompt_tokens"], static_cast<int32_t>(p2.size()));
  const auto shared = static_cast<int32_t>(common_prefix(p1, p2));
  EXPECT_GE(t2.body_json()["usage"]["prompt_tokens_details"]["cached_tokens"].get<int32_t>(), shared / kBlock * kBlock);
  EXPECT_GT(shared, static_cast<int32_t>(p1.size()) - kBlock);
}

TEST(ServerCache, SixteenConcurrentStreamsMatchServedAlone) {
  constexpr int kClients = 16;
  std::vector<json> requests;
  for (int i = 0; i < kClients; ++i) {
    const int group = i % 4;
    std::string prompt = kStory.substr(0, 120 + 60 * group) + " Then friend number " + std::to_string(i) + " came.";
    json r = {{"prompt", prompt}, {"max_tokens", 24}, {"logprobs", 2}, {"ignore_eos", true}};
    if (i % 2 == 0) {
      r["temperature"] = 0;
    } else {
      r["temperature"] = 0.9;
      r["seed"] = 1000 + i;
      r["top_k"] = 40;
    }
    requests.push_back(r);
  }
  std::vector<StreamOutput> alone(kClients);
  {
    TestServer ref;
    ASSERT_TRUE(ref.ok());
    auto c = ref.client();
    for (int i = 0; i < kClients; ++i) alone[static_cast<size_t>(i)] = stream_completion(*c, requests[static_cast<size_t>(i)]);
  }
  TestServer srv;
  ASSERT_TRUE(srv.ok());
  std::vector<StreamOutput> together(kClients);
  std::barrier sync(kClients);
  std::vector<std::thread> threads;
  std::atomic<int> n_finished{0};
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&, i] {
      auto c = srv.client();
      sync.arrive_and_wait();
      together[static_cast<size_t>(i)] = stream_completion(*c, requests[static_cast<size_t>(i)]);
      n_finished++;
    });
  }
  int32_t max_running = 0;
  while (n_finished.load() < kClients) {
    max_running = std::max(max_running, srv.engine().counters().n_running);
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  for (auto& t : threads) t.join();
  EXPECT_GT(max_running, 1) << "the requests never ran at the same time";
  for (int i = 0; i < kClients; ++i) {
    const auto& a = alone[static_cast<size_t>(i)];
    const auto& t = together[static_cast<size_t>(i)];
    EXPECT_TRUE(a.done && t.done) << i;
    EXPECT_EQ(t.text, a.text) << "client " << i;
    EXPECT_EQ(t.logprobs, a.logprobs) << "client " << i;
    EXPECT_EQ(t.logprobs.size(), 24u) << "client " << i;
  }
  const auto counters = srv.engine().counters();
  EXPECT_GT(counters.prefix.n_hit_tokens + counters.prefix.n_partial_hit_tokens, 0);
}

TEST(ServerCache, DisconnectMidStreamCancelsAndFreesBlocks) {
  TestServer srv;
  ASSERT_TRUE(srv.ok());
  auto c = srv.client();
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/chat/completions";
  req.body = json{{"messages", {{{"role", "user"}, {"content", kStory}}}},
                  {"max_tokens", 1500},
                  {"ignore_eos", true},
                  {"stream", true}}
                 .dump();
  req.set_header("Content-Type", "application/json");
  int n_chunks = 0;
  req.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) { return ++n_chunks < 5; };
  httplib::Response res;
  httplib::Error err;
  c->send(req, res, err);
  EXPECT_EQ(n_chunks, 5);
  c.reset();  // the connection is gone
  EXPECT_TRUE(wait_for([&] {
    const auto k = srv.engine().counters();
    return srv.server().n_in_flight() == 0 && k.n_running == 0 && k.n_waiting == 0 && k.n_blocks_in_use == 0;
  })) << "the disconnected request still holds blocks";
  auto c2 = srv.client();
  const std::string metrics = get(*c2, "/metrics").body;
  EXPECT_NE(metrics.find("preface_generations_total{finish=\"cancelled\"} 1"), std::string::npos) << metrics;
  EXPECT_EQ(post(*c2, "/v1/completions", json{{"prompt", "Once"}, {"max_tokens", 2}}).status, 200);
}

}  // namespace
}  // namespace preface::test
