#include "support/shared_data.h"

#include <gtest/gtest.h>
#include <unistd.h>

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

std::filesystem::path temp_dir(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("preface-test-" + std::to_string(::getpid()) + "-" + name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace preface::test
