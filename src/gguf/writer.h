// GGUF v3 writer: collects metadata and tensors in memory, then writes one file.
// Used by tests and by `preface synth`. The format is documented in gguf/reader.h.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "gguf/reader.h"

namespace preface::gguf {

class Writer {
 public:
  void set_string(const std::string& key, const std::string& v);
  void set_u32(const std::string& key, uint32_t v);
  void set_i32(const std::string& key, int32_t v);
  void set_u64(const std::string& key, uint64_t v);
  void set_f32(const std::string& key, float v);
  void set_bool(const std::string& key, bool v);
  void set_string_array(const std::string& key, const std::vector<std::string>& v);
  void set_f32_array(const std::string& key, const std::vector<float>& v);
  void set_i32_array(const std::string& key, const std::vector<int32_t>& v);
  // Copies a metadata value read from another file (e.g. to copy a tokenizer).
  void set_value(const std::string& key, const Value& v);

  // Adds a tensor whose bytes are already encoded in `type` (size must equal row_bytes * n_rows).
  void add_tensor(const std::string& name, TensorType type, std::vector<uint64_t> dims,
                  std::vector<uint8_t> bytes);
  // Adds a tensor from f32 values, encoding (quantizing) them to `type`.
  void add_tensor_f32(const std::string& name, TensorType type, std::vector<uint64_t> dims,
                      const std::vector<float>& values);

  // Writes the file (metadata in insertion order, tensors aligned to 32). Throws preface::Error on I/O failure.
  void write(const std::string& path) const;
  // The same bytes as write() would produce.
  std::vector<uint8_t> to_bytes() const;

 private:
  struct Entry {
    std::string key;
    Value value;
  };
  struct Tensor {
    std::string name;
    TensorType type;
    std::vector<uint64_t> dims;
    std::vector<uint8_t> bytes;
  };
  void put(const std::string& key, Value v);
  std::vector<Entry> kv_;
  std::vector<Tensor> tensors_;
};

// Encodes f32 values as a row-major tensor of `type` (quantizing per 32-value block, the way ggml does:
// Q8_0 d = absmax/127, q = round(x/d); Q4_0 d = max/-8 where max is the signed value of largest magnitude,
// q = min(15, (int8)(x/d + 8.5))). n_values must be a multiple of the block size.
std::vector<uint8_t> encode_values(TensorType type, const float* values, size_t n_values);
// Decodes `n_values` values of `type` starting at `data` into f32.
// Both handle F32, F16, BF16, Q8_0 and Q4_0 (type_has_codec); the model decodes the other types with kernels/quant.h.
bool type_has_codec(TensorType type);
void decode_values(TensorType type, const uint8_t* data, size_t n_values, float* out);

}  // namespace preface::gguf
