// `preface serve` on SIGTERM (issue 26 item 6): with 8 streams in flight it stops accepting, lets them finish
// (--drain-seconds), exits 0 and reports no KV block in use; with --drain-seconds 0 the streams get a final
// error event instead, and the exit is still 0 with no block in use; a second SIGTERM ends the drain at once.
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <future>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_harness.h"

namespace preface::test {
namespace {

constexpr int kStreams = 8;

struct StreamResult {
  int status = -1;
  std::string body;
};

// kStreams streams of `max_tokens`, each on its own thread; `started` counts those that received a first chunk.
std::vector<std::future<StreamResult>> start_streams(const std::string& url, int max_tokens, std::atomic<int>& started) {
  std::vector<std::future<StreamResult>> out;
  for (int i = 0; i < kStreams; ++i) {
    out.push_back(std::async(std::launch::async, [&url, &started, max_tokens, i] {
      httplib::Client c(url);
      c.set_read_timeout(std::chrono::seconds(60));
      StreamResult r;
      bool first = true;
      const std::string body = nlohmann::json{{"prompt", "Once upon a time " + std::to_string(i)},
                                              {"max_tokens", max_tokens},
                                              {"ignore_eos", true},
                                              {"stream", true}}
                                   .dump();
      httplib::Request req;
      req.method = "POST";
      req.path = "/v1/completions";
      req.body = body;
      req.set_header("Content-Type", "application/json");
      req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
        r.body.append(data, n);
        if (first) {
          first = false;
          started.fetch_add(1);
        }
        return true;
      };
      if (auto res = c.send(req)) r.status = res->status;
      return r;
    }));
  }
  return out;
}

TEST(ServeDrain, SigtermLetsEightStreamsFinishAndExitsZero) {
  const auto model = shared_file("models/stories260K.gguf");
  ASSERT_FALSE(model.empty()) << "needs ../shared/models/stories260K.gguf";
  ServeProcess server({"-m", model.string(), "--threads", "1", "--drain-seconds", "60"}, "drain");
  ASSERT_FALSE(server.url().empty()) << server.log();
  std::atomic<int> started{0};
  auto streams = start_streams(server.url(), 1500, started);  // stories260K: 2048 tokens of context
  for (int i = 0; i < 2000 && started.load() < kStreams; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_EQ(started.load(), kStreams);
  EXPECT_EQ(server.signal_and_wait(SIGTERM, std::chrono::seconds(60)), 0) << server.log();
  EXPECT_NE(server.log().find("8 requests in flight"), std::string::npos) << "not all streams ran at SIGTERM";
  for (auto& f : streams) {
    const StreamResult r = f.get();
    EXPECT_EQ(r.status, 200);
    EXPECT_NE(r.body.find("\"finish_reason\":\"length\""), std::string::npos) << r.body.substr(r.body.size() - 300);
    EXPECT_NE(r.body.find("data: [DONE]"), std::string::npos);
    EXPECT_EQ(r.body.find("shutting down"), std::string::npos);
  }
  const std::string log = server.log();
  EXPECT_NE(log.find("SIGTERM received, draining"), std::string::npos) << log;
  EXPECT_NE(log.find("stopped (0 requests cancelled after the drain; KV blocks in use: 0)"), std::string::npos) << log;
}

TEST(ServeDrain, SigtermWithoutGraceCancelsWithAFinalEventAndExitsZero) {
  const auto model = shared_file("models/stories260K.gguf");
  ASSERT_FALSE(model.empty()) << "needs ../shared/models/stories260K.gguf";
  ServeProcess server({"-m", model.string(), "--threads", "1", "--drain-seconds", "0"}, "drain0");
  ASSERT_FALSE(server.url().empty()) << server.log();
  std::atomic<int> started{0};
  auto streams = start_streams(server.url(), 1500, started);
  for (int i = 0; i < 2000 && started.load() < kStreams; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_EQ(started.load(), kStreams);
  EXPECT_EQ(server.signal_and_wait(SIGTERM, std::chrono::seconds(60)), 0) << server.log();
  int n_cancelled = 0;
  for (auto& f : streams) {
    const StreamResult r = f.get();
    EXPECT_EQ(r.status, 200);
    EXPECT_NE(r.body.find("data: [DONE]"), std::string::npos) << "a stream ended without its final event";
    n_cancelled += r.body.find("shutting down") != std::string::npos;
  }
  const std::string log = server.log();
  EXPECT_NE(log.find("KV blocks in use: 0)"), std::string::npos) << log;
  EXPECT_NE(log.find("8 requests in flight"), std::string::npos) << log;
  EXPECT_EQ(n_cancelled, kStreams) << log;
}

TEST(ServeDrain, ASecondSignalEndsTheDrainAtOnce) {
  const auto model = shared_file("models/stories260K.gguf");
  ASSERT_FALSE(model.empty()) << "needs ../shared/models/stories260K.gguf";
  ServeProcess server({"-m", model.string(), "--threads", "1", "--drain-seconds", "600"}, "drain2");
  ASSERT_FALSE(server.url().empty()) << server.log();
  std::atomic<int> started{0};
  auto streams = start_streams(server.url(), 1500, started);
  for (int i = 0; i < 2000 && started.load() < kStreams; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_EQ(started.load(), kStreams);
  server.signal(SIGTERM);
  for (int i = 0; i < 1000 && server.log().find("draining") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(server.signal_and_wait(SIGTERM, std::chrono::seconds(30)), 128 + SIGTERM) << server.log();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  EXPECT_NE(server.log().find("second SIGTERM received"), std::string::npos) << server.log();
  for (auto& f : streams) f.get();
}

}  // namespace
}  // namespace preface::test
