// Tensor-type tables, encode/decode against hand-computed ggml reference blocks, and Writer's input checks.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "gguf/types.h"
#include "gguf/writer.h"
#include "gguf_bytes.h"
#include "util/fp16.h"

namespace preface::gguf {
namespace {

using test_bytes::contains;

std::vector<float> ramp() {
  std::vector<float> x(kQuantBlock);  // [32] = -16 .. 15
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i) - 16.0f;
  return x;
}

TEST(Types, NamesSizesAndRawValues) {
  EXPECT_EQ(tensor_type_from_raw(8), TensorType::Q8_0);
  EXPECT_EQ(tensor_type_from_raw(30), TensorType::BF16);
  EXPECT_EQ(tensor_type_from_raw(3), TensorType::Q4_1);
  EXPECT_EQ(tensor_type_from_raw(16), TensorType::IQ2_XXS);  // parsed (its layout is known), not computed
  EXPECT_EQ(tensor_type_from_raw(12), TensorType::Q4_K);
  EXPECT_FALSE(tensor_type_from_raw(4).has_value());  // an id ggml retired
  EXPECT_FALSE(tensor_type_from_raw(31).has_value());
  EXPECT_TRUE(type_is_computed(TensorType::Q4_0));
  EXPECT_TRUE(type_is_computed(TensorType::Q4_K));
  EXPECT_FALSE(type_is_computed(TensorType::IQ2_XXS));
  EXPECT_FALSE(type_is_computed(TensorType::Q8_K));  // activations only
  EXPECT_EQ(computed_type_names(),
            "F32, F16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS, BF16, MXFP4");
  EXPECT_EQ(tensor_type_from_raw(39), TensorType::MXFP4);
  EXPECT_EQ(type_block_values(TensorType::MXFP4), 32u);
  EXPECT_EQ(row_bytes(TensorType::MXFP4, 64), 34u);  // two blocks of one exponent byte and 16 bytes of codes
  EXPECT_FALSE(type_has_codec(TensorType::Q4_K));
  EXPECT_TRUE(type_has_codec(TensorType::Q4_0));
  EXPECT_EQ(tensor_type_name(TensorType::IQ4_XS), "IQ4_XS");
  EXPECT_EQ(tensor_type_from_name("q6_k"), TensorType::Q6_K);
  // ggml's block layouts: 256-value super-blocks for the K-quants.
  EXPECT_EQ(row_bytes(TensorType::Q4_K, 512), 288u);
  EXPECT_EQ(row_bytes(TensorType::Q6_K, 256), 210u);
  EXPECT_EQ(row_bytes(TensorType::Q5_0, 64), 44u);
  EXPECT_THROW(row_bytes(TensorType::Q4_K, 32), Error);
  EXPECT_EQ(tensor_type_from_name("q4_0"), TensorType::Q4_0);
  EXPECT_EQ(tensor_type_from_name("Bf16"), TensorType::BF16);
  EXPECT_FALSE(tensor_type_from_name("q8").has_value());
  EXPECT_EQ(tensor_type_name(TensorType::F16), "F16");
  EXPECT_EQ(row_bytes(TensorType::F32, 3), 12u);
  EXPECT_EQ(row_bytes(TensorType::BF16, 3), 6u);
  EXPECT_EQ(row_bytes(TensorType::Q8_0, 64), 68u);
  EXPECT_EQ(row_bytes(TensorType::Q4_0, 96), 54u);
  EXPECT_THROW(row_bytes(TensorType::Q4_0, 33), Error);
}

// ggml quantize_row_q8_0_ref on -16..15: d = 16/127, q = round(x * 127/16).
TEST(Codec, Q8_0MatchesGgmlReference) {
  const std::vector<float> x = ramp();
  const std::vector<uint8_t> bytes = encode_values(TensorType::Q8_0, x.data(), x.size());
  ASSERT_EQ(bytes.size(), sizeof(BlockQ8_0));
  BlockQ8_0 b;
  std::memcpy(&b, bytes.data(), sizeof(b));
  EXPECT_EQ(b.d, f32_to_f16(16.0f / 127.0f));
  EXPECT_EQ(b.qs[0], -127);
  EXPECT_EQ(b.qs[1], -119);  // -15 * 7.9375 = -119.06
  EXPECT_EQ(b.qs[16], 0);
  EXPECT_EQ(b.qs[17], 8);    // 7.9375
  EXPECT_EQ(b.qs[31], 119);
  std::vector<float> back(x.size());  // [32]
  decode_values(TensorType::Q8_0, bytes.data(), back.size(), back.data());
  EXPECT_EQ(back[0], f16_to_f32(b.d) * -127.0f);
}

// ggml quantize_row_q4_0_ref on -16..15: the largest magnitude is -16, so d = -16 / -8 = 2 and
// q = min(15, (int8)(x / 2 + 8.5)); low nibbles hold values 0..15, high nibbles 16..31.
TEST(Codec, Q4_0MatchesGgmlReference) {
  const std::vector<float> x = ramp();
  const std::vector<uint8_t> bytes = encode_values(TensorType::Q4_0, x.data(), x.size());
  ASSERT_EQ(bytes.size(), sizeof(BlockQ4_0));
  BlockQ4_0 b;
  std::memcpy(&b, bytes.data(), sizeof(b));
  EXPECT_EQ(b.d, f32_to_f16(2.0f));
  EXPECT_EQ(b.qs[0], 0x80);   // q(-16) = 0, q(0) = 8
  EXPECT_EQ(b.qs[3], 0xA2);   // q(-13) = (int8)2, q(3) = (int8)10
  EXPECT_EQ(b.qs[15], 0xF8);  // q(-1) = 8, q(15) = min(15, 16)
  std::vector<float> back(x.size());  // [32]
  decode_values(TensorType::Q4_0, bytes.data(), back.size(), back.data());
  EXPECT_EQ(back[0], -16.0f);
  EXPECT_EQ(back[16], 0.0f);
  EXPECT_EQ(back[31], 14.0f);  // clamped to q = 15
}

TEST(Codec, ZeroBlocksAndExactFloats) {
  const std::vector<float> zeros(64, 0.0f);
  for (TensorType t : {TensorType::Q8_0, TensorType::Q4_0, TensorType::F16}) {
    const std::vector<uint8_t> bytes = encode_values(t, zeros.data(), zeros.size());
    std::vector<float> back(64, 1.0f);  // [64]
    decode_values(t, bytes.data(), back.size(), back.data());
    for (float v : back) EXPECT_EQ(v, 0.0f);
  }
  const std::vector<float> exact = {1.0f, -2.5f, 0.15625f, 65504.0f};  // exactly representable in f16
  const std::vector<uint8_t> f16 = encode_values(TensorType::F16, exact.data(), exact.size());
  std::vector<float> back(4);  // [4]
  decode_values(TensorType::F16, f16.data(), 4, back.data());
  EXPECT_EQ(back, exact);
  const std::vector<uint8_t> bf16 = encode_values(TensorType::BF16, exact.data(), 3);
  decode_values(TensorType::BF16, bf16.data(), 3, back.data());
  EXPECT_EQ(back[1], -2.5f);
}

TEST(Codec, RejectsBadInput) {
  std::vector<float> x(32, 1.0f);
  EXPECT_THROW(encode_values(TensorType::Q8_0, x.data(), 31), Error);
  std::vector<float> out(32);
  EXPECT_THROW(decode_values(TensorType::Q4_0, nullptr, 16, out.data()), Error);
  x[5] = std::numeric_limits<float>::infinity();
  try {
    encode_values(TensorType::Q8_0, x.data(), x.size());
    ADD_FAILURE() << "infinite value quantized";
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(), "non-finite"));
  }
  x[5] = std::nanf("");
  EXPECT_THROW(encode_values(TensorType::Q4_0, x.data(), x.size()), Error);
  EXPECT_THROW(encode_values(TensorType::Q8_0, x.data(), x.size()), Error);
}

