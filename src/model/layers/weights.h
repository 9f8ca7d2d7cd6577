// Reading a layer's tensors from the GGUF: each is checked (present, a computed type, the expected shape) as it is
// taken, so a layer kind's load() names the first tensor that is wrong. Shared by the layer kinds and the model.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "gguf/reader.h"
#include "kernels/matmul.h"

namespace preface::model {

// A weight matrix of n_rows x n_cols (GGUF dims {n_cols, n_rows}), read in place from the file's bytes.
kernels::Matrix load_matrix(const gguf::File& file, const std::string& name, int64_t n_rows, int64_t n_cols);

// The n_experts matrices of n_rows x n_cols of a 3-D expert tensor (GGUF dims {n_cols, n_rows, n_experts}), each a
// view of its slice of the file's bytes.
std::vector<kernels::Matrix> load_experts(const gguf::File& file, const std::string& name, int64_t n_experts,
                                          int64_t n_rows, int64_t n_cols);

// Rows [first, first + n_rows) of m, as a matrix of its own (a view into the same bytes).
kernels::Matrix row_view(const kernels::Matrix& m, int64_t first, int64_t n_rows);

// A 1-D tensor of n values of any supported type, decoded to f32; every value must be finite.
std::vector<float> load_vector(const gguf::File& file, const std::string& name, int64_t n);
// All values of a tensor of exactly these dims (dims[0] = row length, as GGUF stores them), decoded to f32, in the
// file's order; the same checks as load_vector.
std::vector<float> load_values(const gguf::File& file, const std::string& name, const std::vector<uint64_t>& dims);

}  // namespace preface::model
