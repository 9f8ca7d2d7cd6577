// `preface-bench soak`: the request mix and the answer checks directly, then the real binary: a server on stories260K
// with a small KV budget (evictions) and tight limits, soaked by 4 clients for 10 s with no mismatch, no
// unexpected error and no KV block left in use; and clients that vanish mid-stream leave no block behind.
// The soak client comes from the preface_cli library, which tests/cli executables link.
#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <httplib.h>

#include "clients/loadgen_client.h"
#include "clients/soak_runner.h"
#include "clients/soak_workload.h"
#include "cli/cli_harness.h"
#include "support/shared_data.h"

namespace preface::test {
namespace {

using cli::loadgen::RequestResult;
using cli::soak::Expect;
using cli::soak::Outcome;
using cli::soak::Request;

TEST(SoakWorkload, DeterministicMixOfEveryKind) {
  cli::soak::Spec spec;
  spec.seed = 5;
  spec.long_words = 50;
  spec.over_words = 100;
  spec.limits.max_body_bytes = 1000;
  const cli::soak::Workload w(spec), same(spec);
  std::set<std::string> kinds;
  int n_vanish = 0, n_400 = 0, n_413 = 0, n_stream = 0, n_slowloris = 0, n_closed = 0, n_deep = 0, n_forged = 0;
  for (uint64_t i = 0; i < 400; ++i) {
    const Request r = w.make(3, i), s = same.make(3, i);
    EXPECT_EQ(r.body, s.body);
    EXPECT_EQ(r.key, s.key);
    kinds.insert(r.path);
    n_vanish += r.vanish_after_chunks > 0;
    n_400 += r.expect == Expect::k400;
    n_413 += r.expect == Expect::k413;
    n_stream += r.stream;
    n_slowloris += r.attack == cli::soak::Attack::kSlowloris && r.expect == Expect::k408;
    n_closed += r.attack == cli::soak::Attack::kSendAndVanish;
    n_deep += r.label.find("deep-json") != std::string::npos && r.expect == Expect::k400 && r.body.size() < 1000;
    n_forged += r.label.find("forged") != std::string::npos && r.key.ends_with("#forged");
    EXPECT_TRUE(r.expect != Expect::kText || !r.key.empty() || r.attack == cli::soak::Attack::kSendAndVanish);
    EXPECT_TRUE(r.vanish_after_chunks == 0 || r.stream);
  }
  EXPECT_EQ(kinds.size(), 4u);  // the three APIs and /tokenize
  EXPECT_GT(n_slowloris, 0);
  EXPECT_GT(n_closed, 0);
  EXPECT_GT(n_deep, 0) << "deep JSON sized to the body limit";
  EXPECT_GT(n_forged, 0);
  EXPECT_GT(n_vanish, 10);
  EXPECT_GT(n_400, 20);
  EXPECT_GT(n_413, 3);
  EXPECT_GT(n_stream, 50);
  // One reference per (API, prompt); the same key always carries the same body (streaming aside).
  const std::vector<Request> refs = w.reference_requests();
  EXPECT_EQ(refs.size(), 3u * static_cast<size_t>(w.n_prompts()) + 3u);  // + the forged-token prompt per API
  EXPECT_NE(w.make(3, 0).body, w.make(4, 0).body);
}

RequestResult answered(int status, const std::string& body, const std::string& streamed_text = "") {
  RequestResult r;
  r.http_status = status;
  r.ok = status == 200;
  r.body = body;
  r.text = streamed_text;
  if (!r.ok) r.error = "HTTP " + std::to_string(status);
  return r;
}

TEST(SoakClassify, ReferencesStatusesAndVanishedPrefixes) {
  Request gen{"gen", "/v1/chat/completions", "{}", false, 0, Expect::kText, "k"};
  const std::string ref = "Once upon";
  const std::string body = R"({"choices":[{"message":{"content":"Once upon"}}]})";
  std::string why;
  EXPECT_EQ(cli::soak::classify(gen, answered(200, body), &ref, &why), Outcome::kOk);
  EXPECT_EQ(cli::soak::classify(gen, answered(200, body), nullptr, &why), Outcome::kOk);
  const std::string other = "Once a";
  EXPECT_EQ(cli::soak::classify(gen, answered(200, body), &other, &why), Outcome::kMismatch);
  EXPECT_NE(why.find("reference"), std::string::npos);
  EXPECT_EQ(cli::soak::classify(gen, answered(200, "{\"choices\":[]}"), &ref, &why), Outcome::kMismatch);
  EXPECT_EQ(cli::soak::classify(gen, answered(503, "busy"), &ref, &why), Outcome::kUnexpectedStatus);
  EXPECT_EQ(cli::soak::classify(gen, answered(0, ""), &ref, &why), Outcome::kTransportError);

  Request vanish = gen;
  vanish.stream = true;
  vanish.vanish_after_chunks = 2;
  RequestResult partial = answered(200, "", "Once");
  partial.ok = false;
  partial.vanished = true;
  EXPECT_EQ(cli::soak::classify(vanish, partial, &ref, &why), Outcome::kVanished);
  partial.text = "Twice";
  EXPECT_EQ(cli::soak::classify(vanish, partial, &ref, &why), Outcome::kMismatch);

  Request bad{"bad", "/v1/messages", "{", false, 0, Expect::k400, ""};
  EXPECT_EQ(cli::soak::classify(bad, answered(400, "{}"), nullptr, &why), Outcome::kExpected4xx);
  EXPECT_EQ(cli::soak::classify(bad, answered(500, "{}"), nullptr, &why), Outcome::kUnexpectedStatus);
  EXPECT_EQ(cli::soak::classify(bad, answered(200, "{}"), nullptr, &why), Outcome::kUnexpectedStatus);
  bad.expect = Expect::k413;
  EXPECT_EQ(cli::soak::classify(bad, answered(400, "{}"), nullptr, &why), Outcome::kUnexpectedStatus);
  EXPECT_EQ(cli::soak::classify(bad, answered(413, "{}"), nullptr, &why), Outcome::kExpected4xx);

  std::string text;
  const std::string two_blocks = R"({"content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]})";
  ASSERT_TRUE(cli::soak::response_text("/v1/messages", two_blocks, &text));
  EXPECT_EQ(text, "ab");
  ASSERT_TRUE(cli::soak::response_text("/v1/completions", R"({"choices":[{"text":"c"}]})", &text));
  EXPECT_EQ(text, "c");
  EXPECT_FALSE(cli::soak::response_text("/v1/completions", "not json", &text));
}

