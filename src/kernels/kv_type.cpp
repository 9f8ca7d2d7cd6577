#include "kernels/kv_type.h"

#include <cctype>
#include <string>

#include "util/error.h"

namespace preface::kernels {

const char* kv_type_name(KvType t) {
  switch (t) {
    case KvType::F32: return "f32";
    case KvType::F16: return "f16";
    case KvType::BF16: return "bf16";
    case KvType::Q8_0: return "q8_0";
  }
  return "?";
}

std::optional<KvType> kv_type_from_name(std::string_view name) {
  std::string n(name);
  for (char& c : n) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (KvType t : kAllKvTypes) {
    if (n == kv_type_name(t)) return t;
  }
  return std::nullopt;
}

KvType parse_kv_type(std::string_view name) {
  if (auto t = kv_type_from_name(name)) return *t;
  throw Error("unknown KV type '" + std::string(name) + "' (choose f32, f16, bf16 or q8_0)");
}

size_t kv_type_block_values(KvType t) { return t == KvType::Q8_0 ? 32 : 1; }

double kv_bytes_per_value(KvType t) {
  return static_cast<double>(kv_row_bytes(t, kv_type_block_values(t))) / static_cast<double>(kv_type_block_values(t));
}

void check_kv_type_fits(KvType t, int32_t head_dim) {
  const auto block = static_cast<int32_t>(kv_type_block_values(t));
  if (head_dim % block != 0) {
    throw Error(std::string("KV type ") + kv_type_name(t) + " stores each KV head in blocks of " +
                std::to_string(block) + " values, but this model's head_dim is " + std::to_string(head_dim) +
                " (not a multiple of " + std::to_string(block) + "); use --kv-type f16, bf16 or f32");
  }
}

}  // namespace preface::kernels
