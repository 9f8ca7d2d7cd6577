// Parsing and validation of GGUF v2/v3 files. Every read goes through Cursor, which checks the bytes are inside
// the mapping; every size computed from file values uses overflow-checked arithmetic; every allocation sized by
// the file is bounded first by the bytes left (each element occupies at least one byte of the file).
#include <algorithm>
#include <cstring>
#include <set>
#include <string>
#include <utility>

#include "gguf/reader.h"
#include "util/error.h"

namespace preface::gguf {
namespace {

constexpr uint64_t kDefaultAlignment = 32;
constexpr int64_t kMaxExactInt = int64_t{1} << 53;  // integers in a double are exact up to here

// Fixed byte size of a scalar value type; 0 for STRING/ARRAY and unknown types.
uint64_t scalar_bytes(ValueType t) {
  switch (t) {
    case ValueType::UINT8: case ValueType::INT8: case ValueType::BOOL: return 1;
    case ValueType::UINT16: case ValueType::INT16: return 2;
    case ValueType::UINT32: case ValueType::INT32: case ValueType::FLOAT32: return 4;
    case ValueType::UINT64: case ValueType::INT64: case ValueType::FLOAT64: return 8;
    default: return 0;
  }
}

bool known_value_type(uint32_t raw) { return raw <= static_cast<uint32_t>(ValueType::FLOAT64); }

class Cursor {
 public:
  Cursor(const uint8_t* data, size_t size_bytes, std::string path)
      : data_(data), size_bytes_(size_bytes), path_(std::move(path)) {}

  size_t pos() const { return pos_; }
  size_t left() const { return size_bytes_ - pos_; }
  size_t size_bytes() const { return size_bytes_; }

  [[noreturn]] void fail(const std::string& what) const { throw Error(path_ + ": " + what); }

  void need(uint64_t n_bytes, const std::string& what) const {
    if (n_bytes > left()) {
      fail(what + ": needs " + std::to_string(n_bytes) + " bytes at offset " + std::to_string(pos_) +
           " but only " + std::to_string(left()) + " are left (file truncated?)");
    }
  }

