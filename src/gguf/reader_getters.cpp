// Typed metadata lookups on a parsed gguf::File.
#include <string>

#include "gguf/reader.h"
#include "util/error.h"

namespace preface::gguf {
namespace {

bool is_integer(ValueType t) {
  switch (t) {
    case ValueType::UINT8: case ValueType::INT8: case ValueType::UINT16: case ValueType::INT16:
    case ValueType::UINT32: case ValueType::INT32: case ValueType::UINT64: case ValueType::INT64:
      return true;
    default:
      return false;
  }
}

[[noreturn]] void wrong_type(const File& f, const std::string& key, const char* wanted) {
  throw Error(f.path() + ": key '" + key + "' is not " + wanted + " (value type " +
              std::to_string(static_cast<uint32_t>(f.find(key)->type)) + ")");
}

}  // namespace

const Value* File::find(const std::string& key) const {
  const auto it = kv_.find(key);
  return it == kv_.end() ? nullptr : &it->second;
}

std::optional<std::string> File::try_string(const std::string& key) const {
  const Value* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (v->type != ValueType::STRING) wrong_type(*this, key, "a string");
  return v->str;
}

std::optional<int64_t> File::try_int(const std::string& key) const {
  const Value* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (!is_integer(v->type)) wrong_type(*this, key, "an integer");
  return v->i;
}

std::optional<double> File::try_float(const std::string& key) const {
  const Value* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (v->type == ValueType::FLOAT32 || v->type == ValueType::FLOAT64) return v->f;
  if (!is_integer(v->type)) wrong_type(*this, key, "a number");
  return static_cast<double>(v->i);
}

std::optional<bool> File::try_bool(const std::string& key) const {
  const Value* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (v->type != ValueType::BOOL) wrong_type(*this, key, "a bool");
  return v->i != 0;
}

namespace {
template <typename T>
T required(const File& f, const std::string& key, std::optional<T> v) {
  if (!v) throw Error(f.path() + ": missing metadata key '" + key + "'");
  return *std::move(v);
}
}  // namespace

std::string File::get_string(const std::string& key) const { return required(*this, key, try_string(key)); }
int64_t File::get_int(const std::string& key) const { return required(*this, key, try_int(key)); }
double File::get_float(const std::string& key) const { return required(*this, key, try_float(key)); }
bool File::get_bool(const std::string& key) const { return required(*this, key, try_bool(key)); }

const TensorInfo* File::find_tensor(const std::string& name) const {
  const auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

const TensorInfo& File::tensor(const std::string& name) const {
  const TensorInfo* t = find_tensor(name);
  if (t == nullptr) throw Error(path() + ": missing tensor '" + name + "'");
  return *t;
}

}  // namespace preface::gguf
