// The element type of stored K and V rows: the one KV-type enum of the project. kv/ sizes and owns storage of it,
// kernels/ and model/ read and write rows of it, and its name ("f16", ...) is part of every cache namespace
// digest, so a name never changes meaning.
//
// Q8_0 rows are GGUF Q8_0 blocks of 32 values (f16 scale d, then 32 int8 q; value = f32(d) * q, 34 bytes per 32
// values), quantized per KV head; so Q8_0 needs head_dim % 32 == 0 (a block never spans two heads).
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace preface::kernels {

enum class KvType : uint8_t { F32, F16, BF16, Q8_0 };

inline constexpr std::array<KvType, 4> kAllKvTypes = {KvType::F32, KvType::F16, KvType::BF16, KvType::Q8_0};

const char* kv_type_name(KvType t);                            // "f32" | "f16" | "bf16" | "q8_0"
std::optional<KvType> kv_type_from_name(std::string_view name);  // the names above, case-insensitive
KvType parse_kv_type(std::string_view name);                   // throws preface::Error naming the choices

// Values per storage block of the type: 1, or 32 for Q8_0. A row of n values needs n % this == 0.
size_t kv_type_block_values(KvType t);
// Bytes per value on average: 4, 2, 2, 34 / 32.
double kv_bytes_per_value(KvType t);
// Bytes of n_values of the type stored consecutively (n_values a multiple of kv_type_block_values(t)):
// 4n, 2n, 2n, n / 32 * 34 ({f16 d; int8 q[32]} per 32 values).
inline size_t kv_row_bytes(KvType t, size_t n_values) {
  switch (t) {
    case KvType::F32: return 4 * n_values;
    case KvType::F16: return 2 * n_values;
    case KvType::BF16: return 2 * n_values;
    case KvType::Q8_0: return n_values / 32 * 34;
  }
  return 0;
}
// Throws preface::Error when the type cannot store heads of head_dim values (Q8_0 with head_dim % 32 != 0), with
// a message naming the type, the head size and the types that work.
void check_kv_type_fits(KvType t, int32_t head_dim);

}  // namespace preface::kernels
