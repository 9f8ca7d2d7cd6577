// Locating the read-only test data in ../shared (beside the project root) and scratch space for tests.
#pragma once
#include <filesystem>
#include <string>

namespace preface::test {

// The ../shared directory. When it is absent the calling test fails with a message saying so
// (use as: auto dir = shared_dir(); if (dir.empty()) return;).
std::filesystem::path shared_dir();
// shared_dir() / rel, failing the test when the file is absent.
std::filesystem::path shared_file(const std::string& rel);
// A fresh empty directory under the system's temp area, removed (with what is in it) when the process exits
// normally.
std::filesystem::path temp_dir(const std::string& name);

}  // namespace preface::test
