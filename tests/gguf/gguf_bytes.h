// Test helpers: hand-assembling GGUF bytes (valid or deliberately broken) and opening them from a temp file.
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <initializer_list>
#include <string>
#include <vector>

#include "gguf/reader.h"
#include "support/shared_data.h"
#include "util/error.h"

namespace preface::gguf::test_bytes {

// Little-endian byte assembler following the layout in gguf/reader.h.
struct Bytes {
  std::vector<uint8_t> b;

  template <typename T>
  Bytes& raw(T v) {
    const size_t at = b.size();
    b.resize(at + sizeof(T));
    std::memcpy(b.data() + at, &v, sizeof(T));
    return *this;
  }
  Bytes& u8(uint8_t v) { return raw(v); }
  Bytes& u32(uint32_t v) { return raw(v); }
  Bytes& u64(uint64_t v) { return raw(v); }
  Bytes& str(const std::string& s) {
    u64(s.size());
    b.insert(b.end(), s.begin(), s.end());
    return *this;
  }
  Bytes& header(uint64_t n_tensors, uint64_t n_kv, uint32_t version = 3) {
    b.insert(b.end(), {'G', 'G', 'U', 'F'});
    return u32(version).u64(n_tensors).u64(n_kv);
  }
  Bytes& kv_u32(const std::string& key, uint32_t v) { return str(key).u32(4).u32(v); }
  Bytes& kv_str(const std::string& key, const std::string& v) { return str(key).u32(8).str(v); }
  Bytes& tensor(const std::string& name, std::initializer_list<uint64_t> dims, uint32_t type, uint64_t offset) {
    str(name).u32(static_cast<uint32_t>(dims.size()));
    for (uint64_t d : dims) u64(d);
    return u32(type).u64(offset);
  }
  Bytes& pad(size_t alignment = 32) {
    b.resize((b.size() + alignment - 1) / alignment * alignment, 0);
    return *this;
  }
  Bytes& zeros(size_t n) {
    b.resize(b.size() + n, 0);
    return *this;
  }
};

// Passes when `text` contains `part`; the failure shows both.
inline ::testing::AssertionResult contains(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "message \"" << text << "\" does not mention \"" << part << "\"";
}

inline std::string write_temp(const std::vector<uint8_t>& bytes, const std::string& name = "file.gguf") {
  static const std::filesystem::path dir = test::temp_dir("gguf");
  const std::string path = (dir / name).string();
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  return path;
}

// Opens `bytes` as a GGUF file and returns the preface::Error message ("" and a test failure if none).
inline std::string open_error(const std::vector<uint8_t>& bytes) {
  try {
    File::open(write_temp(bytes));
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected preface::Error, file opened fine";
  return "";
}

}  // namespace preface::gguf::test_bytes
