// ggml tensor types: one traits row each (name, values and bytes per block, whether preface computes with it), so
// a file holding any of them parses and a type preface cannot compute yet is refused by name, at model load.
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

// The ids are ggml's (GGUF tensor info `type`).
enum class TensorType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  IQ2_XXS = 16,
  IQ2_XS = 17,
  IQ3_XXS = 18,
  IQ1_S = 19,
  IQ4_NL = 20,
  IQ3_S = 21,
  IQ2_S = 22,
  IQ4_XS = 23,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  IQ1_M = 29,
  BF16 = 30,
  TQ1_0 = 34,
  TQ2_0 = 35,
  MXFP4 = 39,
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

// Returns the type when `raw` is a ggml type id of the table, else nullopt.
std::optional<TensorType> tensor_type_from_raw(uint32_t raw);
// ggml's names ("F32", "Q4_K", "IQ4_XS", ...); also parses them (case-insensitive).
std::string_view tensor_type_name(TensorType t);
std::optional<TensorType> tensor_type_from_name(std::string_view name);
// True for the types preface has kernels for (F32, F16, BF16, Q8_0, Q4_0 in kernels/dot.h; Q4_1, Q5_0, Q5_1,
// IQ4_NL, MXFP4, Q2_K..Q6_K, IQ4_XS in kernels/quant.h); computed_type_names() lists them.
bool type_is_computed(TensorType t);
std::string computed_type_names();
// Values per block (1 for plain types, 32 or 256 for block-quantized ones) and bytes per block.
size_t type_block_values(TensorType t);
size_t type_block_bytes(TensorType t);
// Bytes taken by a row of `n_values` values; n_values must be a multiple of type_block_values.
size_t row_bytes(TensorType t, size_t n_values);

}  // namespace preface::gguf
