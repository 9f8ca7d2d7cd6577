// The OpenAI and Anthropic endpoints end to end over HTTP on stories260K: response shapes, streaming that
// matches the non-streamed text, stop strings that span tokens, logprobs, Anthropic's event sequence, and the
// operations endpoints (/health, /v1/models, /tokenize, /detokenize).
#include <algorithm>
#include <cmath>

#include "server/api/anthropic_api.h"
#include "server/api/generation.h"
#include "server_harness.h"

namespace preface::test {
namespace {

class ServerApi : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = new TestServer(); }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override {
    ASSERT_TRUE(server_->ok());
    client_ = server_->client();
  }

  // The greedy continuation of `prompt` computed on the engine directly (no HTTP), as text.
  std::string engine_greedy(const std::string& prompt, int32_t n_new) {
    const Tokenizer& tok = server_->tokenizer();
    engine::RequestParams p;
    p.prompt = tok.encode(prompt, tok.add_bos_default(), true);
    p.max_new_tokens = n_new;
    auto stream = server_->engine().submit(p);
    StreamDecoder dec(tok, false);
    std::string text;
    while (auto ev = stream->next()) text += dec.push(ev->token);
    return text + dec.flush();
  }

  static TestServer* server_;
  std::unique_ptr<httplib::Client> client_;
};

TestServer* ServerApi::server_ = nullptr;

const char* kPrompt = "Once upon a time, there was a little girl named Lily. She loved to play";

TEST_F(ServerApi, HealthAndModels) {
  EXPECT_EQ(get(*client_, "/health").status, 200);
  const HttpResult models = get(*client_, "/v1/models");
  ASSERT_EQ(models.status, 200);
  const json j = models.body_json();
  EXPECT_EQ(j["object"], "list");
  ASSERT_EQ(j["data"].size(), 1u);
  EXPECT_EQ(j["data"][0]["id"], "stories260K.gguf");
  EXPECT_EQ(j["data"][0]["object"], "model");
  const HttpResult one = get(*client_, "/v1/models/stories260K.gguf");
  ASSERT_EQ(one.status, 200) << one.body;
  EXPECT_EQ(one.body_json(), j["data"][0]);
  const HttpResult other = get(*client_, "/v1/models/gpt-4o");
  EXPECT_EQ(other.status, 404) << other.body;
  EXPECT_EQ(other.body_json()["error"]["code"], "model_not_found");
}

