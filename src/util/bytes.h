// Byte counts as people write them ("2GiB", "1.5GB") and read them ("762.5 MiB"), and the memory the kernel can
// hand out. Pure functions but mem_available_bytes; bad input throws preface::Error.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace preface {

// "2GiB", "512 MiB", "1.5GB", "1e9", "4096": a whole number of bytes. Units (case-insensitive): B, KiB, MiB,
// GiB, TiB, PiB (powers of 1024) and KB, MB, GB, TB, PB (powers of 1000); none means bytes. The number is
// decimal with an optional fraction and exponent; a fractional byte count is rounded down. Throws
// preface::Error for empty, negative, malformed, ambiguous ("2G") or unknown units, and values above 2^64 - 1.
uint64_t parse_bytes(std::string_view text);

// MemAvailable of /proc/meminfo in bytes (the memory the kernel can hand out without swapping); 0 when unknown.
uint64_t mem_available_bytes();

// Binary units with up to two decimals, trailing zeros dropped: "512 B", "128 KiB", "762.5 MiB", "1.33 GiB".
std::string format_bytes(uint64_t n_bytes);

}  // namespace preface
