#include "model/layers/weights.h"

#include <cmath>

#include "gguf/writer.h"
#include "util/error.h"

namespace preface::model {
namespace {

std::string dims_str(const std::vector<uint64_t>& dims) {
  std::string s = "{";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "}";
}

// Finds `name` and checks its dims (dims[0] = row length, as GGUF stores them).
const gguf::TensorInfo& expect_tensor(const gguf::File& file, const std::string& name,
                                      const std::vector<uint64_t>& dims) {
  const gguf::TensorInfo* t = file.find_tensor(name);
  if (t == nullptr) throw Error("model tensor missing: " + name);
  if (!gguf::type_is_computed(t->type)) {
    throw Error("tensor " + name + " is " + std::string(gguf::tensor_type_name(t->type)) +
                ", which preface cannot compute yet (it computes " + gguf::computed_type_names() + ")");
  }
  if (t->dims != dims) {
    throw Error("tensor " + name + " has shape " + dims_str(t->dims) + ", expected " + dims_str(dims));
  }
  return *t;
}

// A matrix's rows must hold whole blocks of its type.
void check_whole_blocks(const gguf::TensorInfo& t, const std::string& name, int64_t n_cols) {
  if (n_cols % static_cast<int64_t>(gguf::type_block_values(t.type)) != 0) {
    throw Error("tensor " + name + " of type " + std::string(gguf::tensor_type_name(t.type)) +
                " has rows of " + std::to_string(n_cols) + " values, not a whole number of blocks");
  }
}

}  // namespace

kernels::Matrix load_matrix(const gguf::File& file, const std::string& name, int64_t n_rows, int64_t n_cols) {
  const gguf::TensorInfo& t =
      expect_tensor(file, name, {static_cast<uint64_t>(n_cols), static_cast<uint64_t>(n_rows)});
  check_whole_blocks(t, name, n_cols);
  return kernels::Matrix{t.type, t.data, n_rows, n_cols};
}

std::vector<kernels::Matrix> load_experts(const gguf::File& file, const std::string& name, int64_t n_experts,
                                          int64_t n_rows, int64_t n_cols) {
  const gguf::TensorInfo& t = expect_tensor(
      file, name, {static_cast<uint64_t>(n_cols), static_cast<uint64_t>(n_rows), static_cast<uint64_t>(n_experts)});
  check_whole_blocks(t, name, n_cols);
  const kernels::Matrix all{t.type, t.data, n_experts * n_rows, n_cols};
  std::vector<kernels::Matrix> experts;
  experts.reserve(static_cast<size_t>(n_experts));
  for (int64_t e = 0; e < n_experts; ++e) experts.push_back(row_view(all, e * n_rows, n_rows));
  return experts;
}

kernels::Matrix row_view(const kernels::Matrix& m, int64_t first, int64_t n_rows) {
  const size_t row_bytes = gguf::row_bytes(m.type, static_cast<size_t>(m.n_cols));
  return kernels::Matrix{m.type, m.data + static_cast<size_t>(first) * row_bytes, n_rows, m.n_cols};
}

std::vector<float> load_vector(const gguf::File& file, const std::string& name, int64_t n) {
  return load_values(file, name, {static_cast<uint64_t>(n)});
}

std::vector<float> load_values(const gguf::File& file, const std::string& name, const std::vector<uint64_t>& dims) {
  const gguf::TensorInfo& t = expect_tensor(file, name, dims);
  uint64_t n = 1;
  for (const uint64_t d : dims) n *= d;  // expect_tensor matched the file's dims, whose product the reader checked
  if (dims.empty() || dims[0] % gguf::type_block_values(t.type) != 0) {
    throw Error("tensor " + name + " has " + std::to_string(n) + " values, not a whole number of blocks");
  }
  std::vector<float> out(static_cast<size_t>(n));
  gguf::decode_values(t.type, t.data, out.size(), out.data());
  for (const float v : out) {
    if (!std::isfinite(v)) throw Error("tensor " + name + " holds a NaN or infinite value");
  }
  return out;
}

}  // namespace preface::model