// llama.cpp's field names: n_predict (-1: the default) and repeat_penalty.
TEST_F(ServerApi, LlamaCppFieldAliases) {
  const HttpResult r = post(*client_, "/v1/completions", json{{"prompt", kPrompt}, {"n_predict", 3}, {"repeat_penalty", 1.1}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body_json()["usage"]["completion_tokens"], 3);
  const HttpResult bad = post(*client_, "/v1/completions", json{{"prompt", kPrompt}, {"repeat_penalty", 0}});
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(bad.body_json()["error"]["param"], "repeat_penalty");
}

// Fields that change the output and are not implemented are a 400 naming them, unless sent neutral.
TEST_F(ServerApi, UnsupportedSamplingFieldsAre400UnlessNeutral) {
  const std::pair<json, const char*> refused[] = {
      {json{{"mirostat", 2}}, "mirostat"},           {json{{"typical_p", 0.9}}, "typical_p"},
      {json{{"dry_multiplier", 0.8}}, "dry_multiplier"}, {json{{"min_tokens", 4}}, "min_tokens"},
      {json{{"skip_special_tokens", false}}, "skip_special_tokens"}, {json{{"n_probs", 3}}, "n_probs"},
      {json{{"bad_words", {"x"}}}, "bad_words"}};
  for (const auto& [extra, name] : refused) {
    json body = {{"prompt", kPrompt}, {"max_tokens", 2}};
    body.update(extra);
    const HttpResult r = post(*client_, "/v1/completions", body);
    EXPECT_EQ(r.status, 400) << extra;
    EXPECT_EQ(r.body_json()["error"]["param"], name) << r.body;
  }
  json neutral = {{"prompt", kPrompt}, {"max_tokens", 2}, {"mirostat", 0}, {"typical_p", 1.0}, {"dry_multiplier", 0},
                  {"min_tokens", 0}, {"skip_special_tokens", true}, {"n_probs", 0}, {"bad_words", json::array()},
                  {"prompt_logprobs", nullptr}};
  EXPECT_EQ(post(*client_, "/v1/completions", neutral).status, 200);
}

TEST_F(ServerApi, CompletionMatchesEngineAndStreamMatchesFull) {
  const std::string expected = engine_greedy(kPrompt, 24);
  ASSERT_FALSE(expected.empty());
  json req = {{"model", "stories260K.gguf"}, {"prompt", kPrompt}, {"max_tokens", 24}, {"temperature", 0}};
  const HttpResult full = post(*client_, "/v1/completions", req);
  ASSERT_EQ(full.status, 200) << full.body;
  const json j = full.body_json();
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["model"], "stories260K.gguf");
  EXPECT_EQ(j["id"].get<std::string>().rfind("cmpl-", 0), 0u);
  ASSERT_EQ(j["choices"].size(), 1u);
  EXPECT_EQ(j["choices"][0]["text"], expected);
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  const auto n_prompt = static_cast<int>(server_->tokenizer().encode(kPrompt, true, true).size());
  EXPECT_EQ(j["usage"]["prompt_tokens"], n_prompt);
  EXPECT_EQ(j["usage"]["completion_tokens"], 24);
  EXPECT_EQ(j["usage"]["total_tokens"], n_prompt + 24);
  EXPECT_TRUE(j["usage"]["prompt_tokens_details"]["cached_tokens"].is_number_integer());
  EXPECT_TRUE(j["usage"]["prompt_tokens_details"]["cache_write_tokens"].is_number_integer());

  req["stream"] = true;
  req["stream_options"] = {{"include_usage", true}};
  const HttpResult streamed = post(*client_, "/v1/completions", req);
  ASSERT_EQ(streamed.status, 200);
  bool done = false;
  const std::vector<json> chunks = openai_chunks(streamed.body, &done);
  EXPECT_TRUE(done);
  ASSERT_GE(chunks.size(), 3u);
  std::string text;
  for (size_t i = 0; i + 1 < chunks.size(); ++i) text += chunks[i]["choices"][0]["text"].get<std::string>();
  EXPECT_EQ(text, expected);
  EXPECT_EQ(chunks[chunks.size() - 2]["choices"][0]["finish_reason"], "length");
  const json& usage_chunk = chunks.back();
  EXPECT_TRUE(usage_chunk["choices"].empty());
  EXPECT_EQ(usage_chunk["usage"]["completion_tokens"], 24);
  EXPECT_EQ(usage_chunk["usage"]["prompt_tokens"], n_prompt);
}