// `preface serve` on stories260K (`model`) with the soak's limits and `kv_mem` of KV cache.
std::vector<std::string> serve_args(const std::string& model, const std::string& kv_mem) {
  return {"-m", model, "--threads", "1", "--kv-cache-mem", kv_mem, "--max-body-bytes", "65536", "--max-tokens-limit",
          "64", "--max-prompt-tokens", "512", "--debug-invariants", "--header-timeout", "2"};
}

std::string metrics(const std::string& url) {
  httplib::Client c(url);
  const auto res = c.Get("/metrics");
  return res && res->status == 200 ? res->body : "";
}

int64_t summary_value(const std::string& line, const std::string& key) {
  const std::regex re("(^| )" + key + "=(-?[0-9]+)");
  std::smatch m;
  return std::regex_search(line, m, re) ? std::stoll(m[2].str()) : -999;
}

TEST(SoakServe, FourClientsTenSecondsNoMismatchNoLeak) {
  const auto model = shared_file("models/stories260K.gguf");
  if (model.empty()) return;
  // ~200 blocks: the mix overflows it, so blocks are evicted and reused.
  ServeProcess srv(serve_args(model.string(), "2MiB"), "soak");
  ASSERT_FALSE(srv.url().empty()) << srv.log();
  const CliResult r =
      run_bench({"soak", "--url", srv.url(), "--clients", "4", "--seconds", "10", "--seed", "3", "--max-body-bytes",
                   "65536", "--max-tokens-limit", "64", "--max-prompt-tokens", "512"});
  const std::string out = r.all();
  EXPECT_EQ(r.exit_code, 0) << out;
  const size_t at = out.find("soak: PASS requests=");
  ASSERT_NE(at, std::string::npos) << out << srv.log();
  const std::string line = out.substr(at, out.find('\n', at) - at);
  EXPECT_EQ(summary_value(line, "mismatch"), 0) << line;
  EXPECT_EQ(summary_value(line, "unexpected_status"), 0) << line;
  EXPECT_EQ(summary_value(line, "transport_error"), 0) << line;
  EXPECT_EQ(summary_value(line, "kv_blocks_in_use"), 0) << line;
  EXPECT_EQ(summary_value(line, "kv_invariant_failures"), 0) << line;
  EXPECT_GT(summary_value(line, "ok"), 100) << line;
  EXPECT_GT(summary_value(line, "expected_4xx"), 20) << line;
  EXPECT_GT(summary_value(line, "vanished"), 5) << line;
  EXPECT_GT(summary_value(line, "kv_evictions"), 0) << line;
  EXPECT_TRUE(srv.alive());
  // Independently of the client's own check: nothing held, invariants hold, every vanished client was cancelled.
  const std::string m = metrics(srv.url());
  EXPECT_NE(m.find("\npreface_kv_blocks{state=\"used\"} 0\n"), std::string::npos) << m;
  EXPECT_NE(m.find("\npreface_kv_invariants_ok 1\n"), std::string::npos) << m;
  EXPECT_NE(m.find("preface_generations_total{finish=\"cancelled\"} "), std::string::npos) << m;
}

