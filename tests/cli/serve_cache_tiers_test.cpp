// The cache tiers below RAM through real `preface serve` processes on loopback: the disk tier survives a restart
// (SIGTERM: the whole cache is written on the way out; SIGKILL: what --cache-write-through wrote), and the Redis
// tier shares blocks between two servers, keeps tenants apart and turns an outage into misses, never failed
// requests. "Exact" compares the generated text and the logprobs JSON of a cold server (no tiers), whose floats
// nlohmann prints with round-trip precision.
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>

#include "cli_harness.h"
#include "loopback_services.h"

namespace preface::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr int kBlock = 16;
constexpr int kPromptTokens = 12 * kBlock + 5;

std::string model_path() { return shared_file("models/stories260K.gguf").string(); }

json request_body(int variant) {
  json prompt = json::array();
  for (int i = 0; i < kPromptTokens; ++i) prompt.push_back(3 + (i * 7 + variant * 31 + i * i * variant) % 480);
  return {{"prompt", prompt}, {"max_tokens", 6}, {"temperature", 0}, {"logprobs", 3}};
}

struct Reply {
  int status = -1;
  json body;
  std::string output() const {  // what must be bit-identical: text and logprobs
    if (status != 200) return "status " + std::to_string(status);
    return body["choices"][0]["text"].dump() + body["choices"][0]["logprobs"].dump();
  }
  int cached() const { return body["usage"]["prompt_tokens_details"].value("cached_tokens", -1); }
  int tier() const { return body["usage"]["prompt_tokens_details"].value("cache_tier_tokens", 0); }
};

Reply complete(const std::string& url, int variant, const std::string& key = "") {
  httplib::Client c(url);
  c.set_read_timeout(60, 0);
  httplib::Headers h;
  if (!key.empty()) h.emplace("Authorization", "Bearer " + key);
  Reply r;
  if (auto res = c.Post("/v1/completions", h, request_body(variant).dump(), "application/json")) {
    r.status = res->status;
    r.body = json::parse(res->body, nullptr, false);
  }
  return r;
}

// The value of one sample of /metrics (name with its labels, exactly as printed); -1 when absent.
std::string fresh_dir(const std::string& name) {
  const fs::path d = temp_dir("serve-tiers") / name;
  fs::remove_all(d);
  return d.string();
}

