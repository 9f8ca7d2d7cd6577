// Fuzz target: arbitrary bytes as a GGUF file. gguf::File::open must either throw preface::Error or return a
// File whose every getter, tensor record and data pointer is consistent with the bytes; a File it accepts must
// survive a write/read round trip through gguf::Writer unchanged.
#include <cmath>
#include <cstring>
#include <vector>

#include "gguf/reader.h"
#include "gguf/writer.h"
#include "support.h"
#include "util/error.h"

namespace preface::fuzz {
namespace {

bool is_integer(gguf::ValueType t) {
  using enum gguf::ValueType;
  return t == UINT8 || t == INT8 || t == UINT16 || t == INT16 || t == UINT32 || t == INT32 || t == UINT64 ||
         t == INT64;
}

// Each typed getter either agrees with the stored value or throws preface::Error, as its type says.
void check_getters(const gguf::File& f, const std::string& key, const gguf::Value& v) {
  using gguf::ValueType;
  check(f.find(key) == &v, "find('" + key + "') does not return the metadata entry");
  const bool integer = !v.is_array() && is_integer(v.type);
  const bool floating = !v.is_array() && (v.type == ValueType::FLOAT32 || v.type == ValueType::FLOAT64);
  bool threw = false;
  try {
    check(f.get_string(key) == v.str, "get_string('" + key + "') differs from the value");
  } catch (const Error&) {
    threw = true;
  }
  check(threw == (v.type != ValueType::STRING), "get_string('" + key + "') threw for the wrong type");
  threw = false;
  try {
    check(f.get_int(key) == v.i, "get_int('" + key + "') differs from the value");
  } catch (const Error&) {
    threw = true;
  }
  check(threw == !integer, "get_int('" + key + "') threw for the wrong type");
  threw = false;
  try {
    const double x = f.get_float(key);
    check(floating ? (std::isnan(x) && std::isnan(v.f)) || x == v.f : x == static_cast<double>(v.i),
          "get_float('" + key + "') differs from the value");
  } catch (const Error&) {
    threw = true;
  }
  check(threw == !(integer || floating), "get_float('" + key + "') threw for the wrong type");
  threw = false;
  try {
    check(f.get_bool(key) == (v.i != 0), "get_bool('" + key + "') differs from the value");
  } catch (const Error&) {
    threw = true;
  }
  check(threw == (v.type != ValueType::BOOL), "get_bool('" + key + "') threw for the wrong type");
  if (v.is_array()) {
    check(v.elem_type != ValueType::ARRAY, "nested array accepted for '" + key + "'");
    check(v.elem_type == ValueType::STRING ? v.nums.empty() : v.strs.empty(), "array '" + key + "' holds both kinds");
  }
}

// The tensor record is consistent and its data lies inside the mapping; its bytes decode (from an exact-size
// copy, so ASan sees any read past the tensor).
void check_tensor(const gguf::File& f, const gguf::TensorInfo& t) {
  check(f.find_tensor(t.name) == &t && &f.tensor(t.name) == &t, "tensor '" + t.name + "' lookup mismatch");
  check(!t.dims.empty() && t.dims.size() <= 4, "tensor '" + t.name + "' has a bad dim count");
  uint64_t n_values = 1;
  for (const uint64_t d : t.dims) {
    check(d > 0 && !__builtin_mul_overflow(n_values, d, &n_values), "tensor '" + t.name + "' has bad dims");
  }
  check(n_values == t.n_values, "tensor '" + t.name + "' n_values is not the product of its dims");
  check(t.size_bytes == gguf::row_bytes(t.type, t.dims[0]) * t.n_rows(), "tensor '" + t.name + "' size mismatch");
  const uint8_t* begin = f.mapping().data();
  const uint8_t* end = begin + f.mapping().size_bytes();
  check(t.data >= begin && t.data <= end && t.size_bytes <= static_cast<uint64_t>(end - t.data),
        "tensor '" + t.name + "' data lies outside the file");
  check((t.data - begin) % f.alignment() == 0, "tensor '" + t.name + "' data is not aligned");

  if (!gguf::type_has_codec(t.type)) return;  // a layout the reader knows, decoded by the kernels
  const size_t block = gguf::type_block_values(t.type);
  const size_t n_decode = std::min<uint64_t>(t.n_values, 4096) / block * block;
  const size_t n_decode_bytes = gguf::row_bytes(t.type, n_decode);
  const std::vector<uint8_t> copy(t.data, t.data + n_decode_bytes);  // [n_decode_bytes]
  std::vector<float> values(n_decode);                                  // [n_decode]
  gguf::decode_values(t.type, copy.data(), n_decode, values.data());
}

bool same_value(const gguf::Value& a, const gguf::Value& b) {
  auto same_num = [](double x, double y) { return (std::isnan(x) && std::isnan(y)) || x == y; };
  if (a.type != b.type || a.i != b.i || !same_num(a.f, b.f) || a.str != b.str || a.strs != b.strs) return false;
  if (a.is_array() && a.elem_type != b.elem_type) return false;
  if (a.nums.size() != b.nums.size()) return false;
  for (size_t k = 0; k < a.nums.size(); ++k) {
    if (!same_num(a.nums[k], b.nums[k])) return false;
  }
  return true;
}

// Writes the parsed file back with gguf::Writer and parses the result: same metadata, same tensors.
void check_round_trip(const gguf::File& f) {
  gguf::Writer w;
  for (const auto& [key, value] : f.metadata()) w.set_value(key, value);
  for (const gguf::TensorInfo& t : f.tensors()) {
    w.add_tensor(t.name, t.type, t.dims, std::vector<uint8_t>(t.data, t.data + t.size_bytes));
  }
  const std::vector<uint8_t> bytes = w.to_bytes();
  const MemFile mem(bytes.data(), bytes.size());
  const gguf::File g = gguf::File::open(mem.path());
  check(g.metadata().size() == f.metadata().size(), "round trip changed the metadata count");
  for (const auto& [key, value] : f.metadata()) {
    const gguf::Value* other = g.find(key);
    check(other != nullptr && same_value(value, *other), "round trip changed metadata '" + key + "'");
  }
  check(g.tensors().size() == f.tensors().size(), "round trip changed the tensor count");
  for (size_t k = 0; k < f.tensors().size(); ++k) {
    const gguf::TensorInfo& a = f.tensors()[k];
    const gguf::TensorInfo& b = g.tensors()[k];
    check(a.name == b.name && a.type == b.type && a.dims == b.dims && a.size_bytes == b.size_bytes &&
              std::memcmp(a.data, b.data, a.size_bytes) == 0,
          "round trip changed tensor '" + a.name + "'");
  }
}

}  // namespace
}  // namespace preface::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace preface;
  const fuzz::MemFile mem(data, size);
  std::optional<gguf::File> file;
  try {
    file.emplace(gguf::File::open(mem.path()));
  } catch (const Error&) {
    return 0;  // rejected: the expected outcome for most inputs
  }
  const gguf::File& f = *file;
  fuzz::check(f.version() == 2 || f.version() == 3, "accepted version " + std::to_string(f.version()));
  fuzz::check(f.alignment() > 0 && (f.alignment() & (f.alignment() - 1)) == 0, "alignment is not a power of two");
  for (const auto& [key, value] : f.metadata()) fuzz::check_getters(f, key, value);
  for (const gguf::TensorInfo& t : f.tensors()) fuzz::check_tensor(f, t);
  for (const char* missing : {"\x01no such key", ""}) {
    if (f.find(missing) != nullptr) continue;
    try {
      (void)f.get_int(missing);
      fuzz::fail("get_int of a missing key did not throw");
    } catch (const Error&) {
    }
    fuzz::check(!f.try_string(missing).has_value(), "try_string of a missing key has a value");
    try {
      (void)f.tensor(missing);
      fuzz::check(f.find_tensor(missing) != nullptr, "tensor() of a missing name did not throw");
    } catch (const Error&) {
    }
  }
  fuzz::check_round_trip(f);
  return 0;
}
