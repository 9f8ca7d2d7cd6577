// `preface serve --no-mmap` (issue 28 item 7): the model is read into memory, so a model file truncated while the
// server runs (a deploy overwriting it in place) no longer crashes the next request with SIGBUS.
#include <gtest/gtest.h>

#include <filesystem>

#include "cli_harness.h"

namespace preface::test {
namespace {

int complete(const std::string& url) {
  httplib::Client c(url);
  c.set_read_timeout(std::chrono::seconds(60));
  const auto res = c.Post("/v1/completions", R"({"prompt": "Once upon a time", "max_tokens": 8, "temperature": 0})",
                          "application/json");
  return res ? res->status : -1;
}

TEST(ServeNoMmap, ModelTruncatedWhileServingKeepsServing) {
  const auto model = shared_file("models/stories260K.gguf");
  ASSERT_FALSE(model.empty()) << "needs ../shared/models/stories260K.gguf";
  const auto copy = temp_dir("no-mmap-model") / "model.gguf";
  std::filesystem::copy_file(model, copy, std::filesystem::copy_options::overwrite_existing);
  ServeProcess srv({"-m", copy.string(), "--quiet", "--no-mmap"}, "no-mmap");
  ASSERT_FALSE(srv.url().empty()) << srv.log();
  EXPECT_EQ(complete(srv.url()), 200);
  std::filesystem::resize_file(copy, 0);
  EXPECT_EQ(complete(srv.url()), 200) << srv.log();
  EXPECT_TRUE(srv.alive()) << srv.log();
}

}  // namespace
}  // namespace preface::test