TEST(Writer, RejectsInconsistentTensors) {
  Writer w;
  w.add_tensor("a", TensorType::F32, {2}, std::vector<uint8_t>(8));
  auto message = [&](auto&& fn) -> std::string {
    try {
      fn();
    } catch (const Error& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_TRUE(contains(message([&] { w.add_tensor("a", TensorType::F32, {2}, std::vector<uint8_t>(8)); }),
                       "tensor 'a': added twice"));
  EXPECT_TRUE(contains(message([&] { w.add_tensor("b", TensorType::F32, {2}, std::vector<uint8_t>(7)); }),
                       "7 bytes given, 8 expected"));
  EXPECT_TRUE(contains(message([&] { w.add_tensor("b", TensorType::F32, {}, {}); }), "needs 1..4 dims"));
  EXPECT_TRUE(contains(message([&] { w.add_tensor("b", TensorType::F32, {1, 1, 1, 1, 1}, std::vector<uint8_t>(4)); }),
                       "needs 1..4 dims"));
  EXPECT_TRUE(contains(message([&] { w.add_tensor("b", TensorType::F32, {2, 0}, {}); }), "dimension 1 is zero"));
  EXPECT_TRUE(contains(message([&] { w.add_tensor_f32("b", TensorType::Q8_0, {16}, std::vector<float>(16)); }),
                       "not a whole number of Q8_0 blocks"));
  EXPECT_TRUE(contains(message([&] { w.add_tensor_f32("b", TensorType::F32, {2, 2}, std::vector<float>(3)); }),
                       "3 values given, dims say 4"));
  EXPECT_TRUE(contains(message([&] { w.write("/nonexistent-dir/x.gguf"); }), "cannot create"));
}

}  // namespace
}  // namespace preface::gguf
