// Byte counts: parse_bytes (units, fractions, exponents, overflow, rejects), format_bytes and its round trip,
// mem_available_bytes.
#include "util/bytes.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "util/error.h"

namespace preface {
namespace {

TEST(ParseBytes, Accepts) {
  EXPECT_EQ(parse_bytes("2GiB"), 2ull << 30);
  EXPECT_EQ(parse_bytes("512MiB"), 512ull << 20);
  EXPECT_EQ(parse_bytes("512 mib"), 512ull << 20);
  EXPECT_EQ(parse_bytes("  4KiB "), 4096u);
  EXPECT_EQ(parse_bytes("1TiB"), 1ull << 40);
  EXPECT_EQ(parse_bytes("2PiB"), 2ull << 50);
  EXPECT_EQ(parse_bytes("8GB"), 8000000000ull);
  EXPECT_EQ(parse_bytes("3kb"), 3000u);
  EXPECT_EQ(parse_bytes("7MB"), 7000000u);
  EXPECT_EQ(parse_bytes("1TB"), 1000000000000ull);
  EXPECT_EQ(parse_bytes("4096"), 4096u);
  EXPECT_EQ(parse_bytes("4096B"), 4096u);
  EXPECT_EQ(parse_bytes("0"), 0u);
  EXPECT_EQ(parse_bytes("0GiB"), 0u);
  EXPECT_EQ(parse_bytes("1e9"), 1000000000u);
  EXPECT_EQ(parse_bytes("2.5e3KiB"), 2500u * 1024);
  EXPECT_EQ(parse_bytes("1.5GiB"), 3ull << 29);
  EXPECT_EQ(parse_bytes(".5KiB"), 512u);
  EXPECT_EQ(parse_bytes("0.1KiB"), 102u);  // 102.4 rounds down
  EXPECT_EQ(parse_bytes("1e-3KB"), 1u);
  EXPECT_EQ(parse_bytes("18446744073709551615"), UINT64_MAX);
  EXPECT_EQ(parse_bytes("0000000000000000000000001KiB"), 1024u);
  EXPECT_EQ(parse_bytes("1.000000000000000000000000GiB"), 1ull << 30);
  EXPECT_EQ(parse_bytes("15PiB"), 15ull << 50);
}

TEST(ParseBytes, Rejects) {
  for (const char* bad : {"", "   ", "-1", "-1GiB", "- 5", "+5", "GiB", "abc", "2 GiBs", "2G", "2k", "1,000",
                          "0x10", "1e", "1e+", "1.2.3", "nan", "inf", "2 Gi B", "1EiB", "5 bytes"}) {
    EXPECT_THROW(parse_bytes(bad), Error) << "'" << bad << "'";
  }
}

TEST(ParseBytes, Overflow) {
  EXPECT_THROW(parse_bytes("18446744073709551616"), Error);  // 2^64
  EXPECT_THROW(parse_bytes("16384PiB"), Error);              // 2^64
  EXPECT_EQ(parse_bytes("16383PiB"), 16383ull << 50);
  EXPECT_THROW(parse_bytes("1e20"), Error);
  EXPECT_THROW(parse_bytes("1e999999999999"), Error);
  EXPECT_EQ(parse_bytes("1e-999999999999"), 0u);
  EXPECT_THROW(parse_bytes("123456789012345678901"), Error);  // 21 significant digits
  EXPECT_THROW(parse_bytes(std::string(100000, '9')), Error);
}

TEST(FormatBytes, Units) {
  EXPECT_EQ(format_bytes(0), "0 B");
  EXPECT_EQ(format_bytes(1023), "1023 B");
  EXPECT_EQ(format_bytes(1024), "1 KiB");
  EXPECT_EQ(format_bytes(1536), "1.5 KiB");
  EXPECT_EQ(format_bytes(128 * 1024), "128 KiB");
  EXPECT_EQ(format_bytes(2ull << 30), "2 GiB");
  EXPECT_EQ(format_bytes(1000000000), "953.67 MiB");
  EXPECT_EQ(format_bytes((1ull << 20) - 1), "1 MiB");  // 1023.999 KiB rounds to the next unit
  EXPECT_EQ(format_bytes(UINT64_MAX), "16 EiB");
  // Round trip through parse_bytes for exact values.
  for (uint64_t n : {1ull << 10, 3ull << 29, 762ull * 1024 * 1024 + 512 * 1024, 5ull << 40}) {
    EXPECT_EQ(parse_bytes(format_bytes(n)), n) << format_bytes(n);
  }
}

TEST(MemAvailable, ReadsProcMeminfo) {
  const uint64_t n = mem_available_bytes();
  EXPECT_GT(n, 16ull << 20) << "MemAvailable of /proc/meminfo";
  EXPECT_EQ(n % 1024, 0u) << "reported in KiB";
}

}  // namespace
}  // namespace preface
