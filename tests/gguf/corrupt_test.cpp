// Corrupted, truncated and hostile GGUF files: each must be rejected with a preface::Error naming the problem.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "gguf/reader.h"
#include "gguf/writer.h"
#include "gguf_bytes.h"

namespace preface::gguf {
namespace {

using test_bytes::Bytes;
using test_bytes::contains;
using test_bytes::open_error;

constexpr uint64_t kHuge = uint64_t{1} << 60;

// A small valid file: one F32 tensor of 8 values (32 bytes, so no trailing padding).
Bytes valid_file() {
  Bytes f;
  f.header(1, 2).kv_str("general.architecture", "llama").kv_u32("llama.block_count", 1);
  f.tensor("w", {8}, 0, 0).pad().zeros(32);
  return f;
}

TEST(Corrupt, BaselineFilesOpen) {
  EXPECT_NO_THROW(File::open(test_bytes::write_temp(valid_file().b)));
  Bytes v2;
  v2.header(0, 1, 2).kv_str("general.architecture", "llama");
  EXPECT_EQ(File::open(test_bytes::write_temp(v2.b)).version(), 2u);
}

// Every proper prefix of a writer-produced file with metadata of many types and tensors of every type.
TEST(Corrupt, EveryTruncationIsRejected) {
  Writer w;
  w.set_string("general.architecture", "llama");
  w.set_u32("a.u32", 7);
  w.set_f32("a.f32", 0.5f);
  w.set_bool("a.bool", true);
  w.set_string_array("a.strs", {"x", "", "yz"});
  w.set_i32_array("a.ints", {1, -2, 3});
  const std::vector<float> v(64, 0.25f);
  w.add_tensor_f32("t.q8", TensorType::Q8_0, {32, 2}, v);
  w.add_tensor_f32("t.q4", TensorType::Q4_0, {64}, v);
  w.add_tensor_f32("t.f16", TensorType::F16, {64}, v);
  w.add_tensor_f32("t.f32", TensorType::F32, {8}, std::vector<float>(8, 1.0f));  // 32 bytes: no final padding
  const std::vector<uint8_t> full = w.to_bytes();
  ASSERT_NO_THROW(File::open(test_bytes::write_temp(full)));
  for (size_t len = 0; len < full.size(); ++len) {
    SCOPED_TRACE("truncated to " + std::to_string(len) + " of " + std::to_string(full.size()) + " bytes");
    const std::string msg = open_error(std::vector<uint8_t>(full.begin(), full.begin() + len));
    const bool named = msg.find("truncated") != std::string::npos || msg.find("past the end") != std::string::npos ||
                       msg.find("exceeds") != std::string::npos || msg.find("impossible") != std::string::npos;
    EXPECT_TRUE(named) << msg;
  }
}

// Random byte corruptions of a valid file either still parse or throw preface::Error: no crash, no other
// exception (std::bad_alloc / length_error would mean an allocation sized by unchecked file data).
TEST(Corrupt, RandomByteCorruptionsNeverCrash) {
  Writer w;
  w.set_string("general.architecture", "llama");
  w.set_string_array("tokenizer.ggml.tokens", {"<s>", "a", "bc"});
  w.set_f32_array("tokenizer.ggml.scores", {0.0f, -1.0f, -2.0f});
  w.add_tensor_f32("t.q8", TensorType::Q8_0, {32, 2}, std::vector<float>(64, 0.5f));
  w.add_tensor_f32("t.f32", TensorType::F32, {8}, std::vector<float>(8, 1.0f));
  const std::vector<uint8_t> full = w.to_bytes();
  std::mt19937_64 rng(1234);
  int n_rejected = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    std::vector<uint8_t> bytes = full;
    const int n_flips = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < n_flips; ++k) {
      // Mostly the header/metadata region, where the structure lives; high bytes make huge values.
      const size_t at = rng() % 2 == 0 ? rng() % 256 : rng() % bytes.size();
      bytes[at] = static_cast<uint8_t>(rng() % 3 == 0 ? 0xff : rng());
    }
    try {
      File::open(test_bytes::write_temp(bytes));
    } catch (const Error& e) {
      ++n_rejected;
      EXPECT_NE(std::string(e.what()).find(": "), std::string::npos) << e.what();
    }
  }
  EXPECT_GT(n_rejected, 1000);
}

TEST(Corrupt, BadMagicAndVersions) {
  Bytes f = valid_file();
  f.b[0] = 'X';
  EXPECT_TRUE(contains(open_error(f.b), "bad magic"));
  EXPECT_TRUE(contains(open_error({}), "magic"));
  for (uint32_t version : {0u, 1u, 4u, 0xffffffffu}) {
    Bytes g;
    g.header(0, 0, version);
    EXPECT_TRUE(contains(open_error(g.b), "unsupported GGUF version " + std::to_string(version)));
  }
}

