#include "model/kv_view.h"

#include <string>

#include "util/error.h"

namespace preface::model {

const char* kv_type_name(KvType t) {
  switch (t) {
    case KvType::F32: return "f32";
    case KvType::F16: return "f16";
    case KvType::BF16: return "bf16";
    case KvType::Q8_0: return "q8_0";
  }
  return "?";
}

size_t kv_type_block_values(KvType t) { return t == KvType::Q8_0 ? 32 : 1; }

void check_kv_type_fits(KvType t, int32_t head_dim) {
  const auto block = static_cast<int32_t>(kv_type_block_values(t));
  if (head_dim % block != 0) {
    throw Error(std::string("KV type ") + kv_type_name(t) + " stores each KV head in blocks of " +
                std::to_string(block) + " values, but this model's head_dim is " + std::to_string(head_dim) +
                " (not a multiple of " + std::to_string(block) + "); use --kv-type f16, bf16 or f32");
  }
}

}  // namespace preface::model
