#include "support/shared_data.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <mutex>
#include <system_error>
#include <vector>

namespace preface::test {

std::filesystem::path shared_dir() {
  const auto dir = std::filesystem::path(PREFACE_SOURCE_DIR) / ".." / "shared";
  if (!std::filesystem::is_directory(dir / "models")) {
    ADD_FAILURE() << "test data not found: expected ../shared/models beside the project root ("
                  << dir.lexically_normal().string()
                  << "). These tests need the shared models, vocabularies and oracle; see README.md.";
    return {};
  }
  return dir.lexically_normal();
}

std::filesystem::path shared_file(const std::string& rel) {
  const auto dir = shared_dir();
  if (dir.empty()) return {};
  const auto path = dir / rel;
  if (!std::filesystem::exists(path)) {
    ADD_FAILURE() << "shared test file missing: " << path.string();
    return {};
  }
  return path;
}

namespace {

// The directories temp_dir made in this process, removed when it exits normally (a crashed test leaves its own).
struct TempDirs {
  std::mutex mutex;
  std::vector<std::filesystem::path> dirs;
  ~TempDirs() {
    for (const auto& d : dirs) {
      std::error_code ec;
      std::filesystem::remove_all(d, ec);
    }
  }
};

TempDirs& temp_dirs() {
  static TempDirs t;
  return t;
}

}  // namespace

std::filesystem::path temp_dir(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("preface-test-" + std::to_string(::getpid()) + "-" + name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  TempDirs& t = temp_dirs();
  const std::lock_guard<std::mutex> lock(t.mutex);
  t.dirs.push_back(dir);
  return dir;
}

}  // namespace preface::test
