// The element types of stored K and V rows and the format of a KV pool (a type for K, one for V, and whether each
// is stored rotated): kv/ sizes and owns storage of it, kernels/ and model/ read and write rows of it, and its name
// is part of every cache namespace digest, so a name never changes meaning.
//
// The block types use ggml's block layouts (so records could be exchanged with ggml-based engines), 32 values per
// block, f16 fields as raw bits:
//   q8_0   { d; int8 q[32] }              34 bytes   value j = d * q[j]
//   q4_0   { d; qs[16] }                  18 bytes   value j = d * (nibble j - 8)
//   q4_1   { d, m; qs[16] }               20 bytes   value j = d * nibble j + m
//   iq4_nl { d; qs[16] }                  18 bytes   value j = d * kIq4nlValues[nibble j]
//   q5_0   { d; qh[4]; qs[16] }           22 bytes   value j = d * (q5 j - 16)
//   q5_1   { d, m; qh[4]; qs[16] }        24 bytes   value j = d * q5 j + m
// (nibble j: low nibble of qs[j] for j < 16, high nibble of qs[j - 16] otherwise; q5 j = nibble j | bit j of qh << 4.)
// A token's row (all KV heads of a layer, head after head) is quantized as a whole in blocks of 32, as ggml
// quantizes a cache row; a head need not start on a block (stories260K's heads are 8 values). Widening a stored
// value to f32 is exact on every path: d * q is an 11-bit by at most 8-bit significand product, and adding m rounds
// once, the same once whether or not it is fused.
//
// Two key types are quantized per channel instead (KIVI's grouping; kernels/kv_channels.h): q8_pc and q4_pc keep,
// for each group of kKvChannelGroup consecutive positions (a block's first 32, next 32, ...), one f16 scale and one
// f16 minimum per channel of the row over the group's tokens, and 8- or 4-bit levels per value. A group is written
// once, when its last position is stored ("sealed"); until then its rows are the sequence's own f32 rows. Its bytes
// per token (levels plus a 32nd of the group's 4 bytes per channel) are those of a 32-value block of 36 (q8_pc) or
// 20 (q4_pc) bytes, so every per-token size below holds for them too; they are K types only, and need blocks of
// whole groups.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace preface::kernels {

enum class KvType : uint8_t { F32, F16, BF16, Q8_0, Q4_0, Q4_1, IQ4_NL, Q5_0, Q5_1, Q8_PC, Q4_PC };

inline constexpr std::array<KvType, 9> kAllKvTypes = {KvType::F32,  KvType::F16,    KvType::BF16,
                                                      KvType::Q8_0, KvType::Q4_0,   KvType::Q4_1,
                                                      KvType::IQ4_NL, KvType::Q5_0, KvType::Q5_1};
// The per-channel key types (not in kAllKvTypes, whose types store each row on its own).
inline constexpr std::array<KvType, 2> kChannelKvTypes = {KvType::Q8_PC, KvType::Q4_PC};
// Positions per per-channel group.
inline constexpr int32_t kKvChannelGroup = 32;

const char* kv_type_name(KvType t);  // "f32" | "f16" | "bf16" | "q8_0" | "q4_0" | ... | "q8_pc" | "q4_pc"
std::optional<KvType> kv_type_from_name(std::string_view name);  // the names above, case-insensitive
KvType parse_kv_type(std::string_view name);                   // throws preface::Error naming the choices

