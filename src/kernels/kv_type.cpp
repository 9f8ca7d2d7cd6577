#include "kernels/kv_type.h"

#include <cctype>
#include <string>

#include "util/error.h"

namespace preface::kernels {
namespace {

std::string lower(std::string_view s) {
  std::string n(s);
  for (char& c : n) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return n;
}

}  // namespace

const char* kv_type_name(KvType t) {
  switch (t) {
    case KvType::F32: return "f32";
    case KvType::F16: return "f16";
    case KvType::BF16: return "bf16";
    case KvType::Q8_0: return "q8_0";
    case KvType::Q4_0: return "q4_0";
    case KvType::Q4_1: return "q4_1";
    case KvType::IQ4_NL: return "iq4_nl";
    case KvType::Q5_0: return "q5_0";
    case KvType::Q5_1: return "q5_1";
    case KvType::Q8_PC: return "q8_pc";
    case KvType::Q4_PC: return "q4_pc";
  }
  return "?";
}

std::optional<KvType> kv_type_from_name(std::string_view name) {
  const std::string n = lower(name);
  for (KvType t : kAllKvTypes) {
    if (n == kv_type_name(t)) return t;
  }
  for (KvType t : kChannelKvTypes) {
    if (n == kv_type_name(t)) return t;
  }
  return std::nullopt;
}

KvType parse_kv_type(std::string_view name) {
  if (auto t = kv_type_from_name(name)) return *t;
  throw Error("unknown KV type '" + std::string(name) +
              "' (choose f32, f16, bf16, q8_0, q4_0, q4_1, iq4_nl, q5_0 or q5_1; for keys also q8_pc or q4_pc)");
}

double kv_bytes_per_value(KvType t) {
  return static_cast<double>(kv_type_block_bytes(t)) / static_cast<double>(kv_type_block_values(t));
}

void check_kv_type_fits(KvType t, int32_t row_values) {
  const auto block = static_cast<int32_t>(kv_type_block_values(t));
  if (row_values % block != 0) {
    throw Error(std::string("KV type ") + kv_type_name(t) + " stores each token's row in blocks of " +
                std::to_string(block) + " values, but this model has rows of " + std::to_string(row_values) +
                " values (KV heads x head size, not a multiple of " + std::to_string(block) +
                "); use f16, bf16 or f32 for that side");
  }
}

std::string KvFormat::name() const {
  std::string n = k == v ? kv_type_name(k) : std::string(kv_type_name(k)) + "/" + kv_type_name(v);
  if (rotate_k && rotate_v) {
    n += "+r";
  } else if (rotate_k) {
    n += "+rk";
  } else if (rotate_v) {
    n += "+rv";
  }
  return n;
}

std::string KvFormat::describe() const {
  return std::string("K ") + kv_type_name(k) + (rotate_k ? " (rotated)" : "") + ", V " + kv_type_name(v) +
         (rotate_v ? " (rotated)" : "");
}

KvRotate parse_kv_rotate(std::string_view name) {
  const std::string n = lower(name);
  if (n == "auto") return KvRotate::Auto;
  if (n == "on") return KvRotate::On;
  if (n == "off") return KvRotate::Off;
  throw Error("unknown --kv-rotate '" + std::string(name) + "' (choose auto, on or off)");
}

KvFormat resolve_kv_format(KvType k, KvType v, KvRotate rotate, bool k_heads_fit, bool v_heads_fit) {
  if (kv_type_is_per_channel(v)) {
    throw Error(std::string("KV type ") + kv_type_name(v) +
                " quantizes keys per channel; it is a K type only (use it with --kv-type-k, and a row type for V)");
  }
  const bool rotate_k_auto = kv_type_is_quantized(k) && !kv_type_is_per_channel(k) && k_heads_fit;
  switch (rotate) {
    case KvRotate::Off: return {k, v, false, false};
    case KvRotate::Auto: return {k, v, rotate_k_auto, kv_type_is_quantized(v) && v_heads_fit};
    case KvRotate::On:
      if (!k_heads_fit || !v_heads_fit) {
        throw Error("--kv-rotate on needs heads whose size is a multiple of 64 (the Hadamard blocks); this model's "
                    "are not: use --kv-rotate auto or off");
      }
      return {k, v, true, true};
  }
  return {k, v};
}

}  // namespace preface::kernels