std::vector<std::string> serve_args(std::vector<std::string> extra) {
  std::vector<std::string> a = {"-m", model_path(), "--threads", "1", "--kv-cache-mem", "8MiB", "--quiet"};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

std::string cold_output(int variant) {
  ServeProcess cold(serve_args({}), "tiers-cold");
  EXPECT_FALSE(cold.url().empty()) << cold.log();
  return complete(cold.url(), variant).output();
}

void restart_case(int sig) {
  if (model_path().empty()) GTEST_SKIP() << "stories260K.gguf not available";
  const std::string expected = cold_output(1);
  const std::string dir = fresh_dir(sig == SIGKILL ? "kill" : "term");
  {
    std::vector<std::string> extra = {"--cache-dir", dir, "--cache-disk-size", "1GiB"};
    if (sig == SIGKILL) extra.push_back("--cache-write-through");
    ServeProcess a(serve_args(extra), "tiers-a");
    ASSERT_FALSE(a.url().empty()) << a.log();
    const Reply r = complete(a.url(), 1);
    EXPECT_EQ(r.output(), expected);
    if (sig == SIGKILL) {  // only what is on disk survives a kill: wait for the write-through of the 12 blocks
      ASSERT_TRUE(wait_until([&] {
        return metric(a.url(), "preface_kv_tier_written_records_total{tier=\"disk\"}") >= 12;
      })) << a.log();
    }
    const int code = a.signal_and_wait(sig, std::chrono::seconds(60));  // exit status; -1: killed
    if (sig == SIGKILL) EXPECT_EQ(code, -1);
    else EXPECT_EQ(code, 0) << a.log();
  }
  ServeProcess b(serve_args({"--cache-dir", dir, "--cache-disk-size", "1GiB"}), "tiers-b");
  ASSERT_FALSE(b.url().empty()) << b.log();
  const Reply r = complete(b.url(), 1);
  EXPECT_EQ(r.output(), expected) << "served from disk";
  EXPECT_EQ(r.cached(), 12 * kBlock);
  EXPECT_EQ(r.tier(), 12 * kBlock);
  EXPECT_EQ(metric(b.url(), "preface_kv_tier_hit_blocks_total{tier=\"disk\"}"), 12);
}

TEST(ServeCacheTiers, DiskSurvivesSigterm) { restart_case(SIGTERM); }

// --cache-tier-key-file: the disk records hold no prompt tokens in clear; a server with the key is served from them
// bit-identically; a server without it rejects them (reason "unauthenticated") and computes instead.
TEST(ServeCacheTiers, SealedDiskRecordsServeOnlyTheKeyHolder) {
  if (model_path().empty()) GTEST_SKIP() << "stories260K.gguf not available";
  const std::string expected = cold_output(2);
  const std::string dir = fresh_dir("sealed");
  const std::string key = (fs::path(fresh_dir("sealed-key")) / "key").string();
  fs::create_directories(fs::path(key).parent_path());
  std::ofstream(key) << "3f1c0ffee0ddf00d5eed5eed5eed5eed\n";
  const std::vector<std::string> keyed = {"--cache-dir", dir,  "--cache-disk-size", "1GiB",
                                          "--cache-tier-key-file", key};
  {
    std::vector<std::string> extra = keyed;
    extra.push_back("--cache-write-through");
    ServeProcess a(serve_args(extra), "tiers-sealed-a");
    ASSERT_FALSE(a.url().empty()) << a.log();
    EXPECT_EQ(complete(a.url(), 2).output(), expected);
    ASSERT_TRUE(wait_until([&] {
      return metric(a.url(), "preface_kv_tier_written_records_total{tier=\"disk\"}") >= 12;
    })) << a.log();
    EXPECT_EQ(a.signal_and_wait(SIGTERM, std::chrono::seconds(60)), 0) << a.log();
  }
  // The first four prompt tokens as they would lie in an unsealed record's header.
  std::string needle;
  for (int i = 0; i < 4; ++i) {
    const uint32_t t = request_body(2)["prompt"][i].get<uint32_t>();
    for (int b = 0; b < 4; ++b) needle.push_back(static_cast<char>(t >> (8 * b)));
  }
  int n_records = 0;
  for (const auto& e : fs::recursive_directory_iterator(fs::path(dir) / "kv")) {
    if (!e.is_regular_file() || e.path().extension() != ".kvb") continue;
    std::ifstream in(e.path(), std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(bytes.find(needle), std::string::npos) << e.path();
    ++n_records;
  }
  EXPECT_GE(n_records, 12);
  {
    ServeProcess b(serve_args(keyed), "tiers-sealed-b");
    ASSERT_FALSE(b.url().empty()) << b.log();
    const Reply r = complete(b.url(), 2);
    EXPECT_EQ(r.output(), expected) << "served from sealed records";
    EXPECT_EQ(r.tier(), 12 * kBlock);
  }
  ServeProcess c(serve_args({"--cache-dir", dir, "--cache-disk-size", "1GiB"}), "tiers-sealed-c");
  ASSERT_FALSE(c.url().empty()) << c.log();
  const Reply r = complete(c.url(), 2);
  EXPECT_EQ(r.output(), expected);
  EXPECT_EQ(r.tier(), 0);
  EXPECT_GE(metric(c.url(), "preface_kv_tier_rejected_records_total{tier=\"disk\",reason=\"unauthenticated\"}"),
            1);
}

TEST(ServeCacheTiers, TierKeyFileWithoutATierIsRefused) {
  if (model_path().empty()) GTEST_SKIP() << "stories260K.gguf not available";
  const CliResult r = run_preface({"serve", "-m", model_path(), "--cache-tier-key-file", "/nonexistent"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("--cache-tier-key-file needs a tier"), std::string::npos) << r.err;
}
TEST(ServeCacheTiers, DiskWriteThroughSurvivesSigkill) { restart_case(SIGKILL); }

TEST(ServeCacheTiers, RedisSharesBlocksBetweenServersAndKeepsTenantsApart) {
  if (model_path().empty()) GTEST_SKIP() << "stories260K.gguf not available";
  if (!have_program("redis-server")) GTEST_SKIP() << "redis-server is not installed (scripts/setup installs it)";
  const std::string expected = cold_output(1);
  const int port = free_port();
  auto redis = std::make_unique<RedisProcess>(port);
  ASSERT_TRUE(redis->ready()) << "redis-server did not start on port " << port;
  const std::string keys = (temp_dir("serve-tiers") / "keys.txt").string();
  std::ofstream(keys) << "key-one tenant-one\nkey-two tenant-two\n";
  const std::vector<std::string> extra = {"--cache-redis", redis->url(), "--api-keys", keys,
                                          "--cache-redis-timeout-ms", "5000"};
  ServeProcess a(serve_args(extra), "tiers-redis-a");
  ServeProcess b(serve_args(extra), "tiers-redis-b");
  ASSERT_FALSE(a.url().empty()) << a.log();
  ASSERT_FALSE(b.url().empty()) << b.log();
  const std::string written = "preface_kv_tier_written_records_total{tier=\"redis\"}";

  const Reply on_a = complete(a.url(), 1, "key-one");
  EXPECT_EQ(on_a.output(), expected);
  ASSERT_TRUE(wait_until([&] { return metric(a.url(), written) >= 12; })) << a.log();

  const Reply other_tenant = complete(b.url(), 1, "key-two");
  EXPECT_EQ(other_tenant.output(), expected);
  EXPECT_EQ(other_tenant.cached(), 0) << "another tenant's blocks must never hit";
  const Reply same_tenant = complete(b.url(), 1, "key-one");
  EXPECT_EQ(same_tenant.output(), expected) << "served from Redis";
  EXPECT_EQ(same_tenant.tier(), 12 * kBlock);
  EXPECT_EQ(metric(b.url(), "preface_kv_tier_hit_blocks_total{tier=\"redis\"}"), 12);

  // Redis goes away mid-traffic: every request is still answered, exactly; the failures are counted.
  std::vector<std::string> before;
  for (int v = 2; v < 5; ++v) before.push_back(cold_output(v));
  redis->stop();
  for (int v = 2; v < 5; ++v) {
    for (const std::string& url : {a.url(), b.url()}) {
      const Reply r = complete(url, v, "key-one");
      EXPECT_EQ(r.status, 200);
      EXPECT_EQ(r.output(), before[static_cast<size_t>(v - 2)]);
    }
  }
  EXPECT_GT(metric(a.url(), "preface_kv_tier_errors_total{tier=\"redis\"}"), 0);
  EXPECT_GT(metric(b.url(), "preface_kv_tier_errors_total{tier=\"redis\"}"), 0);
  EXPECT_EQ(metric(a.url(), "preface_kv_tier_up{tier=\"redis\"}"), 0);
  EXPECT_NE(a.log().find("Redis KV cache tier at " + redis->url() + " is down"), std::string::npos) << a.log();

  // Back on the same port: the servers reconnect (after their backoff, at most 5 s) and share again.
  redis = std::make_unique<RedisProcess>(port);
  ASSERT_TRUE(redis->ready());
  int variant = 10;
  const double w0 = metric(a.url(), written);
  ASSERT_TRUE(wait_until([&] {
    EXPECT_EQ(complete(a.url(), ++variant, "key-one").status, 200);
    return metric(a.url(), written) > w0;
  }, 20000)) << "A never wrote to Redis again";
  // B failed last while Redis was away, so its backoff may outlast A's: a fresh prompt each try (a miss on B
  // leaves that prompt in B's RAM), until B loads one from Redis.
  Reply fresh, shared;
  ASSERT_TRUE(wait_until([&] {
    const double w1 = metric(a.url(), written);
    fresh = complete(a.url(), ++variant, "key-one");
    if (!wait_until([&] { return metric(a.url(), written) >= w1 + 12; })) return false;
    shared = complete(b.url(), variant, "key-one");
    return shared.tier() == 12 * kBlock;
  })) << "B never loaded from Redis again";
  EXPECT_EQ(shared.output(), fresh.output());
  EXPECT_EQ(shared.output(), cold_output(variant));
  EXPECT_EQ(metric(a.url(), "preface_kv_tier_up{tier=\"redis\"}"), 1);
  EXPECT_NE(a.log().find("Redis KV cache tier at " + redis->url() + " answers again"), std::string::npos) << a.log();
}


// Redis with a password (--requirepass): two servers given it in the URL share blocks, and it appears in no log
// line; a wrong password or none stops start-up with the server's refusal, the password masked.
TEST(ServeCacheTiers, RedisWithAPasswordSharesBlocksAndNeverPrintsIt) {
  if (model_path().empty()) GTEST_SKIP() << "stories260K.gguf not available";
  if (!have_program("redis-server")) GTEST_SKIP() << "redis-server is not installed (scripts/setup installs it)";
  const std::string password = "pw-Secret-71";
  const int port = free_port();
  RedisProcess redis(port, {"--requirepass", password});
  ASSERT_TRUE(redis.ready()) << "redis-server did not start on port " << port;
  const std::string host = "127.0.0.1:" + std::to_string(port) + "/0";
  const std::vector<std::string> extra = {"--cache-redis", "redis://:" + password + "@" + host,
                                          "--cache-redis-timeout-ms", "5000"};
  ServeProcess a(serve_args(extra), "tiers-redis-auth-a");
  ServeProcess b(serve_args(extra), "tiers-redis-auth-b");
  ASSERT_FALSE(a.url().empty()) << a.log();
  ASSERT_FALSE(b.url().empty()) << b.log();
  const Reply first = complete(a.url(), 3);
  ASSERT_EQ(first.status, 200);
  ASSERT_TRUE(wait_until([&] { return metric(a.url(), "preface_kv_tier_written_records_total{tier=\"redis\"}") >= 12; }))
      << a.log();
  const Reply shared = complete(b.url(), 3);
  EXPECT_EQ(shared.output(), first.output());
  EXPECT_EQ(shared.tier(), 12 * kBlock) << "served from Redis through AUTH";
  EXPECT_EQ(metric(a.url(), "preface_kv_tier_errors_total{tier=\"redis\"}"), 0);
  for (const ServeProcess* s : {&a, &b}) {
    EXPECT_EQ(s->log().find(password), std::string::npos) << s->log();
    EXPECT_NE(s->log().find("redis://:***@" + host), std::string::npos) << s->log();
  }
  for (const std::string& url : {"redis://:wrong-" + password + "@" + host, "redis://" + host}) {
    const CliResult r = run_preface({"serve", "-m", model_path(), "--threads", "1", "--kv-cache-mem", "8MiB",
                                     "--port", "0", "--cache-redis", url});
    EXPECT_NE(r.exit_code, 0) << url;
    EXPECT_NE(r.err.find("refused the credentials"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find(password), std::string::npos) << r.err;
    EXPECT_EQ(r.out.find(password), std::string::npos) << r.out;
  }
}

// A test CA and a certificate for 127.0.0.1 signed by it (ca.pem, server.pem, server.key in dir), and a second,
// unrelated CA (other-ca.pem); false when openssl fails.
bool make_test_certificates(const std::filesystem::path& dir) {
  const std::string d = dir.string();
  const std::string ec = " -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
  const std::string script =
      "set -e; cd '" + d + "'; printf 'subjectAltName=IP:127.0.0.1\\n' > san.ext;"
      " openssl req -x509" + ec + " -keyout ca.key -out ca.pem -days 2 -subj /CN=preface-test-ca;"
      " openssl req -x509" + ec + " -keyout other-ca.key -out other-ca.pem -days 2 -subj /CN=another-ca;"
      " openssl req" + ec + " -keyout server.key -out server.csr -subj /CN=127.0.0.1;"
      " openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem -days 2"
      " -extfile san.ext; chmod 644 server.key";
  return run_binary("/bin/bash", {"-c", script}).exit_code == 0;
}

TEST(ServeCacheTiers, RedisOverTlsSharesBlocksAndRefusesAnUnknownCertificate) {
  if (model_path().empty()) GTEST_SKIP() << "stories260K.gguf not available";
  if (!have_program("redis-server")) GTEST_SKIP() << "redis-server is not installed (scripts/setup installs it)";
  if (!have_program("openssl")) GTEST_SKIP() << "openssl is not installed";
  const auto dir = temp_dir("tiers-redis-tls");
  ASSERT_TRUE(make_test_certificates(dir));
  const std::string password = "tls-Secret-5";
  const int port = free_port();
  const std::string d = dir.string();
  RedisProcess redis(port, {"--port", "0", "--tls-port", std::to_string(port), "--tls-cert-file", d + "/server.pem",
                            "--tls-key-file", d + "/server.key", "--tls-ca-cert-file", d + "/ca.pem",
                            "--tls-auth-clients", "no", "--requirepass", password});
  ASSERT_TRUE(redis.ready()) << "redis-server did not start with TLS on port " << port;
  const std::string url = "rediss://:" + password + "@127.0.0.1:" + std::to_string(port) + "/0";
  const std::vector<std::string> extra = {"--cache-redis", url, "--cache-redis-tls-ca", d + "/ca.pem",
                                          "--cache-redis-timeout-ms", "5000"};
  ServeProcess a(serve_args(extra), "tiers-redis-tls-a");
  ServeProcess b(serve_args(extra), "tiers-redis-tls-b");
  ASSERT_FALSE(a.url().empty()) << a.log();
  ASSERT_FALSE(b.url().empty()) << b.log();
  const Reply first = complete(a.url(), 5);
  ASSERT_EQ(first.status, 200);
  ASSERT_TRUE(wait_until([&] { return metric(a.url(), "preface_kv_tier_written_records_total{tier=\"redis\"}") >= 12; }))
      << a.log();
  const Reply shared = complete(b.url(), 5);
  EXPECT_EQ(shared.output(), first.output());
  EXPECT_EQ(shared.tier(), 12 * kBlock) << "served from Redis over TLS";
  EXPECT_EQ(metric(a.url(), "preface_kv_tier_errors_total{tier=\"redis\"}"), 0);
  EXPECT_EQ(metric(b.url(), "preface_kv_tier_up{tier=\"redis\"}"), 1);
  EXPECT_EQ(a.log().find(password), std::string::npos) << a.log();

  // A CA that did not sign the server's certificate: the tier is down with the reason, requests are served.
  const std::vector<std::string> wrong = {"--cache-redis", url, "--cache-redis-tls-ca", d + "/other-ca.pem",
                                          "--cache-redis-timeout-ms", "2000"};
  ServeProcess c(serve_args(wrong), "tiers-redis-tls-wrong-ca");
  ASSERT_FALSE(c.url().empty()) << c.log();
  EXPECT_EQ(complete(c.url(), 6).status, 200);
  EXPECT_EQ(metric(c.url(), "preface_kv_tier_up{tier=\"redis\"}"), 0);
  EXPECT_GT(metric(c.url(), "preface_kv_tier_errors_total{tier=\"redis\"}"), 0);
  EXPECT_NE(c.log().find("TLS certificate"), std::string::npos) << c.log();
}

}  // namespace
}  // namespace preface::test
