// gguf::Writer: GGUF v3 serialisation. Header and metadata are built in memory; tensor data is written from
// the stored buffers, each padded to the alignment (offsets are cumulative padded sizes, as ggml expects).
#include "gguf/writer.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <utility>

#include "util/error.h"

namespace preface::gguf {
namespace {

constexpr uint32_t kVersion = 3;
constexpr uint64_t kDefaultAlignment = 32;

template <typename T>
void put_raw(std::vector<uint8_t>& out, T v) {
  const size_t at = out.size();
  out.resize(at + sizeof(T));
  std::memcpy(out.data() + at, &v, sizeof(T));
}

void put_string(std::vector<uint8_t>& out, const std::string& s) {
  put_raw<uint64_t>(out, s.size());
  out.insert(out.end(), s.begin(), s.end());
}

// One numeric/bool element of type `t`; integers come from `i`, floats from `f`.
void put_number(std::vector<uint8_t>& out, ValueType t, int64_t i, double f, const std::string& key) {
  switch (t) {
    case ValueType::UINT8: put_raw(out, static_cast<uint8_t>(i)); return;
    case ValueType::INT8: put_raw(out, static_cast<int8_t>(i)); return;
    case ValueType::UINT16: put_raw(out, static_cast<uint16_t>(i)); return;
    case ValueType::INT16: put_raw(out, static_cast<int16_t>(i)); return;
    case ValueType::UINT32: put_raw(out, static_cast<uint32_t>(i)); return;
    case ValueType::INT32: put_raw(out, static_cast<int32_t>(i)); return;
    case ValueType::UINT64: put_raw(out, static_cast<uint64_t>(i)); return;
    case ValueType::INT64: put_raw(out, i); return;
    case ValueType::BOOL: put_raw(out, static_cast<uint8_t>(i != 0)); return;
    case ValueType::FLOAT32: put_raw(out, static_cast<float>(f)); return;
    case ValueType::FLOAT64: put_raw(out, f); return;
    default:
      throw Error("gguf writer: key '" + key + "': value type " + std::to_string(static_cast<uint32_t>(t)) +
                  " is not a number");
  }
}

void put_value(std::vector<uint8_t>& out, const std::string& key, const Value& v) {
  put_raw(out, static_cast<uint32_t>(v.type));
  if (v.type == ValueType::STRING) {
    put_string(out, v.str);
  } else if (v.type == ValueType::ARRAY) {
    if (v.elem_type == ValueType::ARRAY) throw Error("gguf writer: key '" + key + "': nested arrays unsupported");
    put_raw(out, static_cast<uint32_t>(v.elem_type));
    put_raw<uint64_t>(out, v.array_size());
    if (v.elem_type == ValueType::STRING) {
      for (const std::string& s : v.strs) put_string(out, s);
    } else {
      const bool is_float = v.elem_type == ValueType::FLOAT32 || v.elem_type == ValueType::FLOAT64;
      for (double x : v.nums) {
        // Converting a double outside int64's range to an integer is undefined: reject it first.
        if (!is_float && !(x >= -9223372036854775808.0 && x < 9223372036854775808.0)) {
          throw Error("gguf writer: key '" + key + "': array element " + std::to_string(x) +
                      " does not fit its integer type");
        }
        put_number(out, v.elem_type, is_float ? 0 : static_cast<int64_t>(x), x, key);
      }
    }
  } else {
    put_number(out, v.type, v.i, v.f, key);
  }
}

uint64_t align_up(uint64_t n, uint64_t alignment) { return (n + alignment - 1) / alignment * alignment; }

}  // namespace

void Writer::put(const std::string& key, Value v) {
  for (Entry& e : kv_) {
    if (e.key == key) {
      e.value = std::move(v);
      return;
    }
  }
  kv_.push_back({key, std::move(v)});
}

void Writer::set_string(const std::string& key, const std::string& v) {
  Value x;
  x.type = ValueType::STRING;
  x.str = v;
  put(key, std::move(x));
}

namespace {
Value int_value(ValueType t, int64_t i) {
  Value x;
  x.type = t;
  x.i = i;
  return x;
}
Value array_value(ValueType elem) {
  Value x;
  x.type = ValueType::ARRAY;
  x.elem_type = elem;
  return x;
}
}  // namespace

void Writer::set_u32(const std::string& key, uint32_t v) { put(key, int_value(ValueType::UINT32, v)); }
void Writer::set_i32(const std::string& key, int32_t v) { put(key, int_value(ValueType::INT32, v)); }
void Writer::set_u64(const std::string& key, uint64_t v) {
  if (v > static_cast<uint64_t>(INT64_MAX)) throw Error("gguf writer: key '" + key + "': UINT64 above 2^63-1");
  put(key, int_value(ValueType::UINT64, static_cast<int64_t>(v)));
}
void Writer::set_bool(const std::string& key, bool v) { put(key, int_value(ValueType::BOOL, v ? 1 : 0)); }
void Writer::set_f32(const std::string& key, float v) {
  Value x;
  x.type = ValueType::FLOAT32;
  x.f = v;
  put(key, std::move(x));
}

void Writer::set_string_array(const std::string& key, const std::vector<std::string>& v) {
  Value x = array_value(ValueType::STRING);
  x.strs = v;
  put(key, std::move(x));
}
void Writer::set_f32_array(const std::string& key, const std::vector<float>& v) {
  Value x = array_value(ValueType::FLOAT32);
  x.nums.assign(v.begin(), v.end());
  put(key, std::move(x));
}
void Writer::set_i32_array(const std::string& key, const std::vector<int32_t>& v) {
  Value x = array_value(ValueType::INT32);
  x.nums.assign(v.begin(), v.end());
  put(key, std::move(x));
}

void Writer::set_value(const std::string& key, const Value& v) {
  if (v.is_array() && v.elem_type == ValueType::ARRAY) {
    throw Error("gguf writer: key '" + key + "': nested arrays unsupported");
  }
  put(key, v);
}

void Writer::add_tensor(const std::string& name, TensorType type, std::vector<uint64_t> dims,
                        std::vector<uint8_t> bytes) {
  const std::string what = "gguf writer: tensor '" + name + "'";
  for (const Tensor& t : tensors_) {
    if (t.name == name) throw Error(what + ": added twice");
  }
  if (dims.empty() || dims.size() > 4) throw Error(what + ": needs 1..4 dims, got " + std::to_string(dims.size()));
  uint64_t n_rows = 1;
  for (size_t d = 0; d < dims.size(); ++d) {
    if (dims[d] == 0) throw Error(what + ": dimension " + std::to_string(d) + " is zero");
    if (d > 0 && __builtin_mul_overflow(n_rows, dims[d], &n_rows)) throw Error(what + ": dims overflow");
  }
  uint64_t expected = 0;
  if (__builtin_mul_overflow(static_cast<uint64_t>(row_bytes(type, dims[0])), n_rows, &expected)) {
    throw Error(what + ": size overflows");
  }
  if (bytes.size() != expected) {
    throw Error(what + ": " + std::to_string(bytes.size()) + " bytes given, " + std::to_string(expected) +
                " expected for " + std::string(tensor_type_name(type)));
  }
  tensors_.push_back({name, type, std::move(dims), std::move(bytes)});
}

void Writer::add_tensor_f32(const std::string& name, TensorType type, std::vector<uint64_t> dims,
                            const std::vector<float>& values) {
  uint64_t n_values = dims.empty() ? 0 : 1;
  for (uint64_t d : dims) {
    if (__builtin_mul_overflow(n_values, d, &n_values)) throw Error("gguf writer: tensor '" + name + "': overflow");
  }
  if (values.size() != n_values) {
    throw Error("gguf writer: tensor '" + name + "': " + std::to_string(values.size()) + " values given, dims say " +
                std::to_string(n_values));
  }
  add_tensor(name, type, std::move(dims), encode_values(type, values.data(), values.size()));
}

namespace {

// Header, metadata and tensor infos, padded to the alignment: everything before the data section.
std::vector<uint8_t> build_prefix(const auto& kv, const auto& tensors, uint64_t alignment) {
  std::vector<uint8_t> out;  // [prefix bytes], grows as fields are appended
  put_raw<uint32_t>(out, 0x46554747u);  // "GGUF" read as a little-endian uint32
  put_raw(out, kVersion);
  put_raw<uint64_t>(out, tensors.size());
  put_raw<uint64_t>(out, kv.size());
  for (const auto& e : kv) {
    put_string(out, e.key);
    put_value(out, e.key, e.value);
  }
  uint64_t offset = 0;
  for (const auto& t : tensors) {
    put_string(out, t.name);
    put_raw<uint32_t>(out, static_cast<uint32_t>(t.dims.size()));
    for (uint64_t d : t.dims) put_raw(out, d);
    put_raw(out, static_cast<uint32_t>(t.type));
    put_raw(out, offset);
    offset += align_up(t.bytes.size(), alignment);
  }
  out.resize(align_up(out.size(), alignment), 0);
  return out;
}

template <typename Sink>
void emit(const auto& kv, const auto& tensors, uint64_t alignment, Sink&& sink) {
  const std::vector<uint8_t> prefix = build_prefix(kv, tensors, alignment);
  sink(prefix.data(), prefix.size());
  const std::vector<uint8_t> zeros(alignment, 0);  // [alignment] padding source
  for (const auto& t : tensors) {
    sink(t.bytes.data(), t.bytes.size());
    sink(zeros.data(), align_up(t.bytes.size(), alignment) - t.bytes.size());
  }
}

uint64_t alignment_of(const auto& kv) {
  for (const auto& e : kv) {
    if (e.key != "general.alignment") continue;
    const int64_t a = e.value.i;
    if (e.value.is_array() || a <= 0 || (a & (a - 1)) != 0 || a > (int64_t{1} << 30)) {
      throw Error("gguf writer: general.alignment must be a power of two");
    }
    return static_cast<uint64_t>(a);
  }
  return kDefaultAlignment;
}

}  // namespace

std::vector<uint8_t> Writer::to_bytes() const {
  std::vector<uint8_t> out;  // [file bytes]
  emit(kv_, tensors_, alignment_of(kv_), [&](const uint8_t* p, size_t n) { out.insert(out.end(), p, p + n); });
  return out;
}

void Writer::write(const std::string& path) const {
  const uint64_t alignment = alignment_of(kv_);
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(path.c_str(), "wb"), &std::fclose);
  if (!file) throw Error("cannot create '" + path + "': " + std::strerror(errno));
  emit(kv_, tensors_, alignment, [&](const uint8_t* p, size_t n) {
    if (n != 0 && std::fwrite(p, 1, n, file.get()) != n) {
      throw Error("cannot write '" + path + "': " + std::strerror(errno));
    }
  });
  if (std::fclose(file.release()) != 0) throw Error("cannot write '" + path + "': " + std::strerror(errno));
}

}  // namespace preface::gguf