  template <typename T>
  T read(const std::string& what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  std::string read_string(const std::string& what) {
    const uint64_t n = read<uint64_t>(what + " (string length)");
    if (n > left()) {
      fail(what + ": string length " + std::to_string(n) + " exceeds the " + std::to_string(left()) +
           " bytes left in the file");
    }
    std::string s(reinterpret_cast<const char*>(data_ + pos_), static_cast<size_t>(n));
    pos_ += static_cast<size_t>(n);
    return s;
  }

 private:
  const uint8_t* data_;
  size_t size_bytes_;
  size_t pos_ = 0;
  std::string path_;
};

// Reads one scalar of numeric/bool type `t` as an integer (into *i) or a float (into *f).
void read_scalar(Cursor& c, ValueType t, const std::string& what, int64_t* i, double* f, bool* is_float) {
  *is_float = false;
  switch (t) {
    case ValueType::UINT8: *i = c.read<uint8_t>(what); return;
    case ValueType::INT8: *i = c.read<int8_t>(what); return;
    case ValueType::UINT16: *i = c.read<uint16_t>(what); return;
    case ValueType::INT16: *i = c.read<int16_t>(what); return;
    case ValueType::UINT32: *i = c.read<uint32_t>(what); return;
    case ValueType::INT32: *i = c.read<int32_t>(what); return;
    case ValueType::INT64: *i = c.read<int64_t>(what); return;
    case ValueType::UINT64: {
      const uint64_t u = c.read<uint64_t>(what);
      if (u > static_cast<uint64_t>(INT64_MAX)) c.fail(what + ": UINT64 value " + std::to_string(u) + " is too large");
      *i = static_cast<int64_t>(u);
      return;
    }
    case ValueType::BOOL: {
      const uint8_t b = c.read<uint8_t>(what);
      if (b > 1) c.fail(what + ": BOOL value " + std::to_string(b) + " is neither 0 nor 1");
      *i = b;
      return;
    }
    case ValueType::FLOAT32: *f = c.read<float>(what); *is_float = true; return;
    case ValueType::FLOAT64: *f = c.read<double>(what); *is_float = true; return;
    default: c.fail(what + ": value type " + std::to_string(static_cast<uint32_t>(t)) + " is not a scalar");
  }
}

void read_array(Cursor& c, Value& v, const std::string& what) {
  const uint32_t raw = c.read<uint32_t>(what + " (array element type)");
  if (!known_value_type(raw)) c.fail(what + ": unknown array element type " + std::to_string(raw));
  v.elem_type = static_cast<ValueType>(raw);
  if (v.elem_type == ValueType::ARRAY) c.fail(what + ": nested arrays are not supported");
  const uint64_t count = c.read<uint64_t>(what + " (array count)");
  // A string element takes at least its 8-byte length; a scalar its fixed size.
  const uint64_t min_elem_bytes = v.elem_type == ValueType::STRING ? 8 : scalar_bytes(v.elem_type);
  if (count > c.left() / min_elem_bytes) {
    c.fail(what + ": array count " + std::to_string(count) + " of " + std::to_string(min_elem_bytes) +
           "-byte elements exceeds the " + std::to_string(c.left()) + " bytes left in the file");
  }
  if (v.elem_type == ValueType::STRING) {
    v.strs.reserve(static_cast<size_t>(count));
    for (uint64_t k = 0; k < count; ++k) v.strs.push_back(c.read_string(what + "[" + std::to_string(k) + "]"));
    return;
  }
  v.nums.reserve(static_cast<size_t>(count));
  for (uint64_t k = 0; k < count; ++k) {
    int64_t i = 0;
    double f = 0;
    bool is_float = false;
    read_scalar(c, v.elem_type, what, &i, &f, &is_float);
    if (!is_float && (i > kMaxExactInt || i < -kMaxExactInt)) {
      c.fail(what + "[" + std::to_string(k) + "]: integer " + std::to_string(i) + " is beyond 2^53");
    }
    v.nums.push_back(is_float ? f : static_cast<double>(i));
  }
}

Value read_value(Cursor& c, const std::string& key) {
  const std::string what = "key '" + key + "'";
  const uint32_t raw = c.read<uint32_t>(what + " (value type)");
  if (!known_value_type(raw)) c.fail(what + ": unknown value type " + std::to_string(raw));
  Value v;
  v.type = static_cast<ValueType>(raw);
  if (v.type == ValueType::STRING) {
    v.str = c.read_string(what);
  } else if (v.type == ValueType::ARRAY) {
    read_array(c, v, what);
  } else {
    bool is_float = false;
    read_scalar(c, v.type, what, &v.i, &v.f, &is_float);
  }
  return v;
}

uint64_t read_alignment(const Cursor& c, const std::map<std::string, Value>& kv) {
  const auto it = kv.find("general.alignment");
  if (it == kv.end()) return kDefaultAlignment;
  const Value& v = it->second;
  if (v.is_array() || scalar_bytes(v.type) == 0 || v.type == ValueType::FLOAT32 || v.type == ValueType::FLOAT64 ||
      v.type == ValueType::BOOL) {
    c.fail("key 'general.alignment': must be an integer, found value type " +
           std::to_string(static_cast<uint32_t>(v.type)));
  }
  if (v.i <= 0 || (v.i & (v.i - 1)) != 0 || v.i > (int64_t{1} << 30)) {
    c.fail("key 'general.alignment': " + std::to_string(v.i) + " is not a power of two in [1, 2^30]");
  }
  return static_cast<uint64_t>(v.i);
}

// Reads one tensor-info record; data pointer and bounds are resolved once the data section start is known.
// Returns the info and its offset relative to the data section.
std::pair<TensorInfo, uint64_t> read_tensor_info(Cursor& c, uint64_t index, uint64_t alignment) {
  TensorInfo t;
  t.name = c.read_string("tensor #" + std::to_string(index) + " name");
  const std::string what = "tensor '" + t.name + "'";
  const uint32_t n_dims = c.read<uint32_t>(what + " (n_dims)");
  if (n_dims < 1 || n_dims > 4) c.fail(what + ": n_dims " + std::to_string(n_dims) + " is not in 1..4");
  t.n_values = 1;
  for (uint32_t d = 0; d < n_dims; ++d) {
    const uint64_t dim = c.read<uint64_t>(what + " (dims)");
    if (dim == 0) c.fail(what + ": dimension " + std::to_string(d) + " is zero");
    if (__builtin_mul_overflow(t.n_values, dim, &t.n_values) || t.n_values > static_cast<uint64_t>(INT64_MAX)) {
      c.fail(what + ": dims overflow (product of dimensions exceeds 2^63)");
    }
    t.dims.push_back(dim);
  }
  const uint32_t raw_type = c.read<uint32_t>(what + " (type)");
  const auto type = tensor_type_from_raw(raw_type);
  if (!type) {
    c.fail(what + ": unknown tensor type " + std::to_string(raw_type) + " (not a ggml type id)");
  }
  t.type = *type;
  const uint64_t block = type_block_values(t.type);
  if (t.dims[0] % block != 0) {
    c.fail(what + ": row length " + std::to_string(t.dims[0]) + " is not a multiple of the " +
           std::string(tensor_type_name(t.type)) + " block size " + std::to_string(block));
  }
  // size = n_values / block * block_bytes; n_values < 2^63 and block_bytes <= 34 may still overflow.
  if (__builtin_mul_overflow(t.n_values / block, type_block_bytes(t.type), &t.size_bytes)) {
    c.fail(what + ": data size overflows");
  }
  const uint64_t offset = c.read<uint64_t>(what + " (offset)");
  if (offset % alignment != 0) {
    c.fail(what + ": data offset " + std::to_string(offset) + " is not aligned to " + std::to_string(alignment));
  }
  return {std::move(t), offset};
}

}  // namespace

File File::open(const std::string& path, MappedFile::Mode mode) {
  File f;
  f.map_ = MappedFile(path, mode);
  Cursor c(f.map_.data(), f.map_.size_bytes(), path);

  c.need(4, "magic");
  if (std::memcmp(f.map_.data(), "GGUF", 4) != 0) c.fail("bad magic: not a GGUF file");
  c.read<uint32_t>("magic");
  f.version_ = c.read<uint32_t>("version");
  if (f.version_ != 2 && f.version_ != 3) {
    c.fail("unsupported GGUF version " + std::to_string(f.version_) + " (only versions 2 and 3 are supported)");
  }
  const uint64_t n_tensors = c.read<uint64_t>("tensor count");
  const uint64_t n_kv = c.read<uint64_t>("metadata count");
  // Smallest possible records: kv = key length 8 + type 4 + 1 value byte; tensor info = 8 + 4 + 8 + 4 + 8.
  if (n_kv > c.left() / 13) {
    c.fail("metadata count " + std::to_string(n_kv) + " is impossible in the " + std::to_string(c.left()) +
           " bytes left in the file");
  }
  if (n_tensors > c.left() / 32) {
    c.fail("tensor count " + std::to_string(n_tensors) + " is impossible in the " + std::to_string(c.left()) +
           " bytes left in the file");
  }

  for (uint64_t k = 0; k < n_kv; ++k) {
    std::string key = c.read_string("metadata entry #" + std::to_string(k) + " key");
    if (f.kv_.count(key) != 0) c.fail("duplicate metadata key '" + key + "'");
    Value v = read_value(c, key);
    f.kv_.emplace(std::move(key), std::move(v));
  }
  f.alignment_ = read_alignment(c, f.kv_);

  std::vector<uint64_t> offsets;  // [n_tensors] data offsets relative to the data section
  f.tensors_.reserve(static_cast<size_t>(n_tensors));
  offsets.reserve(static_cast<size_t>(n_tensors));
  for (uint64_t k = 0; k < n_tensors; ++k) {
    auto [info, offset] = read_tensor_info(c, k, f.alignment_);
    if (f.tensor_index_.count(info.name) != 0) c.fail("duplicate tensor name '" + info.name + "'");
    f.tensor_index_.emplace(info.name, f.tensors_.size());
    f.tensors_.push_back(std::move(info));
    offsets.push_back(offset);
  }

  // The data section starts at the next multiple of the alignment (c.pos() <= file size < 2^63, no overflow).
  const uint64_t data_start = (c.pos() + f.alignment_ - 1) / f.alignment_ * f.alignment_;
  const uint64_t file_bytes = c.size_bytes();
  std::vector<std::pair<uint64_t, size_t>> spans;  // [n_tensors] (absolute start, tensor index), for overlap checks
  for (size_t k = 0; k < f.tensors_.size(); ++k) {
    TensorInfo& t = f.tensors_[k];
    uint64_t begin = 0;
    uint64_t end = 0;
    if (__builtin_add_overflow(data_start, offsets[k], &begin) ||
        __builtin_add_overflow(begin, t.size_bytes, &end) || end > file_bytes) {
      c.fail("tensor '" + t.name + "': data at offset " + std::to_string(offsets[k]) + " of " +
             std::to_string(t.size_bytes) + " bytes extends past the end of the file (" + std::to_string(file_bytes) +
             " bytes, data section at " + std::to_string(data_start) + ")");
    }
    t.data = f.map_.data() + begin;
    spans.emplace_back(begin, k);
  }
  std::sort(spans.begin(), spans.end());
  for (size_t k = 1; k < spans.size(); ++k) {
    const TensorInfo& prev = f.tensors_[spans[k - 1].second];
    if (spans[k - 1].first + prev.size_bytes > spans[k].first) {
      c.fail("tensor '" + f.tensors_[spans[k].second].name + "': data overlaps tensor '" + prev.name + "'");
    }
  }
  return f;
}

}  // namespace preface::gguf
