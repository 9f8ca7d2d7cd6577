// `preface bench serve`: the deterministic prompt generator and the percentile summary directly (header-only),
// and the whole load generator against a real `preface serve` on stories260K.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "cli/loadgen_stats.h"
#include "cli/loadgen_workload.h"
#include "support/shared_data.h"

namespace preface::test {
namespace {

using cli::loadgen::Conversation;
using cli::loadgen::WorkloadKind;
using cli::loadgen::WorkloadSpec;

size_t n_words(const std::string& s) {
  size_t n = s.empty() ? 0 : 1;
  for (char c : s) n += c == ' ';
  return n;
}

TEST(LoadgenWorkload, SameSeedSameTextOtherSeedOtherText) {
  WorkloadSpec spec{WorkloadKind::kSharedPrefix, 7, 3, 2, 1, 1, 1, 50, 10};
  const std::vector<Conversation> a = cli::loadgen::make_workload(spec), b = cli::loadgen::make_workload(spec);
  ASSERT_EQ(a.size(), 6u);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].system, b[i].system);
    EXPECT_EQ(a[i].questions, b[i].questions);
    EXPECT_EQ(n_words(a[i].system), 50u);
    ASSERT_EQ(a[i].questions.size(), 1u);
    EXPECT_EQ(n_words(a[i].questions[0]), 10u);
  }
  // Dispatch order interleaves groups: requests i and i + n_groups share a system prompt, neighbours do not.
  EXPECT_EQ(a[0].system, a[3].system);
  EXPECT_NE(a[0].system, a[1].system);
  EXPECT_NE(a[0].questions, a[3].questions);
  spec.seed = 8;
  const std::vector<Conversation> c = cli::loadgen::make_workload(spec);
  EXPECT_NE(a[0].system, c[0].system);
  // A group's text does not depend on how many groups there are.
  spec.seed = 7;
  spec.n_groups = 5;
  EXPECT_EQ(cli::loadgen::make_workload(spec)[1].system, a[1].system);
}

TEST(LoadgenWorkload, MultiTurnHistoryIsAPrefixOfTheNextTurn) {
  const WorkloadSpec spec{WorkloadKind::kMultiTurn, 1, 1, 1, 2, 3, 1, 20, 5};
  const std::vector<Conversation> w = cli::loadgen::make_workload(spec);
  ASSERT_EQ(w.size(), 2u);
  EXPECT_EQ(w[0].system, w[1].system);
  EXPECT_NE(w[0].questions[0], w[1].questions[0]);
  EXPECT_EQ(cli::loadgen::n_requests(w), 6);
  const std::string t0 = cli::loadgen::render_prompt(w[0], {});
  const std::string t1 = cli::loadgen::render_prompt(w[0], {" the reply."});
  EXPECT_EQ(t1.rfind(t0 + " the reply.", 0), 0u) << t1;
  EXPECT_NE(t1.find(w[0].questions[1]), std::string::npos);
  EXPECT_EQ(t0.rfind(w[0].system, 0), 0u);
}

TEST(LoadgenWorkload, RandomPromptsDifferAndBadSizesThrow) {
  const WorkloadSpec spec{WorkloadKind::kRandom, 1, 1, 1, 1, 1, 4, 30, 10};
  const std::vector<Conversation> w = cli::loadgen::make_workload(spec);
  ASSERT_EQ(w.size(), 4u);
  EXPECT_NE(w[0].questions[0].substr(0, 20), w[1].questions[0].substr(0, 20));
  EXPECT_EQ(n_words(w[2].questions[0]), 40u);
  EXPECT_THROW(cli::loadgen::make_workload({WorkloadKind::kSharedPrefix, 1, 0, 1, 1, 1, 1, 1, 1}), Error);
  EXPECT_THROW(cli::loadgen::make_workload({WorkloadKind::kRandom, 1, 1, 1, 1, 1, 1, 1, 0}), Error);
}

TEST(LoadgenStats, PercentilesInterpolate) {
  const auto d = cli::loadgen::summarize({4, 1, 3, 2, 5});
  EXPECT_EQ(d.n, 5);
  EXPECT_DOUBLE_EQ(d.mean, 3.0);
  EXPECT_DOUBLE_EQ(d.p50, 3.0);
  EXPECT_DOUBLE_EQ(d.p90, 4.6);
  EXPECT_DOUBLE_EQ(d.p99, 4.96);
  EXPECT_EQ(cli::loadgen::summarize({}).n, 0);
}

