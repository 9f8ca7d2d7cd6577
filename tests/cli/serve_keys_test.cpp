// `preface serve` key configuration (issue 28 item 10): a key on the command line is visible in /proc/PID/cmdline,
// so it can come from PREFACE_API_KEY or --api-key-file; a keys-file tenant named "default" would share
// --api-key's cache and is refused.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include "cli_harness.h"

namespace preface::test {
namespace {

int status_of(const std::string& url, const std::string& key) {
  httplib::Client c(url);
  httplib::Headers h;
  if (!key.empty()) h.emplace("Authorization", "Bearer " + key);
  const auto res = c.Get("/v1/models", h);
  return res ? res->status : -1;
}

TEST(ServeKeys, DefaultTenantInTheKeysFileIsRefused) {
  const auto keys = (temp_dir("api-keys-clash") / "keys.txt").string();
  std::ofstream(keys) << "k-one alice\nk-two default\n";
  const CliResult r = run_preface({"serve", "--port", "0", "--api-keys", keys, "--api-key", "k-three"}, "timeout 30");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.all().find("tenant 'default'"), std::string::npos) << r.all();
}

TEST(ServeKeys, KeyFromTheEnvironmentOrAFile) {
  const auto model = shared_file("models/stories260K.gguf");
  ASSERT_FALSE(model.empty()) << "needs ../shared/models/stories260K.gguf";
  {
    ::setenv("PREFACE_API_KEY", "from-env", 1);
    ServeProcess srv({"-m", model.string(), "--quiet"}, "keys-env");
    ::unsetenv("PREFACE_API_KEY");
    ASSERT_FALSE(srv.url().empty()) << srv.log();
    EXPECT_EQ(status_of(srv.url(), ""), 401);
    EXPECT_EQ(status_of(srv.url(), "from-env"), 200);
  }
  const auto key_file = (temp_dir("api-key-file") / "key").string();
  std::ofstream(key_file) << "from-file\n";
  ServeProcess srv({"-m", model.string(), "--quiet", "--api-key-file", key_file}, "keys-file");
  ASSERT_FALSE(srv.url().empty()) << srv.log();
  EXPECT_EQ(status_of(srv.url(), "wrong"), 401);
  EXPECT_EQ(status_of(srv.url(), "from-file"), 200);
}

// --admin-key-file and PREFACE_ADMIN_KEY, like the API key's: the admin key need not be on the command line.
TEST(ServeKeys, AdminKeyFromAFileOrTheEnvironment) {
  const auto model = shared_file("models/stories260K.gguf");
  ASSERT_FALSE(model.empty()) << "needs ../shared/models/stories260K.gguf";
  const auto purge_status = [](const std::string& url, const std::string& key) {
    httplib::Client c(url);
    const auto r = c.Delete("/v1/cache", {{"Authorization", "Bearer " + key}}, R"({"tenant": "t"})",
                            "application/json");
    return r ? r->status : -1;
  };
  const auto key_file = (temp_dir("admin-key-file") / "key").string();
  std::ofstream(key_file) << "adm-file\n";
  {
    ServeProcess srv({"-m", model.string(), "--quiet", "--admin-key-file", key_file}, "admin-key-file");
    ASSERT_FALSE(srv.url().empty()) << srv.log();
    EXPECT_EQ(purge_status(srv.url(), "wrong"), 401);
    EXPECT_EQ(purge_status(srv.url(), "adm-file"), 200);
  }
  ::setenv("PREFACE_ADMIN_KEY", "adm-env", 1);
  ServeProcess srv({"-m", model.string(), "--quiet"}, "admin-key-env");
  ::unsetenv("PREFACE_ADMIN_KEY");
  ASSERT_FALSE(srv.url().empty()) << srv.log();
  EXPECT_EQ(purge_status(srv.url(), "wrong"), 401);
  EXPECT_EQ(purge_status(srv.url(), "adm-env"), 200);
}

}  // namespace
}  // namespace preface::test
