// What a proxy or Kubernetes reads (issue 45 items 3 and 4): /health (readiness) answers 503 "draining" once a
// drain began, and a request that was arriving on an open connection is still served then (not refused);
// /livez (liveness) and /health answer 503 "stalled" while one engine step runs past --liveness-timeout and 200
// again after; behind a trusted proxy the per-client limit counts the forwarded clients, and the request log
// names them.
#include <chrono>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/fault_backend.h"
#include "raw_http.h"
#include "server_harness.h"

namespace preface::test {
namespace {

TestServerConfig with_step_delay(std::chrono::milliseconds delay) {
  TestServerConfig cfg;
  cfg.backend = [delay](model::Model& m, const engine::EngineConfig& c) -> std::unique_ptr<engine::Backend> {
    auto b = std::make_unique<FaultBackend>(m, c, -1);
    b->forward_delay = delay;
    return b;
  };
  return cfg;
}

std::string completion(int max_tokens, bool stream, const std::string& extra_headers = "") {
  const std::string body = json{{"prompt", "Once upon a time"},
                                {"max_tokens", max_tokens},
                                {"ignore_eos", true},
                                {"stream", stream}}
                               .dump();
  return "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" + extra_headers +
         "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

TEST(ServerProbes, ADrainAnswersHealth503AndServesWhatWasArriving) {
  TestServer server(with_step_delay(std::chrono::milliseconds(20)));
  if (!server.ok()) GTEST_FAIL() << "needs ../shared/models/stories260K.gguf";
  // A stream keeps the drain going; two requests are half sent when it begins.
  auto stream = std::async(std::launch::async, [&] {
    auto c = server.client();
    return post(*c, "/v1/completions", json{{"prompt", "A"}, {"max_tokens", 60}, {"ignore_eos", true}, {"stream", true}});
  });
  ASSERT_TRUE(wait_for([&] { return server.engine().counters().n_running == 1; }));
  const int health = connect_from("127.0.0.1", server.port());
  const int gen = connect_from("127.0.0.1", server.port());
  ASSERT_GE(health, 0);
  ASSERT_GE(gen, 0);
  const std::string health_req = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n";
  const std::string gen_req = completion(4, false);
  ASSERT_TRUE(send_all(health, health_req.substr(0, 10)));
  ASSERT_TRUE(send_all(gen, gen_req.substr(0, 40)));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // both connections are being served
  auto drained = std::async(std::launch::async, [&] { return server.server().drain(std::chrono::seconds(30)); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_TRUE(send_all(health, health_req.substr(10)));
  ASSERT_TRUE(send_all(gen, gen_req.substr(40)));
  const std::string h = read_to_close(health);
  const std::string g = read_to_close(gen);
  ::close(health);
  ::close(gen);
  EXPECT_EQ(final_status(h), 503) << h;
  EXPECT_NE(h.find("\"draining\""), std::string::npos) << h;
  EXPECT_EQ(final_status(g), 200) << g;
  EXPECT_NE(g.find("Connection: close"), std::string::npos) << g;
  EXPECT_NE(g.find("\"text_completion\""), std::string::npos) << g;
  EXPECT_EQ(stream.get().status, 200);
  EXPECT_EQ(drained.get(), 0);
}

TEST(ServerProbes, LivezAndHealthSay503WhileAStepRunsPastTheLivenessTimeout) {
  TestServerConfig cfg = with_step_delay(std::chrono::milliseconds(400));
  cfg.server.liveness_timeout_s = 0.1;
  TestServer server(cfg);
  if (!server.ok()) GTEST_FAIL() << "needs ../shared/models/stories260K.gguf";
  auto c = server.client();
  const HttpResult idle = get(*c, "/livez");
  EXPECT_EQ(idle.status, 200) << idle.body;
  EXPECT_EQ(idle.body_json()["status"], "alive") << idle.body;
  EXPECT_EQ(get(*c, "/health").status, 200);
  auto gen = std::async(std::launch::async, [&] {
    auto g = server.client();
    return post(*g, "/v1/completions", json{{"prompt", "A"}, {"max_tokens", 6}, {"ignore_eos", true}});
  });
  HttpResult stalled, unready;
  EXPECT_TRUE(wait_for([&] { return (stalled = get(*c, "/livez")).status == 503; })) << "never stalled";
  EXPECT_EQ(stalled.body_json()["status"], "stalled") << stalled.body;
  EXPECT_GT(stalled.body_json()["step_seconds"].get<double>(), 0.1) << stalled.body;
  EXPECT_TRUE(wait_for([&] { return (unready = get(*c, "/health")).status == 503; })) << "/health stayed 200";
  EXPECT_EQ(unready.body_json()["status"], "stalled") << unready.body;
  EXPECT_EQ(gen.get().status, 200);
  // The reply can reach the client while the engine's last step (delayed too) still runs: alive again once it ends.
  EXPECT_TRUE(wait_for([&] { return get(*c, "/livez").status == 200; })) << "stayed stalled";
  EXPECT_TRUE(wait_for([&] { return get(*c, "/health").status == 200; })) << "stayed unready";
}

TEST(ServerProbes, BehindATrustedProxyTheLimitCountsForwardedClients) {
  TestServerConfig cfg = with_step_delay(std::chrono::milliseconds(20));
  cfg.server.max_connections_per_client = 2;
  cfg.server.trusted_proxies = server::TrustedProxies({*server::Cidr::parse("127.0.0.1")});
  std::mutex log_mu;
  std::vector<std::string> log;
  cfg.server.log_requests = true;
  cfg.server.log_sink = [&](const std::string& line) {
    std::lock_guard lock(log_mu);
    log.push_back(line);
  };
  TestServer server(cfg);
  if (!server.ok()) GTEST_FAIL() << "needs ../shared/models/stories260K.gguf";
  // Six streams through the "proxy" (127.0.0.1) for three clients, two each: all served, although the proxy holds
  // six connections against a limit of two.
  std::vector<int> streams;
  for (int i = 0; i < 6; ++i) {
    streams.push_back(connect_from("127.0.0.1", server.port()));
    ASSERT_GE(streams.back(), 0);
    const std::string client = "203.0.113." + std::to_string(i / 2 + 1);
    ASSERT_TRUE(send_all(streams.back(), completion(100, true, "X-Forwarded-For: 1.2.3.4, " + client + "\r\n")));
  }
  ASSERT_TRUE(wait_for([&] { return server.engine().counters().n_running == 6; })) << "not every stream ran";
  // A third request of client 1 is over its limit; the spoofed left entry does not make it someone else.
  const int extra = connect_from("127.0.0.1", server.port());
  ASSERT_TRUE(send_all(extra, completion(1, false, "X-Forwarded-For: 9.9.9.9, 203.0.113.1\r\nConnection: close\r\n")));
  const std::string refused = read_to_close(extra);
  ::close(extra);
  EXPECT_EQ(final_status(refused), 429) << refused;
  EXPECT_NE(refused.find("203.0.113.1"), std::string::npos) << refused;
  // An untrusted peer's header is ignored: 127.0.0.2 is limited as itself.
  std::vector<int> direct;
  for (int i = 0; i < 3; ++i) {
    direct.push_back(connect_from("127.0.0.2", server.port()));
    ASSERT_TRUE(send_all(direct.back(), "GET /v1/models HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: 10.9.9." +
                                            std::to_string(i) + "\r\n\r\n"));
  }
  int n_refused = 0;
  for (const int fd : direct) {
    char buf[4096];
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    n_refused += n > 0 && final_status(std::string(buf, static_cast<size_t>(n))) == 429 ? 1 : 0;
  }
  EXPECT_EQ(n_refused, 1) << "127.0.0.2's third connection was not refused";
  for (const int fd : direct) ::close(fd);
  for (const int fd : streams) {
    const std::string r = read_to_close(fd);
    EXPECT_EQ(final_status(r), 200) << r;
    ::close(fd);
  }
  server.stop();
  std::lock_guard lock(log_mu);
  int forwarded = 0;
  for (const std::string& line : log) forwarded += line.find("203.0.113.") != std::string::npos ? 1 : 0;
  EXPECT_GE(forwarded, 6) << "the request log does not name the forwarded clients";
}

}  // namespace
}  // namespace preface::test