TEST(LoadgenStats, AggregateSkipsFailuresAndSumsUsage) {
  cli::loadgen::RequestResult a, b, bad;
  a.ok = b.ok = true;
  a.ttft_s = 0.1, a.e2e_s = 0.4, a.itl_s = {0.1, 0.2}, a.n_prompt_tokens = 100, a.n_cached_tokens = 50;
  a.n_completion_tokens = 4, a.has_usage = true;
  b.ttft_s = 0.2, b.e2e_s = 0.2, b.n_prompt_tokens = 100, b.n_completion_tokens = 1, b.has_usage = true;
  bad.error = "HTTP 500: boom";
  const cli::loadgen::Totals t = cli::loadgen::aggregate({a, bad, b});
  EXPECT_EQ(t.n_ok, 2);
  EXPECT_EQ(t.n_failed, 1);
  ASSERT_EQ(t.errors.size(), 1u);
  EXPECT_EQ(t.errors[0], "HTTP 500: boom");
  EXPECT_EQ(t.ttft_s.size(), 2u);
  EXPECT_EQ(t.itl_s.size(), 2u);
  ASSERT_EQ(t.tpot_s.size(), 1u);  // b generated one token: no inter-token time
  EXPECT_DOUBLE_EQ(t.tpot_s[0], 0.1);
  EXPECT_EQ(t.n_completion_tokens, 5);
  EXPECT_DOUBLE_EQ(cli::loadgen::cached_ratio(t), 0.25);
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// `preface serve` on stories260K on a free loopback port; SIGTERM on destruction.
class Server {
 public:
  explicit Server(const std::string& model) : log_((temp_dir("loadgen") / "server.log").string()) {
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    std::vector<std::string> args = {PREFACE_BINARY, "serve", "-m", model, "--port", "0", "--threads", "1",
                                     "--kv-cache-mem", "32MiB"};
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    if (posix_spawn(&pid_, PREFACE_BINARY, &fa, nullptr, argv.data(), environ) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&fa);
    const std::regex re(R"(preface: listening on (http://127\.0\.0\.1:[0-9]+))");
    for (int i = 0; i < 400 && pid_ > 0 && url_.empty(); ++i) {
      std::smatch m;
      const std::string text = slurp(log_);
      if (std::regex_search(text, m, re)) url_ = m[1].str();
      else std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
  }
  ~Server() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);
    int status = 0;
    ::waitpid(pid_, &status, 0);
  }
  const std::string& url() const { return url_; }
  std::string log() const { return slurp(log_); }

 private:
  std::string log_;
  pid_t pid_ = -1;
  std::string url_;  // empty until the server said where it listens
};

struct Result {
  int exit_code = -1;
  std::string out;
};

Result bench(const std::string& args) {
  const std::string cmd = std::string("'") + PREFACE_BINARY + "' bench serve " + args + " 2>&1";
  Result r;
  FILE* pipe = ::popen(cmd.c_str(), "r");
  if (pipe == nullptr) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), pipe)) > 0) r.out.append(buf.data(), n);
  const int status = ::pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

TEST(LoadgenServe, SharedPrefixAgainstPrefaceServe) {
  const auto model = shared_file("models/stories260K.gguf");
  if (model.empty()) return;
  Server srv(model.string());
  ASSERT_FALSE(srv.url().empty()) << srv.log();
  const Result r = bench("--url " + srv.url() +
                         " --workload shared-prefix --groups 2 --prompts-per-group 3 --system-len 40"
                         " --question-len 6 --max-tokens 4 --concurrency 2 --json");
  ASSERT_EQ(r.exit_code, 0) << r.out << srv.log();
  // stdout is the JSON object; stderr (merged here) holds only progress lines, which start with "bench serve:".
  const size_t brace = r.out.find('{');
  ASSERT_NE(brace, std::string::npos) << r.out;
  const nlohmann::json j = nlohmann::json::parse(r.out.substr(brace), nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.out;
  EXPECT_EQ(j["workload"], "shared-prefix");
  EXPECT_EQ(j["n_requests"], 6);
  EXPECT_EQ(j["n_ok"], 6);
  EXPECT_EQ(j["n_failed"], 0);
  EXPECT_EQ(j["n_without_usage"], 0);
  EXPECT_EQ(j["completion_tokens"], 24);
  EXPECT_GT(j["cached_ratio"].get<double>(), 0.0) << j.dump(2);
  EXPECT_LT(j["cached_ratio"].get<double>(), 1.0);
  EXPECT_GT(j["mean_prompt_tokens"].get<double>(), 40.0);
  EXPECT_GT(j["requests_per_s"].get<double>(), 0.0);
  EXPECT_GT(j["output_tokens_per_s"].get<double>(), 0.0);
  for (const char* k : {"ttft_ms", "itl_ms", "tpot_ms", "e2e_ms"}) {
    ASSERT_TRUE(j.contains(k)) << k;
    for (const char* f : {"mean", "p50", "p90", "p99"}) EXPECT_TRUE(j[k].contains(f)) << k << "." << f;
  }
  EXPECT_EQ(j["ttft_ms"]["n"], 6);
  EXPECT_GT(j["ttft_ms"]["p50"].get<double>(), 0.0);
  EXPECT_GE(j["e2e_ms"]["p50"].get<double>(), j["ttft_ms"]["p50"].get<double>());

  const Result mt = bench("--url " + srv.url() +
                          " --workload multi-turn --users 2 --turns 2 --system-len 20 --question-len 4"
                          " --max-tokens 3 --concurrency 2");
  EXPECT_EQ(mt.exit_code, 0) << mt.out;
  EXPECT_NE(mt.out.find("4 ok, 0 failed"), std::string::npos) << mt.out;
}

TEST(LoadgenServe, BadUrlAndDeadServerFailClearly) {
  const Result bad = bench("--url not-a-url --json");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.out.find("--url"), std::string::npos) << bad.out;
  // Port 1 on loopback: nothing listens there.
  const Result dead = bench("--url http://127.0.0.1:1 --groups 1 --prompts-per-group 1");
  EXPECT_NE(dead.exit_code, 0);
  EXPECT_NE(dead.out.find("127.0.0.1:1"), std::string::npos) << dead.out;
}

}  // namespace
}  // namespace preface::test
