// Memory per group (issue 40): `preface kv -m MODEL` and the server's start-up summary print what each group of
// layers with equal memory specs costs: one paged group for a Llama-shaped model; gemma2's local (windowed, even)
// and global (odd) layers as two.
#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "cli_harness.h"
#include "support/shared_data.h"

namespace preface::test {
namespace {

nlohmann::json kv_json(const std::string& model) {
  const CliResult r = run_preface({"kv", "-m", model, "--json", "--no-measure"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return nlohmann::json::parse(r.out);
}

TEST(CliKvGroups, OneGroupForALlamaShape) {
  const auto model = shared_file("models/stories260K.gguf");
  ASSERT_FALSE(model.empty()) << "needs ../shared/models/stories260K.gguf";
  const auto j = kv_json(model.string());
  ASSERT_EQ(j["memory_groups"].size(), 1u);
  const auto& g = j["memory_groups"][0];
  EXPECT_EQ(g["kind"], "paged rows");
  EXPECT_EQ(g["layers"].size(), j["shape"]["n_layers"].get<size_t>());
  EXPECT_EQ(g["window"], 0);
  for (const char* t : {"f32", "f16", "bf16"}) EXPECT_EQ(g["bytes_per_token"][t], j["bytes_per_token"][t]) << t;
}

TEST(CliKvGroups, GemmaLocalAndGlobalLayersAreTwoGroups) {
  const auto model = shared_file("models/synth-gemma2-d128-f16.gguf");
  ASSERT_FALSE(model.empty()) << "needs ../shared/models/synth-gemma2-d128-f16.gguf";
  const auto j = kv_json(model.string());
  ASSERT_EQ(j["memory_groups"].size(), 2u);
  const auto& local = j["memory_groups"][0];
  const auto& global = j["memory_groups"][1];
  EXPECT_GT(local["window"].get<int>(), 0);
  EXPECT_EQ(global["window"], 0);
  EXPECT_EQ(local["layers"][0], 0);
  EXPECT_EQ(local["layers"][1], 2);
  EXPECT_EQ(global["layers"][0], 1);
  EXPECT_EQ(local["layers"].size() + global["layers"].size(), j["shape"]["n_layers"].get<size_t>());
  for (const char* t : {"f32", "f16", "bf16", "q8_0"}) {
    EXPECT_EQ(local["bytes_per_token"][t].get<uint64_t>() + global["bytes_per_token"][t].get<uint64_t>(),
              j["bytes_per_token"][t].get<uint64_t>())
        << t;
  }
  const CliResult text = run_preface({"kv", "-m", model.string(), "--no-measure"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("memory      group 1 of 2: layers 0, 2, 4,"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("memory      group 2 of 2: layers 1, 3, 5,"), std::string::npos) << text.out;

  ServeProcess srv({"-m", model.string(), "--threads", "1"}, "kv-groups");
  ASSERT_FALSE(srv.url().empty()) << srv.log();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (srv.log().find("memory group 2 of 2") == std::string::npos && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const std::string log = srv.log();
  EXPECT_NE(log.find("preface: memory group 1 of 2: layers 0, 2, 4,"), std::string::npos) << log;
  EXPECT_NE(log.find("window"), std::string::npos) << log;
  EXPECT_NE(log.find("preface: memory group 2 of 2: layers 1, 3, 5,"), std::string::npos) << log;
}

// --context: what one sequence holds per group, with and without the windowed layers' own pool.
TEST(CliKvGroups, ContextShowsTheWindowReclaim) {
  const CliResult r = run_preface({"kv", "--shape", "gemma4-31b", "--context", "32768", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  const auto& c = j["context"];
  ASSERT_EQ(c["groups"].size(), 2u);
  EXPECT_EQ(c["groups"][0]["n_blocks_kept"], 2048);
  EXPECT_EQ(c["groups"][0]["n_blocks_window_reclaim"], 64);
  EXPECT_EQ(c["groups"][1]["n_blocks_window_reclaim"], 2048);
  EXPECT_LT(c["bytes_window_reclaim"].get<double>(), 0.2 * c["bytes_kept"].get<double>());
  const CliResult text = run_preface({"kv", "--shape", "gemma4-31b", "--context", "32768"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("with --kv-window-reclaim on"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("64 blocks = 800 MiB with the window reclaimed"), std::string::npos) << text.out;
}

}  // namespace
}  // namespace preface::test
