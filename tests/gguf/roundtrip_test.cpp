// Writer -> reader round trips: every metadata type, arrays, tensors of every type; codec accuracy and ggml
// bit-compatibility of the quantizers.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "gguf/reader.h"
#include "gguf/writer.h"
#include "gguf_bytes.h"
#include "util/fp16.h"

namespace preface::gguf {
namespace {

using test_bytes::write_temp;

std::vector<float> random_values(size_t n, uint64_t seed, float scale) {
  std::mt19937_64 rng(seed);
  std::vector<float> v(n);  // [n]
  for (float& x : v) x = scale * (static_cast<float>(rng() >> 40) / static_cast<float>(1 << 24) * 2.0f - 1.0f);
  return v;
}

Value scalar(ValueType t, int64_t i, double f = 0.0) {
  Value v;
  v.type = t;
  v.i = i;
  v.f = f;
  return v;
}

Value num_array(ValueType elem, std::vector<double> nums) {
  Value v;
  v.type = ValueType::ARRAY;
  v.elem_type = elem;
  v.nums = std::move(nums);
  return v;
}

TEST(RoundTrip, EveryMetadataType) {
  Writer w;
  w.set_string("s", "hello \xe2\x96\x81 world");
  w.set_string("empty", "");
  w.set_u32("u32", 4000000000u);
  w.set_i32("i32", -123456);
  w.set_u64("u64", uint64_t{1} << 62);
  w.set_f32("f32", 1e-5f);
  w.set_bool("t", true);
  w.set_bool("f", false);
  w.set_value("u8", scalar(ValueType::UINT8, 255));
  w.set_value("i8", scalar(ValueType::INT8, -128));
  w.set_value("u16", scalar(ValueType::UINT16, 65535));
  w.set_value("i16", scalar(ValueType::INT16, -32768));
  w.set_value("i64", scalar(ValueType::INT64, INT64_MIN));
  w.set_value("f64", scalar(ValueType::FLOAT64, 0, 1e300));
  w.set_string_array("strs", {"a", "", "\xc4\xa0the", std::string(1000, 'z')});
  w.set_f32_array("f32s", {0.5f, -1e-3f, 3e38f});
  w.set_i32_array("i32s", {INT32_MIN, 0, INT32_MAX});
  w.set_string_array("no_strs", {});
  w.set_value("u8s", num_array(ValueType::UINT8, {0, 255}));
  w.set_value("i16s", num_array(ValueType::INT16, {-32768, 7}));
  w.set_value("u64s", num_array(ValueType::UINT64, {9007199254740992.0}));
  w.set_value("i64s", num_array(ValueType::INT64, {-9007199254740992.0}));
  w.set_value("f64s", num_array(ValueType::FLOAT64, {0.1, -2.5e-300}));
  w.set_value("bools", num_array(ValueType::BOOL, {1, 0, 1}));
  w.set_u32("u32", 5);  // re-setting a key replaces its value and keeps one entry

  const File f = File::open(write_temp(w.to_bytes()));
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.metadata().size(), 24u);
  EXPECT_EQ(f.get_string("s"), "hello \xe2\x96\x81 world");
  EXPECT_EQ(f.get_string("empty"), "");
  EXPECT_EQ(f.get_int("u32"), 5);
  EXPECT_EQ(f.find("u32")->type, ValueType::UINT32);
  EXPECT_EQ(f.get_int("i32"), -123456);
  EXPECT_EQ(f.get_int("u64"), int64_t{1} << 62);
  EXPECT_EQ(f.find("u64")->type, ValueType::UINT64);
  EXPECT_EQ(f.get_float("f32"), static_cast<double>(1e-5f));
  EXPECT_TRUE(f.get_bool("t"));
  EXPECT_FALSE(f.get_bool("f"));
  EXPECT_EQ(f.get_int("u8"), 255);
  EXPECT_EQ(f.get_int("i8"), -128);
  EXPECT_EQ(f.get_int("u16"), 65535);
  EXPECT_EQ(f.get_int("i16"), -32768);
  EXPECT_EQ(f.get_int("i64"), INT64_MIN);
  EXPECT_EQ(f.get_float("f64"), 1e300);
  EXPECT_EQ(f.find("f64")->type, ValueType::FLOAT64);
  EXPECT_EQ(f.find("strs")->strs, (std::vector<std::string>{"a", "", "\xc4\xa0the", std::string(1000, 'z')}));
  EXPECT_EQ(f.find("f32s")->nums, (std::vector<double>{0.5f, -1e-3f, 3e38f}));
  EXPECT_EQ(f.find("f32s")->elem_type, ValueType::FLOAT32);
  EXPECT_EQ(f.find("i32s")->nums, (std::vector<double>{INT32_MIN, 0, INT32_MAX}));
  EXPECT_EQ(f.find("no_strs")->array_size(), 0u);
  EXPECT_EQ(f.find("no_strs")->elem_type, ValueType::STRING);
  EXPECT_EQ(f.find("u8s")->nums, (std::vector<double>{0, 255}));
  EXPECT_EQ(f.find("i16s")->nums, (std::vector<double>{-32768, 7}));
  EXPECT_EQ(f.find("u64s")->nums, (std::vector<double>{9007199254740992.0}));
  EXPECT_EQ(f.find("i64s")->nums, (std::vector<double>{-9007199254740992.0}));
  EXPECT_EQ(f.find("f64s")->nums, (std::vector<double>{0.1, -2.5e-300}));
  EXPECT_EQ(f.find("bools")->nums, (std::vector<double>{1, 0, 1}));
  EXPECT_EQ(f.find("bools")->elem_type, ValueType::BOOL);

