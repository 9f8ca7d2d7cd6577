// `preface serve` start-up hazards (issue 28 item 7): a FIFO given as the model once hung start-up forever (the
// open waited for a writer), and SIGTERM/SIGINT were ignored until the model had loaded.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "cli_harness.h"

namespace preface::test {
namespace {

TEST(ServeStartup, FifoAsTheModelIsAClearErrorAtOnce) {
  const auto fifo = (temp_dir("serve-fifo") / "model.gguf").string();
  std::filesystem::remove(fifo);
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const CliResult r = run_preface({"serve", "--port", "0", "-m", fifo}, "timeout 30");
  EXPECT_NE(r.exit_code, 124) << "start-up hung on the FIFO";
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.all().find("is not a regular file"), std::string::npos) << r.all();
}

// A FIFO given as a key, key list or chat template file once hung start-up the same way (issue 41).
TEST(ServeStartup, FifoAsAKeyOrTemplateFileIsAClearErrorAtOnce) {
  const auto model = shared_file("models/stories260K.gguf");
  ASSERT_FALSE(model.empty()) << "needs ../shared/models/stories260K.gguf";
  const auto fifo = (temp_dir("serve-fifo-files") / "file").string();
  std::filesystem::remove(fifo);
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  for (const char* flag : {"--api-key-file", "--admin-key-file", "--metrics-key-file", "--api-keys",
                           "--chat-template-file"}) {
    const CliResult r = run_preface({"serve", "--port", "0", "-m", model.string(), flag, fifo}, "timeout 30");
    EXPECT_NE(r.exit_code, 124) << flag << ": start-up hung on the FIFO";
    EXPECT_NE(r.exit_code, 0) << flag;
    EXPECT_NE(r.all().find("not a regular file"), std::string::npos) << flag << ": " << r.all();
  }
}

TEST(ServeStartup, SigtermWhileTheModelLoadsEndsTheProcess) {
  const auto model = shared_file("models/stories260K.gguf");
  ASSERT_FALSE(model.empty()) << "needs ../shared/models/stories260K.gguf";
  // stories260K padded with 1 GiB of zeros (sparse): a valid file whose fingerprint takes seconds to hash.
  const auto dir = temp_dir("serve-slow-load");
  const auto big = dir / "padded.gguf";
  std::filesystem::copy_file(model, big, std::filesystem::copy_options::overwrite_existing);
  std::filesystem::resize_file(big, 1ull << 30);
  const auto log = (dir / "server.log").string();
  const std::string cmd = "XDG_CACHE_HOME=" + quote((dir / "cache").string()) + " " + quote(PREFACE_BINARY) +
                          " serve --port 0 -m " + quote(big.string()) + " >" + quote(log) + " 2>&1 & echo $!";
  FILE* p = ::popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  int pid = 0;
  ASSERT_EQ(std::fscanf(p, "%d", &pid), 1);
  ::pclose(p);
  for (int i = 0; i < 400 && slurp(log).find("listening on") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_NE(slurp(log).find("listening on"), std::string::npos) << slurp(log);
  ASSERT_EQ(slurp(log).find("serving model"), std::string::npos) << "loaded too fast to test";
  const auto t0 = std::chrono::steady_clock::now();
  ::kill(pid, SIGTERM);
  bool gone = false;
  while (std::chrono::steady_clock::now() - t0 < std::chrono::seconds(3)) {
    if (::kill(pid, 0) != 0) {
      gone = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (!gone) ::kill(pid, SIGKILL);
  EXPECT_TRUE(gone) << "SIGTERM ignored while loading: " << slurp(log);
  EXPECT_NE(slurp(log).find("SIGTERM received while loading the model"), std::string::npos) << slurp(log);
  std::filesystem::remove(big);
}

}  // namespace
}  // namespace preface::test
