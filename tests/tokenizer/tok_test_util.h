// Helpers shared by the tokenizer tests: loading a tokenizer from ../shared and llama.cpp's test-vector
// files (test-tokenizer-0 format).
#pragma once
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "gguf/reader.h"
#include "support/shared_data.h"
#include "tokenizer/tokenizer.h"

namespace preface::test {

// The tokenizer of a GGUF under ../shared, or nullptr after recording a failure.
inline std::unique_ptr<Tokenizer> load_shared_tokenizer(const std::string& rel) {
  const auto path = shared_file(rel);
  if (path.empty()) return nullptr;
  const gguf::File file = gguf::File::open(path.string());
  return Tokenizer::from_gguf(file);
}

inline std::string read_file_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// llama.cpp's test-tokenizer-0 inputs: texts each followed by "\n__ggml_vocab_test__\n".
inline std::vector<std::string> read_vocab_inputs(const std::filesystem::path& path) {
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::string raw = read_file_bytes(path);
  std::vector<std::string> out;
  size_t pos = 0;
  for (size_t hit; (hit = raw.find(sep, pos)) != std::string::npos; pos = hit + sep.size()) {
    out.push_back(raw.substr(pos, hit - pos));
  }
  if (pos < raw.size()) out.push_back(raw.substr(pos));  // a last input without a separator after it (gemma-4)
  return out;
}

// The expected ids: one line per input, ids separated by spaces (an empty line for an empty result).
inline std::vector<std::vector<int32_t>> read_vocab_outputs(const std::filesystem::path& path) {
  std::istringstream in(read_file_bytes(path));
  std::vector<std::vector<int32_t>> out;
  for (std::string line; std::getline(in, line);) {
    std::istringstream ls(line);
    std::vector<int32_t> ids;
    for (int32_t id; ls >> id;) ids.push_back(id);
    out.push_back(std::move(ids));
  }
  return out;
}

// gtest parameter names allow only [A-Za-z0-9_].
inline std::string param_name(std::string s) {
  for (char& c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return s;
}

}  // namespace preface::test