  // Copying values read from a file (set_value) reproduces the same bytes.
  Writer copy;
  for (const char* key : {"s", "u8", "f64", "strs", "f32s", "bools"}) copy.set_value(key, *f.find(key));
  Writer direct;
  direct.set_string("s", "hello \xe2\x96\x81 world");
  direct.set_value("u8", scalar(ValueType::UINT8, 255));
  direct.set_value("f64", scalar(ValueType::FLOAT64, 0, 1e300));
  direct.set_string_array("strs", {"a", "", "\xc4\xa0the", std::string(1000, 'z')});
  direct.set_f32_array("f32s", {0.5f, -1e-3f, 3e38f});
  direct.set_value("bools", num_array(ValueType::BOOL, {1, 0, 1}));
  EXPECT_EQ(copy.to_bytes(), direct.to_bytes());
}

// Largest |decoded - original| allowed for a block whose largest magnitude is `amax`.
float max_error(TensorType t, float amax, float x) {
  switch (t) {
    case TensorType::F32: return 0.0f;
    case TensorType::F16: return std::fabs(x) * 0x1p-11f + 0x1p-24f;
    case TensorType::BF16: return std::fabs(x) * 0x1p-8f;
    case TensorType::Q8_0: return amax / 127.0f * 0.501f + amax * 1e-3f;  // half a step, plus f16 rounding of d
    case TensorType::Q4_0: return amax / 8.0f * 1.001f + amax * 1e-3f;  // +8 clamps to +7: one full step
    default: ADD_FAILURE() << "no error bound for " << tensor_type_name(t); return 0.0f;
  }
}

TEST(RoundTrip, TensorsOfEveryType) {
  const TensorType types[] = {TensorType::F32, TensorType::F16, TensorType::BF16, TensorType::Q8_0,
                              TensorType::Q4_0};
  const std::vector<std::vector<uint64_t>> shapes = {{64}, {32, 3}, {64, 2, 3}, {32, 1, 2, 2}};
  Writer w;
  std::vector<std::vector<float>> originals;  // one per (type, shape)
  for (TensorType t : types) {
    for (size_t s = 0; s < shapes.size(); ++s) {
      uint64_t n = 1;
      for (uint64_t d : shapes[s]) n *= d;
      originals.push_back(random_values(n, originals.size(), 3.0f));
      w.add_tensor_f32(std::string(tensor_type_name(t)) + "." + std::to_string(s), t, shapes[s], originals.back());
    }
  }
  const std::string path = write_temp({}, "tensors.gguf");
  w.write(path);
  std::ifstream in(path, std::ios::binary);
  const std::vector<uint8_t> on_disk((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(on_disk, w.to_bytes());

  const File f = File::open(path);
  ASSERT_EQ(f.tensors().size(), originals.size());
  size_t k = 0;
  for (TensorType t : types) {
    for (size_t s = 0; s < shapes.size(); ++s, ++k) {
      const TensorInfo& info = f.tensors()[k];
      SCOPED_TRACE(info.name);
      EXPECT_EQ(info.name, std::string(tensor_type_name(t)) + "." + std::to_string(s));
      EXPECT_EQ(info.type, t);
      EXPECT_EQ(info.dims, shapes[s]);
      EXPECT_EQ(info.n_values, originals[k].size());
      EXPECT_EQ(info.size_bytes, row_bytes(t, info.dims[0]) * info.n_rows());
      EXPECT_EQ((info.data - f.mapping().data()) % 32, 0);
      std::vector<float> back(info.n_values);  // [n_values]
      decode_values(t, info.data, back.size(), back.data());
      const std::vector<float>& orig = originals[k];
      for (size_t b = 0; b < orig.size(); b += kQuantBlock) {
        float amax = 0.0f;
        for (size_t j = b; j < b + kQuantBlock; ++j) amax = std::max(amax, std::fabs(orig[j]));
        for (size_t j = b; j < b + kQuantBlock; ++j) {
          ASSERT_LE(std::fabs(back[j] - orig[j]), max_error(t, amax, orig[j])) << "value " << j;
        }
      }
    }
  }
}

TEST(RoundTrip, Version2HeaderReadsTheSame) {
  Writer w;
  w.set_string("general.architecture", "llama");
  w.add_tensor_f32("w", TensorType::F32, {8}, std::vector<float>(8, 2.0f));
  std::vector<uint8_t> bytes = w.to_bytes();
  bytes[4] = 2;  // version field; v2 and v3 share the layout
  const File f = File::open(write_temp(bytes));
  EXPECT_EQ(f.version(), 2u);
  EXPECT_EQ(reinterpret_cast<const float*>(f.tensor("w").data)[7], 2.0f);
}

TEST(RoundTrip, AlignmentKeyIsHonouredByWriter) {
  Writer w;
  w.set_u32("general.alignment", 64);
  w.add_tensor_f32("a", TensorType::F32, {8}, std::vector<float>(8, 1.0f));
  w.add_tensor_f32("b", TensorType::F32, {8}, std::vector<float>(8, 2.0f));
  const File f = File::open(write_temp(w.to_bytes()));
  EXPECT_EQ(f.alignment(), 64u);
  EXPECT_EQ(f.tensor("b").data - f.tensor("a").data, 64);
  EXPECT_EQ((f.tensor("a").data - f.mapping().data()) % 64, 0);
}

}  // namespace
}  // namespace preface::gguf
