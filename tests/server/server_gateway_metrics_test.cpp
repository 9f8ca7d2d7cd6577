// The gauges the Gateway API Inference Extension's endpoint picker reads under vLLM's names
// (server/observability/metrics_gateway.h): the older KV usage name, the cache configuration in labels, and the LoRA info
// series with no adapter; the preface_* series stay as they were.
#include <chrono>
#include <regex>
#include <string>
#include <thread>

#include "server_harness.h"

namespace preface::test {
namespace {

// The value of the one sample whose name and labels match `re` (the whole line but the value), or -1.
double sample_matching(const std::string& text, const std::string& re) {
  std::smatch m;
  if (!std::regex_search(text, m, std::regex("\n" + re + " ([0-9.e+-]+)\n"))) return -1;
  return std::stod(m[1].str());
}

TEST(ServerGatewayMetrics, EndpointPickerGaugesDescribeThePool) {
  TestServerConfig cfg;
  cfg.engine.block_size = 16;
  TestServer server(cfg);
  if (!server.ok()) GTEST_FAIL() << "needs ../shared/models/stories260K.gguf";
  auto c = server.client();
  ASSERT_EQ(post(*c, "/v1/completions", json{{"prompt", "Once upon a time"}, {"max_tokens", 2}}).status, 200);
  const std::string model = R"(model_name="stories260K\.gguf")";
  // The engine publishes its counters after the step that finished the request, which may end after the reply.
  double t0 = 0;
  std::string m;
  for (int i = 0; i < 500; ++i) {
    t0 = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    const auto res = c->Get("/metrics");
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, 200);
    m = res->body;
    if (sample_matching(m, "vllm:num_requests_running\\{" + model + "\\}") == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(sample_matching(m, "vllm:gpu_cache_usage_perc\\{" + model + "\\}"), 0) << m;
  EXPECT_EQ(sample_matching(m, "vllm:kv_cache_usage_perc\\{" + model + "\\}"), 0);
  EXPECT_EQ(sample_matching(m, "vllm:num_requests_waiting\\{" + model + "\\}"), 0);
  EXPECT_EQ(sample_matching(m, "vllm:num_requests_running\\{" + model + "\\}"), 0);

  // num_gpu_blocks is the pool's size, as preface_kv_blocks_capacity says.
  std::smatch blocks;
  ASSERT_TRUE(std::regex_search(m, blocks, std::regex("\npreface_kv_blocks_capacity ([0-9]+)\n"))) << m;
  EXPECT_EQ(sample_matching(m, "vllm:cache_config_info\\{" + model + R"(,block_size="16",num_gpu_blocks=")" +
                                   blocks[1].str() + R"(",cache_dtype="f16",cache_dtype_k="f16",)"
                                   R"(cache_dtype_v="f16",kv_rotate_k="False",kv_rotate_v="False",)"
                                   R"(enable_prefix_caching="True"\})"),
            1)
      << m;
  const double lora = sample_matching(m, "vllm:lora_requests_info\\{" + model +
                                             R"(,max_lora="0",running_lora_adapters="",waiting_lora_adapters=""\})");
  EXPECT_GE(lora, t0 - 2) << m;
  EXPECT_LE(lora, t0 + 60);
  // Every family has its HELP and TYPE lines.
  for (const char* name : {"vllm:gpu_cache_usage_perc", "vllm:cache_config_info", "vllm:lora_requests_info"}) {
    EXPECT_NE(m.find(std::string("# TYPE ") + name + " gauge\n"), std::string::npos) << name;
    EXPECT_NE(m.find(std::string("# HELP ") + name + " "), std::string::npos) << name;
  }
}

}  // namespace
}  // namespace preface::test
