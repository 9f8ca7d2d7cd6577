// Slow and odd clients against a real server over raw sockets (issue 28 items 2 and 11): slowloris connections
// (a header line every few hundred ms) from one address cannot keep other clients or /health waiting; a request
// that trickles in past --header-timeout gets 408; a client that half-closes its socket after its request still
// gets the answer; /health and /metrics answer on connections over the connection cap.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "raw_http.h"
#include "server_harness.h"

namespace preface::test {
namespace {

using Clock = std::chrono::steady_clock;

// Slowloris connections from 127.0.0.2: each sends a request line and then one header line every `period`, never
// finishing its request, until stopped.
class Slowloris {
 public:
  Slowloris(int port, int n, std::chrono::milliseconds period) {
    for (int i = 0; i < n; ++i) {
      const int fd = connect_from("127.0.0.2", port, 1);
      if (fd >= 0 && send_all(fd, "POST /v1/completions HTTP/1.1\r\nHost: x\r\n")) fds_.push_back(fd);
    }
    thread_ = std::thread([this, period] {
      for (int line = 0; !stop_.load(); ++line) {
        for (const int fd : fds_) (void)::send(fd, "X-Slow: 1\r\n", 11, MSG_NOSIGNAL | MSG_DONTWAIT);
        std::this_thread::sleep_for(period);
      }
    });
  }
  ~Slowloris() {
    stop_.store(true);
    thread_.join();
    for (const int fd : fds_) ::close(fd);
  }
  size_t size() const { return fds_.size(); }
  // Connections the server has answered (refused) so far: a reply or the end of the stream is waiting.
  size_t n_answered() const {
    std::vector<pollfd> p;
    for (const int fd : fds_) p.push_back({fd, POLLIN, 0});
    (void)::poll(p.data(), p.size(), 0);
    size_t n = 0;
    for (const pollfd& q : p) n += (q.revents & (POLLIN | POLLHUP)) != 0 ? 1 : 0;
    return n;
  }
  // Waits (at most 20 s) until the server has refused all but `n_held` of the connections: a loaded or sanitized
  // server may still be accepting the attack well after the connections were made.
  void wait_refused(size_t n_held) const {
    const auto until = Clock::now() + std::chrono::seconds(20);
    while (n_answered() + n_held < fds_.size() && Clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

 private:
  std::vector<int> fds_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

TEST(ServerSlowClients, SlowlorisFromOneAddressLeavesOthersServed) {
  TestServer server;  // default limits: 72 HTTP threads, 128 connections, 36 per client address
  if (!server.ok()) GTEST_FAIL() << "needs ../shared/models/stories260K.gguf";
  Slowloris attack(server.port(), 200, std::chrono::milliseconds(300));
  ASSERT_EQ(attack.size(), 200u);
  attack.wait_refused(36);  // the attack is served (36, the per-address limit) or refused
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const std::string body = json{{"prompt", "Once upon a time"}, {"max_tokens", 4}, {"temperature", 0}}.dump();
  for (int round = 0; round < 3; ++round) {
    const auto t0 = Clock::now();
    const int fd = connect_from("127.0.0.1", server.port());
    ASSERT_GE(fd, 0);
    ASSERT_TRUE(send_all(fd, request("POST", "/v1/completions", body)));
    const std::string response = read_to_close(fd);
    ::close(fd);
    const auto waited = Clock::now() - t0;
    EXPECT_EQ(final_status(response), 200) << response.substr(0, 300);
    EXPECT_LT(waited, std::chrono::seconds(2)) << "round " << round;

    const int h = connect_from("127.0.0.1", server.port());
    ASSERT_GE(h, 0);
    ASSERT_TRUE(send_all(h, request("GET", "/health")));
    EXPECT_EQ(final_status(read_to_close(h)), 200);
    ::close(h);
    std::this_thread::sleep_for(std::chrono::milliseconds(400));
  }
}

TEST(ServerSlowClients, RequestTricklingPastTheHeaderTimeoutGets408) {
  TestServerConfig cfg;
  cfg.server.header_timeout_s = 2;
  cfg.server.read_timeout_s = 30;  // each line arrives well within the per-read timeout
  TestServer server(cfg);
  if (!server.ok()) GTEST_FAIL() << "needs ../shared/models/stories260K.gguf";
  const int fd = connect_from("127.0.0.1", server.port(), 8);
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(send_all(fd, "GET /v1/models HTTP/1.1\r\nHost: x\r\n"));
  const auto t0 = Clock::now();
  std::atomic<bool> stop{false};
  std::thread trickle([&] {
    while (!stop.load() && Clock::now() - t0 < std::chrono::seconds(8)) {
      (void)::send(fd, "X-Slow: 1\r\n", 11, MSG_NOSIGNAL);
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
    }
  });
  const std::string response = read_to_close(fd);
  const auto waited = Clock::now() - t0;
  stop.store(true);
  trickle.join();
  ::close(fd);
  EXPECT_EQ(final_status(response), 408) << response;
  EXPECT_NE(response.find("Connection: close"), std::string::npos) << response;
  EXPECT_NE(response.find("--header-timeout"), std::string::npos) << response;
  EXPECT_LT(waited, std::chrono::seconds(5));
  auto c = server.client();
  EXPECT_EQ(get(*c, "/v1/models").status, 200);
}

TEST(ServerSlowClients, ConnectionsOverThePerClientLimitGet429) {
  TestServerConfig cfg;
  cfg.server.max_connections_per_client = 3;
  TestServer server(cfg);
  if (!server.ok()) GTEST_FAIL() << "needs ../shared/models/stories260K.gguf";
  std::vector<int> held;
  for (int i = 0; i < 3; ++i) {
    held.push_back(connect_from("127.0.0.2", server.port()));
    ASSERT_GE(held.back(), 0);
    ASSERT_TRUE(send_all(held.back(), "GET /health HTTP/1.1\r\nHost: x\r\n\r\n"));  // served, kept alive
  }
  char buf[512];
  for (const int fd : held) ASSERT_GT(::recv(fd, buf, sizeof buf, 0), 0);
  const int extra = connect_from("127.0.0.2", server.port());
  ASSERT_TRUE(send_all(extra, request("GET", "/v1/models")));
  const std::string refused = read_to_close(extra);
  ::close(extra);
  EXPECT_EQ(final_status(refused), 429) << refused;
  EXPECT_NE(refused.find("Retry-After"), std::string::npos) << refused;
  // Another address is not limited by the first one's connections.
  const int other = connect_from("127.0.0.1", server.port());
  ASSERT_TRUE(send_all(other, request("GET", "/v1/models")));
  EXPECT_EQ(final_status(read_to_close(other)), 200);
  ::close(other);
  for (const int fd : held) ::close(fd);
}

// The client shuts down its sending side once its request is out, and then reads (as `nc -N` does).
std::string half_closed_exchange(int port, const std::string& req) {
  const int fd = connect_from("127.0.0.1", port);
  if (fd < 0 || !send_all(fd, req)) return "";
  ::shutdown(fd, SHUT_WR);
  std::string response = read_to_close(fd);
  ::close(fd);
  return response;
}

TEST(ServerSlowClients, HalfClosedClientsGetTheirAnswer) {
  TestServer server;
  if (!server.ok()) GTEST_FAIL() << "needs ../shared/models/stories260K.gguf";
  const std::string health = half_closed_exchange(server.port(), request("GET", "/health"));
  EXPECT_EQ(final_status(health), 200) << health;
  const std::string body = json{{"prompt", "Once upon a time"}, {"max_tokens", 40}, {"ignore_eos", true}}.dump();
  const std::string plain = half_closed_exchange(server.port(), request("POST", "/v1/completions", body));
  EXPECT_EQ(final_status(plain), 200) << plain;
  EXPECT_NE(plain.find("\"completion_tokens\":40"), std::string::npos) << plain;
  json streamed = json::parse(body);
  streamed["stream"] = true;
  const std::string stream = half_closed_exchange(server.port(), request("POST", "/v1/completions", streamed.dump()));
  EXPECT_EQ(final_status(stream), 200) << stream;
  EXPECT_NE(stream.find("data: [DONE]"), std::string::npos) << stream;
  EXPECT_TRUE(wait_for([&] { return server.engine().counters().n_blocks_in_use == 0; }));
}

TEST(ServerSlowClients, HealthAndMetricsAnswerOverTheConnectionCap) {
  TestServerConfig cfg;
  cfg.server.max_connections = 3;
  cfg.server.max_connections_per_client = 100;
  TestServer server(cfg);
  if (!server.ok()) GTEST_FAIL() << "needs ../shared/models/stories260K.gguf";
  std::vector<int> held;
  for (int i = 0; i < 3; ++i) {
    held.push_back(connect_from("127.0.0.1", server.port()));
    ASSERT_TRUE(send_all(held.back(), "GET /health HTTP/1.1\r\nHost: x\r\n\r\n"));
  }
  char buf[512];
  for (const int fd : held) ASSERT_GT(::recv(fd, buf, sizeof buf, 0), 0);  // all three admitted
  struct Case {
    const char* path;
    int status;
  };
  for (const Case k : {Case{"/health", 200}, Case{"/metrics", 200}, Case{"/v1/health", 200}, Case{"/v1/models", 503}}) {
    const int fd = connect_from("127.0.0.1", server.port());
    ASSERT_TRUE(send_all(fd, request("GET", k.path)));
    const std::string response = read_to_close(fd);
    ::close(fd);
    EXPECT_EQ(final_status(response), k.status) << k.path << ": " << response.substr(0, 300);
  }
  for (const int fd : held) ::close(fd);
}

}  // namespace
}  // namespace preface::test