TEST(Corrupt, HugeCounts) {
  Bytes kv;
  kv.header(0, kHuge).kv_u32("k", 1);
  EXPECT_TRUE(contains(open_error(kv.b), "metadata count"));
  Bytes tensors;
  tensors.header(kHuge, 0).tensor("w", {8}, 0, 0);
  EXPECT_TRUE(contains(open_error(tensors.b), "tensor count"));
  Bytes arr;
  arr.header(0, 1).str("tokenizer.ggml.tokens").u32(9).u32(8).u64(kHuge).str("a");
  const std::string msg = open_error(arr.b);
  EXPECT_TRUE(contains(msg, "tokenizer.ggml.tokens"));
  EXPECT_TRUE(contains(msg, "array count 1152921504606846976"));
  Bytes arr_u64;  // 2^60 * 8 bytes overflows 64 bits if multiplied naively
  arr_u64.header(0, 1).str("k").u32(9).u32(10).u64(uint64_t{1} << 61).u64(1);
  EXPECT_TRUE(contains(open_error(arr_u64.b), "array count"));
}

TEST(Corrupt, HugeStringLengths) {
  Bytes key;
  key.header(0, 1).u64(kHuge).u32(4).u32(1);
  EXPECT_TRUE(contains(open_error(key.b), "metadata entry #0 key: string length 1152921504606846976"));
  Bytes value;
  value.header(0, 1).str("general.name").u32(8).u64(kHuge);
  const std::string msg = open_error(value.b);
  EXPECT_TRUE(contains(msg, "general.name"));
  EXPECT_TRUE(contains(msg, "string length"));
  Bytes elem;
  elem.header(0, 1).str("a").u32(9).u32(8).u64(2).str("ok").u64(~uint64_t{0});
  EXPECT_TRUE(contains(open_error(elem.b), "'a'[1]: string length"));
  Bytes name;
  name.header(1, 0).u64(kHuge).zeros(64);
  EXPECT_TRUE(contains(open_error(name.b), "tensor #0 name: string length"));
}

TEST(Corrupt, WrongValueTypes) {
  Bytes unknown;
  unknown.header(0, 1).str("k").u32(13).u32(0);
  EXPECT_TRUE(contains(open_error(unknown.b), "key 'k': unknown value type 13"));
  Bytes unknown_elem;
  unknown_elem.header(0, 1).str("k").u32(9).u32(99).u64(1).u32(0);
  EXPECT_TRUE(contains(open_error(unknown_elem.b), "unknown array element type 99"));
  Bytes nested;
  nested.header(0, 1).str("k").u32(9).u32(9).u64(1).u32(4).u64(1).u32(0);
  EXPECT_TRUE(contains(open_error(nested.b), "key 'k': nested arrays"));
  Bytes bad_bool;
  bad_bool.header(0, 1).str("flag").u32(7).u8(2);
  EXPECT_TRUE(contains(open_error(bad_bool.b), "'flag': BOOL value 2"));
  Bytes big_u64;
  big_u64.header(0, 1).str("n").u32(10).u64(~uint64_t{0});
  EXPECT_TRUE(contains(open_error(big_u64.b), "'n': UINT64 value 18446744073709551615 is too large"));
  Bytes big_elem;
  big_elem.header(0, 1).str("ids").u32(9).u32(11).u64(1).raw<int64_t>((int64_t{1} << 53) + 1);
  EXPECT_TRUE(contains(open_error(big_elem.b), "'ids'[0]: integer 9007199254740993 is beyond 2^53"));
  Bytes align_str;
  align_str.header(0, 1).kv_str("general.alignment", "32");
  EXPECT_TRUE(contains(open_error(align_str.b), "general.alignment': must be an integer"));
  for (uint32_t a : {0u, 48u}) {
    Bytes align;
    align.header(0, 1).kv_u32("general.alignment", a);
    EXPECT_TRUE(contains(open_error(align.b), "is not a power of two"));
  }
  // Typed getters on a valid file name the key and the kind wanted.
  const File f = File::open(test_bytes::write_temp(valid_file().b));
  try {
    f.get_int("general.architecture");
    ADD_FAILURE() << "get_int on a string did not throw";
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(), "'general.architecture' is not an integer"));
  }
  EXPECT_THROW(f.get_bool("llama.block_count"), Error);
  EXPECT_THROW(f.try_string("llama.block_count"), Error);
  EXPECT_DOUBLE_EQ(f.get_float("llama.block_count"), 1.0);
}

TEST(Corrupt, DuplicateKeysAndTensors) {
  Bytes keys;
  keys.header(0, 2).kv_u32("k", 1).kv_u32("k", 2);
  EXPECT_TRUE(contains(open_error(keys.b), "duplicate metadata key 'k'"));
  Bytes tensors;
  tensors.header(2, 0).tensor("w", {8}, 0, 0).tensor("w", {8}, 0, 32).pad().zeros(64);
  EXPECT_TRUE(contains(open_error(tensors.b), "duplicate tensor name 'w'"));
}