TEST_F(ServerApi, ChatStreamMatchesFull) {
  json req = {{"messages", {{{"role", "system"}, {"content", "You tell stories."}},
                            {{"role", "user"}, {"content", {{{"type", "text"}, {"text", "Tell me about a cat."}}}}}}},
              {"max_completion_tokens", 20},
              {"temperature", 0}};
  const HttpResult full = post(*client_, "/v1/chat/completions", req);
  ASSERT_EQ(full.status, 200) << full.body;
  const json j = full.body_json();
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["choices"][0]["message"]["role"], "assistant");
  const std::string content = j["choices"][0]["message"]["content"];
  EXPECT_FALSE(content.empty());
  EXPECT_EQ(j["usage"]["completion_tokens"], 20);

  req["stream"] = true;
  const HttpResult streamed = post(*client_, "/v1/chat/completions", req);
  ASSERT_EQ(streamed.status, 200);
  EXPECT_EQ(streamed.headers.find("Content-Type")->second, "text/event-stream");
  bool done = false;
  const std::vector<json> chunks = openai_chunks(streamed.body, &done);
  EXPECT_TRUE(done);
  ASSERT_GE(chunks.size(), 2u);
  EXPECT_EQ(chunks.front()["choices"][0]["delta"]["role"], "assistant");
  std::string text;
  for (const json& c : chunks) {
    EXPECT_EQ(c["object"], "chat.completion.chunk");
    EXPECT_EQ(c["id"], chunks.front()["id"]);
    if (c["choices"][0]["delta"].contains("content")) text += c["choices"][0]["delta"]["content"].get<std::string>();
  }
  EXPECT_EQ(text, content);
  EXPECT_EQ(chunks.back()["choices"][0]["finish_reason"], "length");
  EXPECT_FALSE(chunks.back().contains("usage"));  // no include_usage
}

// A stop string that straddles a token boundary ends the text right before it, streamed or not.
TEST_F(ServerApi, StopStringSpanningTokens) {
  const Tokenizer& tok = server_->tokenizer();
  engine::RequestParams p;
  p.prompt = tok.encode(kPrompt, true, true);
  p.max_new_tokens = 30;
  auto stream = server_->engine().submit(p);
  std::vector<std::string> pieces;
  StreamDecoder dec(tok, false);
  while (auto ev = stream->next()) pieces.push_back(dec.push(ev->token));
  ASSERT_GE(pieces.size(), 12u);
  std::string all;
  for (const std::string& piece : pieces) all += piece;
  // The first token boundary where "last 2 bytes of token b + first 2 bytes of token b+1" first occurs exactly
  // there: that string can only be matched across the two tokens.
  std::string stop, expected;
  size_t offset = 0;
  for (size_t b = 0; b + 1 < pieces.size() && stop.empty(); ++b) {
    offset += pieces[b].size();
    if (b < 4 || pieces[b].size() < 2 || pieces[b + 1].size() < 2) continue;
    const std::string candidate = all.substr(offset - 2, 4);
    if (all.find(candidate) == offset - 2) {
      stop = candidate;
      expected = all.substr(0, offset - 2);
    }
  }
  ASSERT_FALSE(stop.empty()) << all;

  json req = {{"prompt", kPrompt}, {"max_tokens", 30}, {"temperature", 0}, {"stop", {"zzz-never", stop}}};
  const HttpResult full = post(*client_, "/v1/completions", req);
  ASSERT_EQ(full.status, 200) << full.body;
  EXPECT_EQ(full.body_json()["choices"][0]["text"], expected);
  EXPECT_EQ(full.body_json()["choices"][0]["finish_reason"], "stop");
  EXPECT_LT(full.body_json()["usage"]["completion_tokens"].get<int>(), 30);

  req["stream"] = true;
  bool done = false;
  const std::vector<json> chunks = openai_chunks(post(*client_, "/v1/completions", req).body, &done);
  std::string text;
  for (const json& c : chunks) text += c["choices"][0]["text"].get<std::string>();
  EXPECT_EQ(text, expected);
  EXPECT_EQ(chunks.back()["choices"][0]["finish_reason"], "stop");
}

// `curl -d` sends application/x-www-form-urlencoded: the body is JSON all the same, whatever its size (httplib
// alone would parse it as a form and refuse one above 8 KiB with a false 413).
TEST_F(ServerApi, FormEncodedBodiesAreJson) {
  const std::string body = R"({"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2)" +
                           std::string(20000, ' ') + "}";
  for (const char* type : {"application/x-www-form-urlencoded", "text/plain", "application/json"}) {
    auto res = client_->Post("/v1/chat/completions", body, type);
    ASSERT_TRUE(res) << type;
    EXPECT_EQ(res->status, 200) << type << ": " << res->body;
  }
}

