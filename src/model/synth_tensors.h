// Internal to the synthetic-model writer (model/synth.h): random tensors drawn per name, and the qwen35 layers
// (model/synth_qwen35.cpp). Each tensor draws from its own generator seeded by (spec.seed, tensor name), so values
// do not depend on tensor order.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "gguf/writer.h"
#include "model/synth.h"

namespace preface::model {

uint64_t tensor_seed(uint64_t seed, const std::string& name);
// n values ~ mean + stddev * N(0, 1), from std::mt19937_64 through Box-Muller (the same on every toolchain).
std::vector<float> normals(uint64_t seed, size_t n, float mean, float stddev);

struct SynthTensors {
  gguf::Writer& w;
  const SynthSpec& spec;
  // {n_cols, n_rows} (n_mats > 1: a 3-D expert tensor of n_mats such matrices) ~ N(0, 1/n_cols), so that each
  // output sums n_cols unit-variance terms, in synth_tensor_type(spec, name).
  void matrix(const std::string& name, uint64_t n_cols, uint64_t n_rows, uint64_t n_mats = 1) const;
  void f32_matrix(const std::string& name, uint64_t n_cols, uint64_t n_rows) const;  // the same, in F32 (routers)
  void vec(const std::string& name, uint64_t n, float mean, float stddev) const;     // F32 ~ N(mean, stddev)
};

// qwen35: throws preface::Error for an inconsistent spec; writes the architecture's keys; writes every block.
void check_qwen35_spec(const SynthSpec& spec);
void set_qwen35_metadata(gguf::Writer& w, const SynthSpec& spec);
void write_qwen35_layers(const SynthTensors& t, int32_t ffn);

}  // namespace preface::model
