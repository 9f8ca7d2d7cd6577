// The kernel table chosen once per process (AVX2 when the CPU has it, else scalar). Internal to src/kernels:
// hot loops fetch the table once and call through its pointers instead of the dispatching wrappers.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/attention.h"
#include "kernels/dot.h"
#include "kernels/gemm.h"
#include "kernels/ops.h"
#include "kernels/quant.h"

namespace preface::kernels {

struct KernelTable {
  void (*quantize_row_q8_0)(const float*, BlockQ8_0*, size_t);
  float (*dot_f32)(const float*, const float*, size_t);
  float (*dot_f16)(const uint16_t*, const float*, size_t);
  float (*dot_bf16)(const uint16_t*, const float*, size_t);
  float (*dot_q8_0)(const BlockQ8_0*, const BlockQ8_0*, size_t);
  float (*dot_q4_0)(const BlockQ4_0*, const BlockQ8_0*, size_t);
  void (*axpy_f32)(float, const float*, float*, size_t);
  void (*axpy_f16)(float, const uint16_t*, float*, size_t);
  void (*axpy_bf16)(float, const uint16_t*, float*, size_t);
  void (*f32_to_f16_row)(const float*, uint16_t*, size_t);
  void (*f32_to_bf16_row)(const float*, uint16_t*, size_t);
  void (*attention_tile)(const AttnTile&, float*);
  GemmFn gemm_quant;  // Q8_0 / Q4_0 weights
  GemmFn gemm_float;  // F32 / F16 / BF16 weights
  void (*swiglu)(float*, const float*, size_t);
  LogitStats (*logit_stats)(const float*, size_t);
  float (*dot_q4_k)(const BlockQ4_K*, const BlockQ8_K*, size_t);  // reached through quant_traits
  float (*dot_q5_k)(const BlockQ5_K*, const BlockQ8_K*, size_t);
  float (*dot_q6_k)(const BlockQ6_K*, const BlockQ8_K*, size_t);
  float (*dot_iq4_xs)(const BlockIQ4_XS*, const BlockQ8_K*, size_t);
  void (*geglu)(float*, const float*, size_t);  // every path the same bits (ops.h)
  void (*softcap)(float*, size_t, float);
  GemmFn gemm_traits;  // the types of quant.h (Q4_1 ... IQ4_XS): each output the bits of its traits dot
  void (*quantize_row_q8_k)(const float*, BlockQ8_K*, size_t);
  // gemm_quant reads Q4_0 and Q8_0, gemm_traits the K-quants and IQ4_XS packed into row groups (repack.h) fast:
  // matmul accepts packed matrices.
  bool row_group_layouts = false;
  // Runs qualifying tiles together (avx512::attention_tiles_shared), or returns false; null: one at a time.
  bool (*attention_tiles)(const AttnTile*, size_t, float*, size_t) = nullptr;
  // kernels/delta_rule.h: every path the same bits.
  void (*delta_rule)(float*, const float*, const float*, const float*, float, float, float*, float*, size_t) = nullptr;
};

// Constant after its first (thread-safe) initialisation.
const KernelTable& kernel_table();

}  // namespace preface::kernels
