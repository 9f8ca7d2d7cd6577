// Regression tests for findings of the tokenizer_load fuzz target (fuzz/tokenizer_load_fuzz.cpp); the inputs
// are kept in fuzz/regress/tokenizer_load/. The undefined behaviour shows under clang's -fsanitize=undefined
// (the fuzz build) or g++ with -fsanitize=float-cast-overflow, which g++'s -fsanitize=undefined does not
// include.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <utility>
#include <string>
#include <vector>

#include "gguf/reader.h"
#include "support/shared_data.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace preface {
namespace {

template <typename T>
void put(std::string& out, T v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof(T));
}

void put_string(std::string& out, const std::string& s) {
  put<uint64_t>(out, s.size());
  out += s;
}

// GGUF bytes of a 4-token "llama" vocab whose tokenizer.ggml.token_type array has element type `elem` (raw
// GGUF type) and the values `types`, each written as T. Built by hand: gguf::Writer had its own cast bug.
template <typename T>
std::string vocab_with_types(uint32_t elem, const std::vector<T>& types) {
  std::string kv;
  put_string(kv, "tokenizer.ggml.model");
  put<uint32_t>(kv, 8);  // STRING
  put_string(kv, "llama");
  put_string(kv, "tokenizer.ggml.tokens");
  put<uint32_t>(kv, 9);  // ARRAY
  put<uint32_t>(kv, 8);  // of STRING
  put<uint64_t>(kv, 4);
  for (const char* t : {"<unk>", "<s>", "</s>", "a"}) put_string(kv, t);
  put_string(kv, "tokenizer.ggml.token_type");
  put<uint32_t>(kv, 9);  // ARRAY
  put<uint32_t>(kv, elem);
  put<uint64_t>(kv, types.size());
  for (const T t : types) put<T>(kv, t);
  std::string out = "GGUF";
  put<uint32_t>(out, 3);  // version
  put<uint64_t>(out, 0);  // tensors
  put<uint64_t>(out, 3);  // metadata entries
  return out + kv;
}

std::unique_ptr<Tokenizer> load_bytes(const std::string& bytes, const char* name) {
  const auto path = test::temp_dir("vocab_regress") / name;
  std::ofstream(path, std::ios::binary) << bytes;
  return Tokenizer::from_gguf(gguf::File::open(path.string()));
}

// load_vocab's attr_from_type cast the token type (a double read from the file) to int: undefined behaviour
// for UINT32 values above INT32_MAX (0xFFFFFFFF, what some converters write for -1), huge floats and NaN.
// Such types must load like any unknown type (Unused: decodes to nothing) or be rejected with preface::Error.
TEST(VocabRegress, TokenTypesOutsideIntRange) {
  const std::pair<const char*, std::string> cases[] = {
      {"u32.gguf", vocab_with_types<uint32_t>(4, {2, 3, 3, 0xFFFFFFFFu})},
      {"i64.gguf", vocab_with_types<int64_t>(11, {2, 3, 3, int64_t{1} << 53})},
      {"f32_nan.gguf", vocab_with_types<float>(6, {2, 3, 3, std::nanf("")})},
      {"f64_huge.gguf", vocab_with_types<double>(12, {2, 3, 3, 1e300})}};
  for (const auto& [name, bytes] : cases) {
    SCOPED_TRACE(name);
    try {
      const auto tok = load_bytes(bytes, name);
      EXPECT_EQ(tok->n_vocab(), 4);
      EXPECT_NE(tok->attr(3), TokenAttr::Normal);
      EXPECT_EQ(tok->token_to_bytes(3), "");
    } catch (const Error&) {
      // rejecting the file is fine too
    }
  }
}

}  // namespace
}  // namespace preface
