#include "gguf/types.h"

#include <cctype>

#include "util/error.h"

namespace preface::gguf {

namespace {

struct TypeTraits {
  TensorType type;
  const char* name;
  uint32_t block_values;
  uint32_t block_bytes;
  bool computed;  // preface has kernels for it (kernels/dot.h, or a row of kernels/quant.h)
};

// ggml's block layouts (ggml-common.h): e.g. Q4_K = { f16 d, dmin; uint8 scales[12]; uint8 qs[128] } = 144 bytes.
constexpr TypeTraits kTypes[] = {
    {TensorType::F32, "F32", 1, 4, true},           {TensorType::F16, "F16", 1, 2, true},
    {TensorType::Q4_0, "Q4_0", 32, 18, true},       {TensorType::Q4_1, "Q4_1", 32, 20, true},
    {TensorType::Q5_0, "Q5_0", 32, 22, true},      {TensorType::Q5_1, "Q5_1", 32, 24, true},
    {TensorType::Q8_0, "Q8_0", 32, 34, true},       {TensorType::Q8_1, "Q8_1", 32, 36, false},
    {TensorType::Q2_K, "Q2_K", 256, 84, true},     {TensorType::Q3_K, "Q3_K", 256, 110, true},
    {TensorType::Q4_K, "Q4_K", 256, 144, true},    {TensorType::Q5_K, "Q5_K", 256, 176, true},
    {TensorType::Q6_K, "Q6_K", 256, 210, true},    {TensorType::Q8_K, "Q8_K", 256, 292, false},
    {TensorType::IQ2_XXS, "IQ2_XXS", 256, 66, false}, {TensorType::IQ2_XS, "IQ2_XS", 256, 74, false},
    {TensorType::IQ3_XXS, "IQ3_XXS", 256, 98, false}, {TensorType::IQ1_S, "IQ1_S", 256, 50, false},
    {TensorType::IQ4_NL, "IQ4_NL", 32, 18, true},  {TensorType::IQ3_S, "IQ3_S", 256, 110, false},
    {TensorType::IQ2_S, "IQ2_S", 256, 82, false},   {TensorType::IQ4_XS, "IQ4_XS", 256, 136, true},
    {TensorType::I8, "I8", 1, 1, false},            {TensorType::I16, "I16", 1, 2, false},
    {TensorType::I32, "I32", 1, 4, false},          {TensorType::I64, "I64", 1, 8, false},
    {TensorType::F64, "F64", 1, 8, false},          {TensorType::IQ1_M, "IQ1_M", 256, 56, false},
    {TensorType::BF16, "BF16", 1, 2, true},         {TensorType::TQ1_0, "TQ1_0", 256, 54, false},
    {TensorType::TQ2_0, "TQ2_0", 256, 66, false},  {TensorType::MXFP4, "MXFP4", 32, 17, true},
};

const TypeTraits* traits_of(uint32_t raw) {
  for (const TypeTraits& t : kTypes) {
    if (static_cast<uint32_t>(t.type) == raw) return &t;
  }
  return nullptr;
}

const TypeTraits& traits(TensorType t) {
  const TypeTraits* r = traits_of(static_cast<uint32_t>(t));
  if (r == nullptr) throw Error("tensor type " + std::to_string(static_cast<uint32_t>(t)) + " has no traits row");
  return *r;
}

}  // namespace

std::optional<TensorType> tensor_type_from_raw(uint32_t raw) {
  const TypeTraits* t = traits_of(raw);
  return t ? std::optional<TensorType>(t->type) : std::nullopt;
}

std::string_view tensor_type_name(TensorType t) {
  const TypeTraits* r = traits_of(static_cast<uint32_t>(t));
  return r ? r->name : "?";
}

std::optional<TensorType> tensor_type_from_name(std::string_view name) {
  for (const TypeTraits& t : kTypes) {
    const std::string_view canon = t.name;
    if (canon.size() != name.size()) continue;
    bool equal = true;
    for (size_t i = 0; i < name.size() && equal; ++i) {
      equal = std::toupper(static_cast<unsigned char>(name[i])) == canon[i];
    }
    if (equal) return t.type;
  }
  return std::nullopt;
}

bool type_is_computed(TensorType t) { return traits(t).computed; }

std::string computed_type_names() {
  std::string out;
  for (const TypeTraits& t : kTypes) {
    if (!t.computed) continue;
    if (!out.empty()) out += ", ";
    out += t.name;
  }
  return out;
}

size_t type_block_values(TensorType t) { return traits(t).block_values; }

size_t type_block_bytes(TensorType t) { return traits(t).block_bytes; }

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