// --cors-origin: preflights answered without a key, allowed origins get Access-Control-Allow-Origin, others 403.
TEST(ServerCors, PreflightAndAllowedOrigins) {
  TestServerConfig cfg;
  cfg.server.cors_origins = {"http://localhost:3000"};
  cfg.server.api_keys = {{"key-a", "alice"}};
  TestServer server(cfg);
  if (!server.ok()) GTEST_SKIP() << "shared test data not found";
  auto c = server.client();
  httplib::Headers pre = {{"Origin", "http://localhost:3000"},
                          {"Access-Control-Request-Method", "POST"},
                          {"Access-Control-Request-Headers", "authorization, content-type"}};
  auto res = c->Options("/v1/chat/completions", pre);
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 204);
  EXPECT_EQ(res->get_header_value("Access-Control-Allow-Origin"), "http://localhost:3000");
  EXPECT_EQ(res->get_header_value("Access-Control-Allow-Headers"), "authorization, content-type");
  EXPECT_NE(res->get_header_value("Access-Control-Allow-Methods").find("POST"), std::string::npos);
  httplib::Headers call = {{"Origin", "http://localhost:3000"}, {"Authorization", "Bearer key-a"}};
  res = c->Post("/v1/completions", call, R"({"prompt": "Once", "max_tokens": 2})", "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200) << res->body;
  EXPECT_EQ(res->get_header_value("Access-Control-Allow-Origin"), "http://localhost:3000");
  res = c->Options("/v1/chat/completions", httplib::Headers{{"Origin", "http://evil.example"}});
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 403);
  EXPECT_EQ(res->get_header_value("Access-Control-Allow-Origin"), "");
}

TEST(StopMatcher, HoldsBackPossibleStarts) {
  server::StopMatcher m({"abc", "xy"});
  EXPECT_EQ(m.push("hello a"), "hello ");
  EXPECT_EQ(m.push("b"), "");
  EXPECT_EQ(m.push("d x"), "abd ");
  EXPECT_FALSE(m.matched());
  EXPECT_EQ(m.push("yz"), "");
  EXPECT_TRUE(m.matched());
  EXPECT_EQ(m.matched_stop(), "xy");
  server::StopMatcher n({"abc"});
  EXPECT_EQ(n.push("xxab"), "xx");
  EXPECT_EQ(n.flush(), "ab");
}

