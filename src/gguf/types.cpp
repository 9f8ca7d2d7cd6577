#include "gguf/types.h"

#include <cctype>

#include "util/error.h"

namespace preface::gguf {

std::optional<TensorType> tensor_type_from_raw(uint32_t raw) {
  switch (raw) {
    case static_cast<uint32_t>(TensorType::F32):
    case static_cast<uint32_t>(TensorType::F16):
    case static_cast<uint32_t>(TensorType::Q4_0):
    case static_cast<uint32_t>(TensorType::Q8_0):
    case static_cast<uint32_t>(TensorType::BF16):
      return static_cast<TensorType>(raw);
    default:
      return std::nullopt;
  }
}

std::string_view tensor_type_name(TensorType t) {
  switch (t) {
    case TensorType::F32: return "F32";
    case TensorType::F16: return "F16";
    case TensorType::Q4_0: return "Q4_0";
    case TensorType::Q8_0: return "Q8_0";
    case TensorType::BF16: return "BF16";
  }
  return "?";
}

std::optional<TensorType> tensor_type_from_name(std::string_view name) {
  for (TensorType t : {TensorType::F32, TensorType::F16, TensorType::Q4_0, TensorType::Q8_0, TensorType::BF16}) {
    const std::string_view canon = tensor_type_name(t);
    if (canon.size() != name.size()) continue;
    bool equal = true;
    for (size_t i = 0; i < name.size() && equal; ++i) {
      equal = std::toupper(static_cast<unsigned char>(name[i])) == canon[i];
    }
    if (equal) return t;
  }
  return std::nullopt;
}

size_t type_block_values(TensorType t) {
  return (t == TensorType::Q4_0 || t == TensorType::Q8_0) ? kQuantBlock : 1;
}

size_t type_block_bytes(TensorType t) {
  switch (t) {
    case TensorType::F32: return 4;
    case TensorType::F16: return 2;
    case TensorType::BF16: return 2;
    case TensorType::Q4_0: return sizeof(BlockQ4_0);
    case TensorType::Q8_0: return sizeof(BlockQ8_0);
  }
  return 0;
}

size_t row_bytes(TensorType t, size_t n_values) {
  const size_t block = type_block_values(t);
  if (n_values % block != 0) {
    throw Error("a row of " + std::to_string(n_values) + " values is not a whole number of " +
                std::string(tensor_type_name(t)) + " blocks of " + std::to_string(block));
  }
  size_t bytes = 0;
  if (__builtin_mul_overflow(n_values / block, type_block_bytes(t), &bytes)) {
    throw Error("row of " + std::to_string(n_values) + " values overflows the size type");
  }
  return bytes;
}

}  // namespace preface::gguf
