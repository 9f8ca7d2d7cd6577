// MappedFile: the mapping holds the file's bytes; release drops whole pages of a range from resident memory and
// leaves every byte readable as the file's.
#include "util/mapped_file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "support/shared_data.h"
#include "util/error.h"

namespace preface {
namespace {

// Byte i of the test files: varies within and across pages.
uint8_t pattern_byte(size_t i) { return static_cast<uint8_t>((i * 7 + i / 4096) % 251); }

// A file of n bytes, byte i = pattern_byte(i).
std::string write_pattern(const std::string& name, size_t n) {
  std::vector<char> bytes(n);
  for (size_t i = 0; i < n; ++i) bytes[i] = static_cast<char>(pattern_byte(i));
  const std::string path = (test::temp_dir("mapped-file") / name).string();
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(n));
  return path;
}

bool holds_pattern(const uint8_t* p, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (p[i] != pattern_byte(i)) return false;
  }
  return true;
}

// Resident pages of this process (/proc/self/statm, second field).
long resident_pages() {
  long size = 0, resident = 0;
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return -1;
  if (std::fscanf(f, "%ld %ld", &size, &resident) != 2) resident = -1;
  std::fclose(f);
  return resident;
}

TEST(MappedFile, MapsTheWholeFile) {
  const size_t n = 3 * 4096 + 17;
  const MappedFile map(write_pattern("whole.bin", n));
  ASSERT_EQ(map.size_bytes(), n);
  EXPECT_TRUE(holds_pattern(map.data(), n));
}

// Mode::Copy (--no-mmap): the same bytes, held in memory, so truncating or rewriting the file changes nothing.
TEST(MappedFile, CopyModeSurvivesTheFileBeingTruncated) {
  const size_t n = 5 * 4096 + 3;
  const std::string path = write_pattern("copy.bin", n);
  const MappedFile copy(path, MappedFile::Mode::Copy);
  ASSERT_EQ(copy.size_bytes(), n);
  std::filesystem::resize_file(path, 0);
  EXPECT_TRUE(holds_pattern(copy.data(), n));  // with Mode::Map this read would raise SIGBUS
  EXPECT_THROW(MappedFile("/nonexistent/file", MappedFile::Mode::Copy), Error);
}

TEST(MappedFile, ReleasedBytesStayReadable) {
  const size_t n = 16 * 4096 + 100;
  const MappedFile map(write_pattern("readable.bin", n));
  ASSERT_TRUE(holds_pattern(map.data(), n));
  map.release(map.data() + 1000, 9 * 4096);  // partial pages at both ends
  map.release(map.data(), n);
  map.release(map.data() + n, 0);
  EXPECT_TRUE(holds_pattern(map.data(), n));
}

TEST(MappedFile, ReleaseLeavesResidentMemory) {
  const size_t n = 32u << 20;
  const MappedFile map(write_pattern("resident.bin", n));
  ASSERT_TRUE(holds_pattern(map.data(), n));  // every page touched
  const long before = resident_pages();
  map.release(map.data(), n);
  const long after = resident_pages();
  ASSERT_GT(before, 0);
  const long page = ::sysconf(_SC_PAGESIZE);
  EXPECT_GE(before - after, static_cast<long>(n) / page * 9 / 10) << before << " -> " << after << " pages";
}

TEST(MappedFile, ReleaseRejectsRangesOutsideTheMapping) {
  const size_t n = 2 * 4096;
  const MappedFile map(write_pattern("outside.bin", n));
  EXPECT_THROW(map.release(map.data() + 1, n), Error);
  EXPECT_THROW(map.release(map.data() - 1, 1), Error);
  EXPECT_THROW(map.release(map.data(), n + 1), Error);
}

}  // namespace
}  // namespace preface