TEST_F(ServerApi, LogprobsAreConsistentWithGreedy) {
  json req = {{"messages", {{{"role", "user"}, {"content", "Hello"}}}},
              {"max_tokens", 8},
              {"temperature", 0},
              {"logprobs", true},
              {"top_logprobs", 3}};
  const HttpResult r = post(*client_, "/v1/chat/completions", req);
  ASSERT_EQ(r.status, 200) << r.body;
  const json content = r.body_json()["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), 8u);
  for (const json& e : content) {
    ASSERT_EQ(e["top_logprobs"].size(), 3u);
    EXPECT_LE(e["logprob"].get<double>(), 0.0);
    // Greedy: the sampled token is the most likely one.
    EXPECT_EQ(e["token"], e["top_logprobs"][0]["token"]);
    EXPECT_EQ(e["logprob"], e["top_logprobs"][0]["logprob"]);
    EXPECT_GE(e["top_logprobs"][0]["logprob"].get<double>(), e["top_logprobs"][1]["logprob"].get<double>());
    EXPECT_TRUE(e["bytes"].is_array());
  }
  const HttpResult c = post(*client_, "/v1/completions",
                            json{{"prompt", kPrompt}, {"max_tokens", 5}, {"temperature", 0}, {"logprobs", 2}});
  ASSERT_EQ(c.status, 200) << c.body;
  const json lp = c.body_json()["choices"][0]["logprobs"];
  ASSERT_EQ(lp["tokens"].size(), 5u);
  ASSERT_EQ(lp["token_logprobs"].size(), 5u);
  ASSERT_EQ(lp["top_logprobs"].size(), 5u);
  EXPECT_EQ(lp["top_logprobs"][0].size(), 2u);
  EXPECT_EQ(lp["text_offset"][0], 0);
}

TEST_F(ServerApi, AnthropicMessagesAndEventSequence) {
  json req = {{"model", "stories260K.gguf"},
              {"max_tokens", 12},
              {"temperature", 0},
              {"system", "You tell stories."},
              {"messages", {{{"role", "user"}, {"content", "Once upon a time there was a dog."}}}}};
  const HttpResult full = post(*client_, "/v1/messages", req);
  ASSERT_EQ(full.status, 200) << full.body;
  const json j = full.body_json();
  EXPECT_EQ(j["type"], "message");
  EXPECT_EQ(j["role"], "assistant");
  EXPECT_EQ(j["id"].get<std::string>().rfind("msg_", 0), 0u);
  ASSERT_EQ(j["content"].size(), 1u);
  EXPECT_EQ(j["content"][0]["type"], "text");
  EXPECT_EQ(j["stop_reason"], "max_tokens");
  EXPECT_TRUE(j["stop_sequence"].is_null());
  const json& u = j["usage"];
  EXPECT_EQ(u["output_tokens"], 12);
  const HttpResult count = post(*client_, "/v1/messages/count_tokens", req);
  ASSERT_EQ(count.status, 200) << count.body;
  const int n_prompt = count.body_json()["input_tokens"];
  EXPECT_EQ(u["input_tokens"].get<int>() + u["cache_creation_input_tokens"].get<int>() +
                u["cache_read_input_tokens"].get<int>(),
            n_prompt);

  req["stream"] = true;
  const HttpResult streamed = post(*client_, "/v1/messages", req);
  ASSERT_EQ(streamed.status, 200);
  const std::vector<SseEvent> events = parse_sse(streamed.body);
  std::vector<std::string> names;
  std::string text;
  for (const SseEvent& ev : events) {
    const json data = json::parse(ev.data);
    EXPECT_EQ(data["type"], ev.event);
    if (names.empty() || names.back() != ev.event) names.push_back(ev.event);
    if (ev.event == "content_block_delta") text += data["delta"]["text"].get<std::string>();
    if (ev.event == "message_delta") {
      EXPECT_EQ(data["delta"]["stop_reason"], "max_tokens");
      EXPECT_EQ(data["usage"]["output_tokens"], 12);
      EXPECT_EQ(data["usage"]["input_tokens"].get<int>() + data["usage"]["cache_creation_input_tokens"].get<int>() +
                    data["usage"]["cache_read_input_tokens"].get<int>(),
                n_prompt);
    }
  }
  const std::vector<std::string> expected_order = {"message_start",       "content_block_start", "ping",
                                                   "content_block_delta", "content_block_stop",  "message_delta",
                                                   "message_stop"};
  EXPECT_EQ(names, expected_order);
  EXPECT_EQ(text, j["content"][0]["text"]);
}

TEST_F(ServerApi, AnthropicStopSequenceAndCacheControl) {
  json req = {{"max_tokens", 40},
              {"temperature", 0},
              {"system", {{{"type", "text"}, {"text", "You tell stories."}, {"cache_control", {{"type", "ephemeral"}, {"ttl", "1h"}}}}}},
              {"messages", {{{"role", "user"},
                             {"content", {{{"type", "text"},
                                           {"text", "Once upon a time there was a dog."},
                                           {"cache_control", {{"type", "ephemeral"}}}}}}}}}};
  const HttpResult first = post(*client_, "/v1/messages", req);
  ASSERT_EQ(first.status, 200) << first.body;
  const std::string text = first.body_json()["content"][0]["text"];
  ASSERT_GE(text.size(), 6u);
  req["stop_sequences"] = {text.substr(3, 3)};
  const HttpResult second = post(*client_, "/v1/messages", req);
  ASSERT_EQ(second.status, 200) << second.body;
  const json j = second.body_json();
  EXPECT_EQ(j["stop_reason"], "stop_sequence");
  EXPECT_EQ(j["stop_sequence"], text.substr(3, 3));
  EXPECT_EQ(j["content"][0]["text"], text.substr(0, text.find(text.substr(3, 3))));
  // The second request re-reads the prompt from the cache.
  EXPECT_GT(j["usage"]["cache_read_input_tokens"].get<int>(), 0);
}

// Each cache_control breakpoint becomes the prompt prefix that ends with its block: the decoded prefix holds the
// marked block's text and nothing of what follows it.
TEST_F(ServerApi, CacheControlBreakpointsResolveToPromptPrefixes) {
  server::Metrics metrics;
  server::ServerContext ctx(server_->engine(), server_->tokenizer(), chat::ChatTemplate::ChatML, "m", {}, false, {},
                            metrics);
  const json body = {
      {"max_tokens", 5},
      {"system", {{{"type", "text"}, {"text", "You tell stories."}, {"cache_control", {{"type", "ephemeral"}, {"ttl", "1h"}}}}}},
      {"messages", {{{"role", "user"},
                     {"content", {{{"type", "text"}, {"text", "The cat sat."}, {"cache_control", {{"type", "ephemeral"}}}},
                                  {{"type", "text"}, {"text", "The dog ran."}}}}}}}};
  const server::AnthropicRequest r = server::parse_messages_request(body, ctx);
  const std::vector<int32_t>& prompt = r.generation.params.prompt;
  ASSERT_EQ(r.generation.params.cache_pins.size(), 2u);
  const auto prefix_text = [&](int32_t n) {
    return server_->tokenizer().decode(std::vector<int32_t>(prompt.begin(), prompt.begin() + n));
  };
  const std::string p0 = prefix_text(r.generation.params.cache_pins[0].n_tokens);
  const std::string p1 = prefix_text(r.generation.params.cache_pins[1].n_tokens);
  EXPECT_EQ(r.generation.params.cache_pins[0].ttl.count(), 3600);
  EXPECT_EQ(r.generation.params.cache_pins[1].ttl.count(), 300);
  EXPECT_NE(p0.find("You tell stories."), std::string::npos) << p0;
  EXPECT_EQ(p0.find("cat"), std::string::npos) << p0;
  EXPECT_NE(p1.find("The cat sat."), std::string::npos) << p1;
  EXPECT_EQ(p1.find("dog"), std::string::npos) << p1;
  EXPECT_LT(r.generation.params.cache_pins[1].n_tokens, static_cast<int32_t>(prompt.size()));
}

TEST_F(ServerApi, TokenizeDetokenize) {
  const HttpResult t = post(*client_, "/tokenize", json{{"content", "Hello world"}, {"with_pieces", true}});
  ASSERT_EQ(t.status, 200) << t.body;
  const json tokens = t.body_json()["tokens"];
  ASSERT_FALSE(tokens.empty());
  json ids = json::array();
  for (const json& e : tokens) {
    ASSERT_TRUE(e.contains("piece"));
    ids.push_back(e["id"]);
  }
  const std::vector<int32_t> expected = server_->tokenizer().encode("Hello world", false, true);
  EXPECT_EQ(ids.get<std::vector<int32_t>>(), expected);
  const HttpResult d = post(*client_, "/detokenize", json{{"tokens", ids}});
  ASSERT_EQ(d.status, 200) << d.body;
  EXPECT_EQ(d.body_json()["content"], "Hello world");
  const HttpResult with_bos = post(*client_, "/tokenize", json{{"content", "Hello world"}, {"add_special", true}});
  EXPECT_EQ(with_bos.body_json()["tokens"].size(), expected.size() + 1);
}

}  // namespace
}  // namespace preface::test