TEST(Corrupt, BadTensorInfos) {
  Bytes dims0;
  dims0.header(1, 0).tensor("w", {}, 0, 0).pad().zeros(32);
  EXPECT_TRUE(contains(open_error(dims0.b), "tensor 'w': n_dims 0 is not in 1..4"));
  Bytes dims5;
  dims5.header(1, 0).tensor("w", {1, 1, 1, 1, 1}, 0, 0).pad().zeros(32);
  EXPECT_TRUE(contains(open_error(dims5.b), "tensor 'w': n_dims 5"));
  Bytes zero;
  zero.header(1, 0).tensor("w", {8, 0}, 0, 0).pad().zeros(32);
  EXPECT_TRUE(contains(open_error(zero.b), "tensor 'w': dimension 1 is zero"));
  Bytes overflow;
  overflow.header(1, 0).tensor("w", {uint64_t{1} << 32, uint64_t{1} << 32}, 0, 0).pad().zeros(32);
  EXPECT_TRUE(contains(open_error(overflow.b), "tensor 'w': dims overflow"));
  Bytes size_overflow;  // 2^62 values fit, but 2^62 * 4 bytes does not
  size_overflow.header(1, 0).tensor("w", {uint64_t{1} << 31, uint64_t{1} << 31}, 0, 0).pad().zeros(32);
  EXPECT_TRUE(contains(open_error(size_overflow.b), "tensor 'w': data size overflows"));
  Bytes retired;  // ggml type ids 4 and 5 (Q4_2, Q4_3) were removed
  retired.header(1, 0).tensor("blk.0.attn_q.weight", {256}, 4, 0).pad().zeros(256);
  EXPECT_TRUE(contains(open_error(retired.b), "tensor 'blk.0.attn_q.weight': unknown tensor type 4"));
  Bytes q4k_short;  // a known layout is checked: one Q4_K super-block is 144 bytes
  q4k_short.header(1, 0).tensor("w", {200}, 12, 0).pad().zeros(256);
  EXPECT_TRUE(contains(open_error(q4k_short.b),
                       "tensor 'w': row length 200 is not a multiple of the Q4_K block size 256"));
  Bytes partial_block;
  partial_block.header(1, 0).tensor("w", {48}, 8, 0).pad().zeros(64);
  EXPECT_TRUE(contains(open_error(partial_block.b), "tensor 'w': row length 48 is not a multiple"));
}

TEST(Corrupt, BadTensorOffsets) {
  Bytes past;
  past.header(1, 0).tensor("w", {8}, 0, 32).pad().zeros(32);
  EXPECT_TRUE(contains(open_error(past.b), "tensor 'w': data at offset 32 of 32 bytes extends past the end"));
  Bytes huge;
  huge.header(1, 0).tensor("w", {8}, 0, ~uint64_t{0} - 31).pad().zeros(32);
  EXPECT_TRUE(contains(open_error(huge.b), "past the end"));
  Bytes misaligned;
  misaligned.header(1, 0).tensor("w", {8}, 0, 4).pad().zeros(64);
  EXPECT_TRUE(contains(open_error(misaligned.b), "tensor 'w': data offset 4 is not aligned to 32"));
  Bytes overlap;
  overlap.header(2, 0).tensor("a", {16}, 0, 0).tensor("b", {8}, 0, 32).pad().zeros(64);
  EXPECT_TRUE(contains(open_error(overlap.b), "tensor 'b': data overlaps tensor 'a'"));
  Bytes aligned64;  // honours general.alignment: offset 32 is misaligned at 64
  aligned64.header(1, 1).kv_u32("general.alignment", 64).tensor("w", {8}, 0, 32).pad(64).zeros(128);
  EXPECT_TRUE(contains(open_error(aligned64.b), "not aligned to 64"));
}

TEST(Corrupt, AlignmentHonoured) {
  Bytes f;
  f.header(2, 1).kv_u32("general.alignment", 64).tensor("a", {8}, 0, 0).tensor("b", {8}, 0, 64);
  const size_t header_end = f.b.size();
  f.pad(64);
  const size_t data_start = f.b.size();
  ASSERT_GT(data_start, header_end);
  f.zeros(64).raw<float>(3.5f).zeros(28);
  const File file = File::open(test_bytes::write_temp(f.b));
  EXPECT_EQ(file.alignment(), 64u);
  const TensorInfo& b = file.tensor("b");
  EXPECT_EQ(b.data - file.mapping().data(), static_cast<ptrdiff_t>(data_start + 64));
  float first;
  std::memcpy(&first, b.data, 4);
  EXPECT_EQ(first, 3.5f);
}

}  // namespace
}  // namespace preface::gguf