TEST(SoakServe, HelpAndADeadServerFailClearly) {
  EXPECT_EQ(run_bench({"soak", "--help"}).exit_code, 0);
  // Port 1 on loopback: nothing listens there.
  EXPECT_NE(run_bench({"soak", "--url", "http://127.0.0.1:1", "--seconds", "1"}).exit_code, 0);
}

TEST(SoakServe, ClientsThatVanishMidStreamLeaveNoBlockInUse) {
  const auto model = shared_file("models/stories260K.gguf");
  if (model.empty()) return;
  // Long generations (448 of the 512-token context), so none can finish before its client vanishes even when the
  // client threads are descheduled for a while on a busy machine.
  ServeProcess srv({"-m", model.string(), "--threads", "1", "--kv-cache-mem", "8MiB", "--max-tokens-limit", "448",
                    "--debug-invariants"},
                   "soak");
  ASSERT_FALSE(srv.url().empty()) << srv.log();
  const cli::loadgen::Target target = cli::loadgen::parse_url(srv.url(), "");
  const std::string body = R"({"prompt": "Once upon a time", "max_tokens": 448, "ignore_eos": true, "stream": true})";
  std::vector<std::thread> clients;
  std::array<RequestResult, 6> results;
  for (size_t i = 0; i < results.size(); ++i)
    clients.emplace_back([&, i] { results[i] = cli::loadgen::post_request(target, "/v1/completions", body, true, 30,
                                                                           /*vanish_after_chunks=*/2); });
  for (std::thread& t : clients) t.join();
  for (const RequestResult& r : results) {
    EXPECT_TRUE(r.vanished) << r.error;
    EXPECT_EQ(r.http_status, 200);
  }
  // The server notices at its next write and cancels; the blocks must all come back.
  std::string m;
  for (int i = 0; i < 100; ++i) {
    m = metrics(srv.url());
    if (m.find("\npreface_kv_blocks{state=\"used\"} 0\n") != std::string::npos &&
        m.find("preface_generations_total{finish=\"cancelled\"} 6\n") != std::string::npos)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_NE(m.find("\npreface_kv_blocks{state=\"used\"} 0\n"), std::string::npos) << m;
  EXPECT_NE(m.find("preface_generations_total{finish=\"cancelled\"} 6\n"), std::string::npos) << m;
  EXPECT_NE(m.find("\npreface_kv_invariants_ok 1\n"), std::string::npos) << m;
}

}  // namespace
}  // namespace preface::test
