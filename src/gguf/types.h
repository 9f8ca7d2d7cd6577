// ggml tensor types that preface reads and writes, and their block layouts.
//
// Quantized rows are sequences of 32-value blocks (little-endian):
//   Q8_0: { uint16 d (f16); int8 qs[32] }            34 bytes; value[i] = d * qs[i]
//   Q4_0: { uint16 d (f16); uint8 qs[16] }           18 bytes; value[i]    = d * ((qs[i] & 0xF) - 8)
//                                                              value[i+16] = d * ((qs[i] >> 4) - 8)
// A row of a quantized tensor must hold a whole number of blocks.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace preface::gguf {

enum class TensorType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q8_0 = 8,
  BF16 = 30,
};

inline constexpr size_t kQuantBlock = 32;  // values per Q8_0 / Q4_0 block

struct BlockQ8_0 {
  uint16_t d;  // f16 scale
  int8_t qs[kQuantBlock];
};
static_assert(sizeof(BlockQ8_0) == 34);

struct BlockQ4_0 {
  uint16_t d;  // f16 scale
  uint8_t qs[kQuantBlock / 2];
};
static_assert(sizeof(BlockQ4_0) == 18);

// Returns the type when `raw` is one preface supports, else nullopt.
std::optional<TensorType> tensor_type_from_raw(uint32_t raw);
// "F32", "F16", "Q4_0", "Q8_0", "BF16"; also parses those names (case-insensitive).
std::string_view tensor_type_name(TensorType t);
std::optional<TensorType> tensor_type_from_name(std::string_view name);
// Values per block (1 for float types, 32 for quantized) and bytes per block.
size_t type_block_values(TensorType t);
size_t type_block_bytes(TensorType t);
// Bytes taken by a row of `n_values` values; n_values must be a multiple of type_block_values.
size_t row_bytes(TensorType t, size_t n_values);

}  // namespace preface::gguf
