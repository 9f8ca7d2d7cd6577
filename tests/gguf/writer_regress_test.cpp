// Regression tests for findings of the gguf_reader fuzz target (fuzz/gguf_reader_fuzz.cpp). The undefined
// behaviour shows under clang's -fsanitize=undefined (the fuzz build) or g++ with -fsanitize=float-cast-overflow,
// which g++'s -fsanitize=undefined does not include; the fuzzer's input is kept in fuzz/regress/gguf_reader/.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "gguf/reader.h"
#include "gguf/writer.h"
#include "support/shared_data.h"

namespace preface::gguf {
namespace {

// Writer::set_value with a float array copied from a file: put_value converted every element to int64 before
// knowing its type, which is undefined behaviour for values beyond +-2^63, infinities and NaN (UBSan:
// "is outside the range of representable values of type 'long'"). Found by gguf_reader's write/read round trip.
TEST(WriterRegress, FloatArraysOutsideInt64RangeRoundTrip) {
  const double inf = std::numeric_limits<double>::infinity();
  Value f64;
  f64.type = ValueType::ARRAY;
  f64.elem_type = ValueType::FLOAT64;
  f64.nums = {1e300, -1e300, inf, -inf, 9.3e18, std::nan("")};
  Value f32 = f64;
  f32.elem_type = ValueType::FLOAT32;
  f32.nums = {static_cast<double>(3e38f), static_cast<double>(-4.15384e34f), inf, std::nan("")};  // float-exact

  Writer w;
  w.set_value("a.f64", f64);
  w.set_value("a.f32", f32);
  const auto path = test::temp_dir("writer_regress") / "float_arrays.gguf";
  w.write(path.string());
  const File f = File::open(path.string());

  for (const char* key : {"a.f64", "a.f32"}) {
    const Value* v = f.find(key);
    ASSERT_NE(v, nullptr) << key;
    const Value& want = std::string(key) == "a.f64" ? f64 : f32;
    ASSERT_EQ(v->nums.size(), want.nums.size()) << key;
    for (size_t k = 0; k < want.nums.size(); ++k) {
      if (std::isnan(want.nums[k])) {
        EXPECT_TRUE(std::isnan(v->nums[k])) << key << "[" << k << "]";
      } else {
        EXPECT_EQ(v->nums[k], want.nums[k]) << key << "[" << k << "]";
      }
    }
  }
}

}  // namespace
}  // namespace preface::gguf
