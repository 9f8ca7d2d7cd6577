// encode_values / decode_values: f32 <-> F32, F16, BF16, Q8_0, Q4_0, bit-compatible with ggml's reference
// quantizers (quantize_row_q8_0_ref, quantize_row_q4_0_ref) and dequantizers.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "gguf/writer.h"
#include "util/error.h"
#include "util/fp16.h"

namespace preface::gguf {
namespace {

void check_whole_blocks(TensorType type, size_t n_values, const char* what) {
  const size_t block = type_block_values(type);
  if (n_values % block != 0) {
    throw Error(std::string(what) + ": " + std::to_string(n_values) + " values are not a whole number of " +
                std::string(tensor_type_name(type)) + " blocks of " + std::to_string(block));
  }
}

// x: [kQuantBlock] values.
BlockQ8_0 quantize_q8_0(const float* x, size_t block_index) {
  float amax = 0.0f;
  for (size_t j = 0; j < kQuantBlock; ++j) {
    if (!std::isfinite(x[j])) {
      throw Error("encode_values: non-finite value in Q8_0 block " + std::to_string(block_index));
    }
    amax = std::max(amax, std::fabs(x[j]));
  }
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  BlockQ8_0 b;
  b.d = f32_to_f16(d);
  for (size_t j = 0; j < kQuantBlock; ++j) b.qs[j] = static_cast<int8_t>(std::round(x[j] * id));
  return b;
}

// x: [kQuantBlock] values. The scale maps the value of largest magnitude to -8 (the asymmetric end).
BlockQ4_0 quantize_q4_0(const float* x, size_t block_index) {
  float amax = 0.0f;
  float max = 0.0f;
  for (size_t j = 0; j < kQuantBlock; ++j) {
    if (!std::isfinite(x[j])) {
      throw Error("encode_values: non-finite value in Q4_0 block " + std::to_string(block_index));
    }
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  const float d = max / -8.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  BlockQ4_0 b;
  b.d = f32_to_f16(d);
  constexpr size_t half = kQuantBlock / 2;
  for (size_t j = 0; j < half; ++j) {
    // x * id lies in [-8, 8] up to rounding, so the biased value is in [0, 16.5) and truncation is safe.
    const int lo = std::min(15, static_cast<int>(static_cast<int8_t>(x[j] * id + 8.5f)));
    const int hi = std::min(15, static_cast<int>(static_cast<int8_t>(x[j + half] * id + 8.5f)));
    b.qs[j] = static_cast<uint8_t>(lo | (hi << 4));
  }
  return b;
}

}  // namespace

std::vector<uint8_t> encode_values(TensorType type, const float* values, size_t n_values) {
  check_whole_blocks(type, n_values, "encode_values");
  std::vector<uint8_t> out(row_bytes(type, n_values));  // [n_values / block, block_bytes]
  uint8_t* dst = out.data();
  switch (type) {
    case TensorType::F32:
      if (n_values != 0) std::memcpy(dst, values, n_values * sizeof(float));
      break;
    case TensorType::F16:
    case TensorType::BF16:
      for (size_t i = 0; i < n_values; ++i) {
        const uint16_t h = type == TensorType::F16 ? f32_to_f16(values[i]) : f32_to_bf16(values[i]);
        std::memcpy(dst + 2 * i, &h, 2);
      }
      break;
    case TensorType::Q8_0:
      for (size_t b = 0; b < n_values / kQuantBlock; ++b) {
        const BlockQ8_0 blk = quantize_q8_0(values + b * kQuantBlock, b);
        std::memcpy(dst + b * sizeof(BlockQ8_0), &blk, sizeof(BlockQ8_0));
      }
      break;
    case TensorType::Q4_0:
      for (size_t b = 0; b < n_values / kQuantBlock; ++b) {
        const BlockQ4_0 blk = quantize_q4_0(values + b * kQuantBlock, b);
        std::memcpy(dst + b * sizeof(BlockQ4_0), &blk, sizeof(BlockQ4_0));
      }
      break;
    default:
      throw Error("encode_values: cannot encode " + std::string(tensor_type_name(type)) + " (encodes F32, F16, BF16, Q8_0, Q4_0)");
  }
  return out;
}

void decode_values(TensorType type, const uint8_t* data, size_t n_values, float* out) {
  check_whole_blocks(type, n_values, "decode_values");
  switch (type) {
    case TensorType::F32:
      if (n_values != 0) std::memcpy(out, data, n_values * sizeof(float));
      break;
    case TensorType::F16:
    case TensorType::BF16:
      for (size_t i = 0; i < n_values; ++i) {
        uint16_t h;
        std::memcpy(&h, data + 2 * i, 2);
        out[i] = type == TensorType::F16 ? f16_to_f32(h) : bf16_to_f32(h);
      }
      break;
    case TensorType::Q8_0:
      for (size_t b = 0; b < n_values / kQuantBlock; ++b) {
        BlockQ8_0 blk;
        std::memcpy(&blk, data + b * sizeof(BlockQ8_0), sizeof(BlockQ8_0));
        const float d = f16_to_f32(blk.d);
        for (size_t j = 0; j < kQuantBlock; ++j) out[b * kQuantBlock + j] = d * static_cast<float>(blk.qs[j]);
      }
      break;
    case TensorType::Q4_0:
      for (size_t b = 0; b < n_values / kQuantBlock; ++b) {
        BlockQ4_0 blk;
        std::memcpy(&blk, data + b * sizeof(BlockQ4_0), sizeof(BlockQ4_0));
        const float d = f16_to_f32(blk.d);
        float* o = out + b * kQuantBlock;
        for (size_t j = 0; j < kQuantBlock / 2; ++j) {
          o[j] = d * static_cast<float>((blk.qs[j] & 0x0F) - 8);
          o[j + kQuantBlock / 2] = d * static_cast<float>((blk.qs[j] >> 4) - 8);
        }
      }
      break;
    default:
      throw Error("decode_values: cannot decode " + std::string(tensor_type_name(type)) + " (decodes F32, F16, BF16, Q8_0, Q4_0)");
  }
}

bool type_has_codec(TensorType type) {
  return type == TensorType::F32 || type == TensorType::F16 || type == TensorType::BF16 ||
         type == TensorType::Q8_0 || type == TensorType::Q4_0;
}

}  // namespace preface::gguf
