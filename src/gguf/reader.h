// GGUF file reader (versions 2 and 3), memory-mapped, validating everything it reads.
//
// File layout (all little-endian):
//   magic "GGUF" (4 bytes) | uint32 version | uint64 n_tensors | uint64 n_kv
//   n_kv x { string key | uint32 value_type | value }
//   n_tensors x { string name | uint32 n_dims (1..4) | uint64 dims[n_dims] | uint32 type | uint64 offset }
//   padding to `general.alignment` (default 32) | tensor data
// string = uint64 length + bytes (not NUL-terminated). Array value = uint32 elem_type + uint64 count + elems.
// Tensor offsets are relative to the start of the data section and must be aligned.
// dims[0] is the fastest-varying (row length); a 2-D tensor of dims {n_cols, n_rows} is n_rows rows.
//
// Every count, length, offset and size is checked against the file before use; any violation throws
// preface::Error with a message naming the key or tensor and what is wrong.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "gguf/types.h"
#include "util/mapped_file.h"

namespace preface::gguf {

enum class ValueType : uint32_t {
  UINT8 = 0, INT8 = 1, UINT16 = 2, INT16 = 3, UINT32 = 4, INT32 = 5, FLOAT32 = 6, BOOL = 7,
  STRING = 8, ARRAY = 9, UINT64 = 10, INT64 = 11, FLOAT64 = 12,
};

// One metadata value. Scalars: integers in `i` (UINT64 above INT64_MAX is rejected), floats in `f`, bools in
// `i` (0/1), strings in `str`. Arrays: `elem_type` set; string elements in `strs`; numeric/bool elements in
// `nums` (integers are exact up to 2^53, larger ones are rejected); nested arrays are rejected.
struct Value {
  ValueType type = ValueType::UINT8;
  ValueType elem_type = ValueType::UINT8;
  int64_t i = 0;
  double f = 0.0;
  std::string str;
  std::vector<std::string> strs;
  std::vector<double> nums;

  bool is_array() const { return type == ValueType::ARRAY; }
  size_t array_size() const { return elem_type == ValueType::STRING ? strs.size() : nums.size(); }
};

struct TensorInfo {
  std::string name;
  TensorType type = TensorType::F32;
  std::vector<uint64_t> dims;   // dims[0] = row length in values
  uint64_t n_values = 0;        // product of dims
  uint64_t size_bytes = 0;
  const uint8_t* data = nullptr;  // points into the mapping, valid while the File lives

  uint64_t n_rows() const { return dims.empty() ? 0 : n_values / dims[0]; }
};

class File {
 public:
  // Maps and parses `path`. Throws preface::Error on any problem.
  static File open(const std::string& path, MappedFile::Mode mode = MappedFile::Mode::Map);

  uint32_t version() const { return version_; }
  const std::string& path() const { return map_.path(); }
  const MappedFile& mapping() const { return map_; }
  uint64_t alignment() const { return alignment_; }

  const std::map<std::string, Value>& metadata() const { return kv_; }
  const Value* find(const std::string& key) const;
  // Typed getters: throw preface::Error naming the key when it is missing or of the wrong kind.
  std::string get_string(const std::string& key) const;
  int64_t get_int(const std::string& key) const;      // any integer type
  double get_float(const std::string& key) const;     // FLOAT32/FLOAT64 or any integer type
  bool get_bool(const std::string& key) const;
  // Optional variants return nullopt/default when the key is absent (but still throw on a wrong type).
  std::optional<std::string> try_string(const std::string& key) const;
  std::optional<int64_t> try_int(const std::string& key) const;
  std::optional<double> try_float(const std::string& key) const;
  std::optional<bool> try_bool(const std::string& key) const;

  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find_tensor(const std::string& name) const;
  // Throws preface::Error naming the tensor when missing.
  const TensorInfo& tensor(const std::string& name) const;

 private:
  MappedFile map_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  std::map<std::string, Value> kv_;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, size_t> tensor_index_;
};

}  // namespace preface::gguf