// Whether the type stores 32-value blocks (every type but f32, f16 and bf16; the per-channel types count as such
// for sizes).
constexpr bool kv_type_is_quantized(KvType t) { return t != KvType::F32 && t != KvType::F16 && t != KvType::BF16; }
// Whether the type quantizes keys per channel over groups of positions (q8_pc, q4_pc).
constexpr bool kv_type_is_per_channel(KvType t) { return t == KvType::Q8_PC || t == KvType::Q4_PC; }
// Values per storage block of the type: 1, or 32 for the block types. A row of n values needs n % this == 0.
constexpr size_t kv_type_block_values(KvType t) { return kv_type_is_quantized(t) ? 32 : 1; }
// Bytes per storage block (per value for f32/f16/bf16).
constexpr size_t kv_type_block_bytes(KvType t) {
  switch (t) {
    case KvType::F32: return 4;
    case KvType::F16: return 2;
    case KvType::BF16: return 2;
    case KvType::Q8_0: return 34;
    case KvType::Q4_0: return 18;
    case KvType::Q4_1: return 20;
    case KvType::IQ4_NL: return 18;
    case KvType::Q5_0: return 22;
    case KvType::Q5_1: return 24;
    case KvType::Q8_PC: return 36;  // 32 levels + 32 x 4 bytes of scale and minimum / 32 positions
    case KvType::Q4_PC: return 20;  // 16 bytes of nibbles + the same 4
  }
  return 0;
}
// Bytes per value on average: 4, 2, 2, 34 / 32, 18 / 32, ...
double kv_bytes_per_value(KvType t);
// Bytes of n_values of the type stored consecutively (n_values a multiple of kv_type_block_values(t)).
constexpr size_t kv_row_bytes(KvType t, size_t n_values) {
  return n_values / kv_type_block_values(t) * kv_type_block_bytes(t);
}
// Whether a block type adds an offset m after the scale (q4_1, q5_1: value = d * q + m).
constexpr bool kv_type_has_offset(KvType t) { return t == KvType::Q4_1 || t == KvType::Q5_1; }
// Where values [first_value, first_value + n_values) of a row of type t lie: the byte offset of the block (or value)
// holding the first, and the bytes from there to past the block holding the last.
struct KvSpan {
  size_t offset = 0;
  size_t bytes = 0;
};
constexpr KvSpan kv_span(KvType t, size_t first_value, size_t n_values) {
  const size_t bv = kv_type_block_values(t), bb = kv_type_block_bytes(t);
  return {first_value / bv * bb, ((first_value + n_values + bv - 1) / bv - first_value / bv) * bb};
}
// Throws preface::Error when the type cannot store rows of row_values values (a block type with
// row_values % 32 != 0), with a message naming the type, the row size and the types that work.
void check_kv_type_fits(KvType t, int32_t row_values);

// Whether a stored row of head_dim-value heads can be rotated (kernels/hadamard.h): head_dim % 64 == 0.
inline bool kv_rotation_fits(int32_t head_dim) { return head_dim > 0 && head_dim % 64 == 0; }

// What a KV pool stores: K rows of type k, V rows of type v, each optionally rotated by a Walsh-Hadamard transform
// per head (kernels/hadamard.h; K with blocks of the largest power of two dividing the head, V with blocks of 64, as
// llama.cpp rotates). Converts implicitly from one type (both sides, unrotated).
struct KvFormat {
  KvType k = KvType::F16;
  KvType v = KvType::F16;
  bool rotate_k = false;
  bool rotate_v = false;

  KvFormat() = default;
  KvFormat(KvType both) : k(both), v(both) {}  // NOLINT(google-explicit-constructor): one type for K and V
  KvFormat(KvType k_type, KvType v_type, bool rot_k = false, bool rot_v = false)
      : k(k_type), v(v_type), rotate_k(rot_k), rotate_v(rot_v) {}
  bool operator==(const KvFormat&) const = default;

  bool rotated() const { return rotate_k || rotate_v; }
  // The namespace and record name, at most 15 characters: the type ("q8_0") when K and V agree, else "K/V"
  // ("q8_0/q4_0"); then "+r" when both are rotated, "+rk" or "+rv" when one is. Unrotated single types keep the
  // names the pool had before K and V types were separate.
  std::string name() const;
  // For people: "K q8_0 (rotated), V q4_0".
  std::string describe() const;
};

// --kv-rotate: auto rotates a side whose type is a row block type, where its heads fit (kv_rotation_fits), and never
// per-channel keys (their per-channel scales are what holds an outlier channel; a rotation would spread it over
// the others); on rotates both sides (an error where heads do not fit); off rotates neither.
enum class KvRotate : uint8_t { Auto, On, Off };
KvRotate parse_kv_rotate(std::string_view name);  // "auto" | "on" | "off"; throws preface::Error otherwise
// The format of a pool of these types; k_heads_fit / v_heads_fit: every K (V) head of the model's paged layers
// passes kv_rotation_fits. Throws preface::Error for `On` where heads do not fit, and for a per-channel V type.
KvFormat resolve_kv_format(KvType k, KvType v, KvRotate rotate, bool k_heads_fit, bool v_heads_fit);

}  // namespace preface::kernels
