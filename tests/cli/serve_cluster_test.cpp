// Replicas behind nginx (scripts/cluster, deploy/nginx/preface.conf) on loopback: the requests of one session
// (X-Session-Id) all reach one replica, whose RAM cache serves the session's later turns; a prefix computed on one
// replica is loaded from the shared Redis tier by another, with the output of the one that computed it. Under
// load, a replica sent SIGTERM drains with no client-visible error, one killed with SIGKILL fails at most the
// requests it was serving; 100 streams from 100 clients through the one nginx are not refused by the replicas'
// per-client limit (issue 45 item 3).
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <signal.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "cli_harness.h"
#include "loopback_services.h"
#include "server/raw_http.h"

namespace preface::test {
namespace {

using nlohmann::json;
constexpr int kBlock = 16;
constexpr int kPromptTokens = 12 * kBlock + 5;

// `scripts/cluster start` in a temp dir; `scripts/cluster stop` on destruction.
class Cluster {
 public:
  Cluster(int replicas, const std::vector<std::string>& serve_args) : dir_(temp_dir("serve-cluster") / "c") {
    std::filesystem::remove_all(dir_);
    port_ = free_port();
    const int redis_port = free_port();
    std::vector<std::string> args = {"start", "--dir", dir_.string(), "--replicas", std::to_string(replicas), "--port",
                                     std::to_string(port_), "--redis-port", std::to_string(redis_port), "--binary",
                                     PREFACE_BINARY, "--"};
    args.insert(args.end(), serve_args.begin(), serve_args.end());
    start_ = run_binary(std::string(PREFACE_SOURCE_DIR) + "/scripts/cluster", args);
  }
  ~Cluster() { run_binary(std::string(PREFACE_SOURCE_DIR) + "/scripts/cluster", {"stop", "--dir", dir_.string()}); }
  bool ok() const { return start_.exit_code == 0; }
  int port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  // The pid scripts/cluster recorded for `name` (replica-1, ...); -1 when none.
  int pid_of(const std::string& name) const {
    std::ifstream f(dir_ / "run" / (name + ".pid"));
    int pid = -1;
    return f >> pid ? pid : -1;
  }
  // Sends `sig` to replica `name` and waits up to `timeout` for the process to end; false when it did not.
  bool stop_replica(const std::string& name, int sig, std::chrono::seconds timeout) const {
    const int pid = pid_of(name);
    if (pid <= 0 || ::kill(pid, sig) != 0) return false;
    const auto until = std::chrono::steady_clock::now() + timeout;
    while (::kill(pid, 0) == 0 && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return ::kill(pid, 0) != 0;
  }
  std::string log_path(const std::string& name) const { return (dir_ / "logs" / (name + ".log")).string(); }
  std::string diagnose() const {
    std::string out = start_.all();
    for (const char* f : {"logs/nginx-error.log", "logs/replica-1.log", "logs/replica-2.log", "logs/replica-3.log"}) {
      out += "\n--- " + std::string(f) + "\n" + slurp((dir_ / f).string());
    }
    return out;
  }

 private:
  std::filesystem::path dir_;
  int port_ = 0;
  CliResult start_;
};

std::vector<int> prompt_of(int variant, int n = kPromptTokens) {
  std::vector<int> p;
  for (int i = 0; i < n; ++i) p.push_back(3 + (i * 7 + variant * 31 + i * i * variant) % 480);
  return p;
}

struct Reply {
  int status = -1;
  std::string upstream;  // X-Preface-Upstream: the replica that answered
  json body;
  int cached() const { return body["usage"]["prompt_tokens_details"].value("cached_tokens", -1); }
  int tier() const { return body["usage"]["prompt_tokens_details"].value("cache_tier_tokens", 0); }
  std::string output() const { return body["choices"][0]["text"].dump() + body["choices"][0]["logprobs"].dump(); }
};

Reply complete(const std::string& url, const std::string& session, const std::vector<int>& prompt) {
  httplib::Client c(url);
  c.set_read_timeout(60, 0);
  const json body = {{"prompt", prompt}, {"max_tokens", 4}, {"temperature", 0}, {"logprobs", 2}};
  Reply r;
  if (auto res = c.Post("/v1/completions", {{"X-Session-Id", session}}, body.dump(), "application/json")) {
    r.status = res->status;
    r.upstream = res->get_header_value("X-Preface-Upstream");
    r.body = json::parse(res->body, nullptr, false);
  }
  return r;
}

// The replica a session's requests go to (a cheap GET through the proxy).
std::string replica_of(const std::string& url, const std::string& session) {
  httplib::Client c(url);
  const auto res = c.Get("/health", {{"X-Session-Id", session}});
  return res ? res->get_header_value("X-Preface-Upstream") : "";
}

double metric(const std::string& replica, const std::string& sample) {
  httplib::Client c("http://" + replica);
  const auto res = c.Get("/metrics");
  if (!res) return -1;
  const size_t at = res->body.find("\n" + sample + " ");
  return at == std::string::npos ? -1 : std::stod(res->body.substr(at + sample.size() + 2));
}

TEST(ServeCluster, SessionsStayOnOneReplicaAndPrefixesTravelThroughRedis) {
  const std::string model = shared_file("models/stories260K.gguf").string();
  if (model.empty()) GTEST_SKIP() << "stories260K.gguf not available";
  if (!have_program("nginx")) GTEST_SKIP() << "nginx is not installed (Debian nginx-light; scripts/setup installs it)";
  if (!have_program("redis-server")) GTEST_SKIP() << "redis-server is not installed (scripts/setup installs it)";
  Cluster cluster(3, {"-m", model, "--threads", "1", "--kv-cache-mem", "8MiB", "--quiet",
                      "--cache-redis-timeout-ms", "5000"});
  ASSERT_TRUE(cluster.ok()) << cluster.diagnose();

  // Session keys spread over the replicas (the ring depends on the replicas' ports: probe keys until two
  // replicas appear, then take up to two sessions on each).
  std::map<std::string, std::vector<std::string>> sessions_of_replica;
  for (int i = 0; i < 200; ++i) {
    const std::string session = "session-" + std::to_string(i);
    auto& list = sessions_of_replica[replica_of(cluster.url(), session)];
    if (list.size() < 2) list.push_back(session);
  }
  sessions_of_replica.erase("");
  ASSERT_GE(sessions_of_replica.size(), 2u) << "200 session keys all hashed to one replica";

  // Each session keeps its replica turn after turn; the second and third turns (each prompt extends the
  // previous one) hit in that replica's RAM.
  int variant = 50;
  for (const auto& [replica, sessions] : sessions_of_replica) {
    for (const std::string& session : sessions) {
      ++variant;
      for (int turn = 0; turn < 3; ++turn) {
        const Reply r = complete(cluster.url(), session, prompt_of(variant, kPromptTokens + turn * 2 * kBlock));
        ASSERT_EQ(r.status, 200) << cluster.diagnose();
        EXPECT_EQ(r.upstream, replica) << session << " turn " << turn;
        if (turn > 0) {
          EXPECT_GE(r.cached(), (12 + (turn - 1) * 2) * kBlock) << session << " turn " << turn;
          EXPECT_EQ(r.tier(), 0) << "a later turn is a RAM hit";
        }
      }
    }
  }

  // A prefix computed on one replica is a Redis hit on another, with the same output.
  const std::string a = "redis-a";
  const std::string replica_a = replica_of(cluster.url(), a);
  std::string b;
  for (int i = 0; i < 200 && b.empty(); ++i) {
    const std::string candidate = "redis-b-" + std::to_string(i);
    if (replica_of(cluster.url(), candidate) != replica_a) b = candidate;
  }
  ASSERT_FALSE(b.empty()) << "no session key reached another replica";
  const std::vector<int> prompt = prompt_of(7);
  const std::string written = "preface_kv_tier_written_records_total{tier=\"redis\"}";
  const double written_before = metric(replica_a, written);  // the sessions above wrote some too
  const Reply first = complete(cluster.url(), a, prompt);
  ASSERT_EQ(first.status, 200);
  EXPECT_EQ(first.upstream, replica_a);
  EXPECT_EQ(first.cached(), 0);
  for (int i = 0; i < 500 && metric(replica_a, written) < written_before + 12; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_GE(metric(replica_a, written), written_before + 12) << "A never published the prefix to Redis";
  const Reply second = complete(cluster.url(), b, prompt);
  ASSERT_EQ(second.status, 200);
  EXPECT_NE(second.upstream, replica_a);
  EXPECT_EQ(second.tier(), 12 * kBlock) << "loaded from Redis, not recomputed";
  EXPECT_EQ(second.cached(), 12 * kBlock);
  EXPECT_EQ(second.output(), first.output());
}

// Clients sending completions through the proxy in a loop, each request on a new session key (so they spread
// over the replicas); every status is kept, -1 for a request that got no answer.
class Load {
 public:
  Load(const std::string& url, int n_clients) {
    for (int c = 0; c < n_clients; ++c) {
      threads_.emplace_back([this, url, c] {
        for (int i = 0; !stop_.load(); ++i) {
          const Reply r = complete(url, "load-" + std::to_string(c) + "-" + std::to_string(i), prompt_of(c, 40));
          std::lock_guard lock(mu_);
          statuses_.push_back(r.status);
        }
      });
    }
  }
  ~Load() { stop(); }
  void stop() {
    stop_.store(true);
    for (auto& t : threads_) {
      if (t.joinable()) t.join();
    }
  }
  // Statuses since the last call: {answered 200, failed}.
  std::pair<int, int> take() {
    std::lock_guard lock(mu_);
    int ok = 0, failed = 0;
    for (const int s : statuses_) (s == 200 ? ok : failed) += 1;
    statuses_.clear();
    return {ok, failed};
  }

 private:
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::vector<int> statuses_;
  std::vector<std::thread> threads_;
};

TEST(ServeCluster, ASigtermedReplicaDrainsWithoutErrorsAndAKilledOneFailsOnlyItsOwn) {
  const std::string model = shared_file("models/stories260K.gguf").string();
  if (model.empty()) GTEST_SKIP() << "stories260K.gguf not available";
  if (!have_program("nginx")) GTEST_SKIP() << "nginx is not installed (Debian nginx-light; scripts/setup installs it)";
  if (!have_program("redis-server")) GTEST_SKIP() << "redis-server is not installed (scripts/setup installs it)";
  Cluster cluster(3, {"-m", model, "--threads", "1", "--kv-cache-mem", "8MiB", "--quiet", "--drain-seconds", "20"});
  ASSERT_TRUE(cluster.ok()) << cluster.diagnose();
  constexpr int kClients = 6;
  Load load(cluster.url(), kClients);
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  ASSERT_TRUE(cluster.stop_replica("replica-1", SIGTERM, std::chrono::seconds(30))) << "replica 1 did not drain";
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  const auto [ok_term, failed_term] = load.take();
  EXPECT_GT(ok_term, 20) << cluster.diagnose();
  EXPECT_EQ(failed_term, 0) << "requests failed while a replica drained\n" << cluster.diagnose();
  EXPECT_NE(slurp(cluster.log_path("replica-1")).find("SIGTERM received, draining"), std::string::npos);

  ASSERT_TRUE(cluster.stop_replica("replica-2", SIGKILL, std::chrono::seconds(10)));
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  const auto [ok_kill, failed_kill] = load.take();
  EXPECT_GT(ok_kill, 10);
  EXPECT_LE(failed_kill, kClients) << "more requests failed than were in flight at the kill";
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  load.stop();
  const auto [ok_after, failed_after] = load.take();
  EXPECT_GT(ok_after, 10);
  EXPECT_EQ(failed_after, 0) << "the last replica did not take over every session";
}

TEST(ServeCluster, AHundredStreamsFromAHundredClientsPassThePerClientLimit) {
  const std::string model = shared_file("models/stories260K.gguf").string();
  if (model.empty()) GTEST_SKIP() << "stories260K.gguf not available";
  if (!have_program("nginx")) GTEST_SKIP() << "nginx is not installed (Debian nginx-light; scripts/setup installs it)";
  if (!have_program("redis-server")) GTEST_SKIP() << "redis-server is not installed (scripts/setup installs it)";
  // A per-client limit of 8 connections: without --trusted-proxy (scripts/cluster passes nginx's address) every
  // replica would refuse all but 8 of the streams nginx brings it.
  Cluster cluster(3, {"-m", model, "--threads", "1", "--kv-cache-mem", "16MiB", "--quiet",
                      "--max-connections-per-client", "8"});
  ASSERT_TRUE(cluster.ok()) << cluster.diagnose();
  constexpr int kStreams = 100;
  std::vector<int> fds;
  const std::string body =
      json{{"prompt", "Once upon a time"}, {"max_tokens", 120}, {"ignore_eos", true}, {"stream", true}}.dump();
  for (int i = 0; i < kStreams; ++i) {
    const std::string source = "127.0.0." + std::to_string(10 + i);
    const int fd = connect_from(source.c_str(), cluster.port(), 60);
    ASSERT_GE(fd, 0) << source;
    ASSERT_TRUE(send_all(fd, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: "
                             "application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" +
                             body));
    fds.push_back(fd);
  }
  int n_done = 0;
  std::string first_failure;
  for (const int fd : fds) {
    const std::string r = read_to_close(fd);
    ::close(fd);
    const bool done = final_status(r) == 200 && r.find("[DONE]") != std::string::npos;
    n_done += done ? 1 : 0;
    if (!done && first_failure.empty()) first_failure = r.substr(0, 600);
  }
  EXPECT_EQ(n_done, kStreams) << first_failure;
}

}  // namespace
}  // namespace preface::test

