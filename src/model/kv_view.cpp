#include "model/kv_view.h"

namespace preface::model {

size_t kv_type_bytes(KvType t) {
  switch (t) {
    case KvType::F32: return 4;
    case KvType::F16: return 2;
    case KvType::BF16: return 2;
  }
  return 0;
}

const char* kv_type_name(KvType t) {
  switch (t) {
    case KvType::F32: return "f32";
    case KvType::F16: return "f16";
    case KvType::BF16: return "bf16";
  }
  return "?";
}

}  // namespace preface::model
