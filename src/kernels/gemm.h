// Row-range GEMM kernels behind matmul (internal to src/kernels).
//
// Every output y[t][r] is computed by exactly the arithmetic of the row dot of the same code path (dot.h) on
// row r and activation row t — the AVX2 dots are themselves 1 x 1 tiles of these kernels — so how rows and
// tokens are tiled, chunked over threads or batched never changes a bit.
#pragma once
#include <cstddef>
#include <cstdint>

#include "gguf/types.h"

namespace preface::kernels {

struct GemmArgs {
  gguf::TensorType type = gguf::TensorType::F32;
  const uint8_t* w = nullptr;  // [n_rows][w_row_bytes] weights of `type`
  size_t w_row_bytes = 0;
  // w's whole 16-row groups are packed (repack.h: Q4_0, Q8_0, the K-quants, IQ4_XS). Only kernels of a table
  // with row_group_layouts (dispatch.h) are given packed weights.
  bool row_groups = false;
  // Float weights: x is const float [n_tokens][n_cols]. Q8_0/Q4_0 weights: x is const BlockQ8_0
  // [n_tokens][n_cols / 32] (activations quantized by quantize_row_q8_0) and x_scales [n_tokens][n_cols / 32]
  // holds f32 of each block's d.
  const void* x = nullptr;
  const float* x_scales = nullptr;
  // Q8_0/Q4_0 only, optional: x_sums [n_tokens][n_cols / 32] holds the sum of each activation block's 32 int8
  // values, so that kernels forming a block's dot with biased unsigned weights need not recompute it per row.
  // nullptr: kernels that need the sums form them themselves (same results).
  const int32_t* x_sums = nullptr;
  // Q8_0/Q4_0, optional (used together with x_sums): x_pairs [n_tokens][n_cols] int8, the activations with each
  // pair of blocks k, k + 1 (k even, within whole groups of 4 blocks) stored as 32 values
  // [x_k 0..15 | x_k+1 0..15] then [x_k 16..31 | x_k+1 16..31]; other blocks unused. Same results either way.
  const int8_t* x_pairs = nullptr;
  // Types with a kernels/quant.h traits row: x is [n_tokens] activation rows of the row's ActFormat, each
  // x_row_bytes long (x_scales, x_sums and x_pairs unused).
  size_t x_row_bytes = 0;
  size_t n_cols = 0;
  int64_t n_rows = 0;
  int64_t n_tokens = 0;
  float* y = nullptr;  // y[t * y_stride + r]
  size_t y_stride = 0;
};

// Computes y[t][r] for every token t and row_begin <= r < row_end.
using GemmFn = void (*)(const GemmArgs&, int64_t row_begin, int64_t row_end);

namespace scalar {
void gemm(const GemmArgs& args, int64_t row_begin, int64_t row_end);
// The types of kernels/quant.h: each y[t][r] is that type's traits dot of row r and activation row t.
void gemm_traits(const GemmArgs& args, int64_t row_begin, int64_t row_end);
}  // namespace scalar

namespace avx2 {
void gemm(const GemmArgs& args, int64_t row_begin, int64_t row_end);
// The same results with AVX-VNNI integer dot products; only where vnni_available().
bool vnni_available();
void gemm_vnni(const GemmArgs& args, int64_t row_begin, int64_t row_end);
// The same results as scalar::gemm_traits: Q2_K, Q3_K, Q4_K, Q5_K, Q6_K and IQ4_XS in tiles of up to 8 rows x
// tokens (gemm_k_avx2.cpp), Q4_1, Q5_0, Q5_1, IQ4_NL and MXFP4 through gemm_q32.
void gemm_traits(const GemmArgs& args, int64_t row_begin, int64_t row_end);
// The same results as scalar::gemm_traits for Q4_1, Q5_0, Q5_1, IQ4_NL, MXFP4 in tiles of up to 8 rows x tokens
// (gemm_q32_avx2.h); other types through scalar::gemm_traits.
void gemm_q32(const GemmArgs& args, int64_t row_begin, int64_t row_end);
}  // namespace avx2

namespace avx512 {
// The same results for F32/F16/BF16 weights with AVX-512 (quantized types go to avx2::gemm); only where
// avx512::available() (attention.h).
void gemm_float(const GemmArgs& args, int64_t row_begin, int64_t row_end);
// The same results for Q8_0/Q4_0 weights; decode batches (1-2 tokens) with x_sums and x_pairs run 4-row AVX-512
// VNNI tiles (gemv_avx512.cpp), packed Q4_0 and Q8_0 (row_groups) with x_sums gemm_groups, the rest goes to
// gemm_vnni. Only where quant_available() (AVX-512 VNNI and VBMI).
bool quant_available();
void gemm_quant(const GemmArgs& args, int64_t row_begin, int64_t row_end);
// Packed (row_groups) Q8_0/Q4_0 weights with x_sums, whole 16-row groups [row_begin, row_end) (multiples of 16),
// any number of tokens: 16-row tiles, one group at a time over small decode batches and pairs of groups over
// 4-token slices above (gemm_groups_avx512.cpp). The same results. Only where quant_available().
void gemm_groups(const GemmArgs& args, int64_t row_begin, int64_t row_end);
// avx2::gemm_vnni's tiles with the EVEX encoding of vpdpbusd (AVX512-VNNI + VL), for CPUs without the VEX-encoded
// AVX-VNNI; the same results. Only where quant_available().
void gemm_vnni(const GemmArgs& args, int64_t row_begin, int64_t row_end);
// The same results as scalar::gemm_traits: Q2_K, Q3_K, Q4_K, Q5_K, Q6_K and IQ4_XS in gemm_k_avx2.cpp's tile
// shapes with 64-value steps (vpmaddubsw + vpdpwssd, gemm_k_avx512.cpp), Q4_1, Q5_0, Q5_1, IQ4_NL and MXFP4 through
// avx512::gemm_q32; packed matrices (row_groups) through gemm_k_groups, as repack.h's split_row_groups says.
// Only where quant_available().
void gemm_traits(const GemmArgs& args, int64_t row_begin, int64_t row_end);
// IQ4_XS batches of 12 tokens or more in token-lane tiles (gemm_iq4xs_lanes_avx512.cpp): the same results as
// scalar::gemm_traits; false (nothing computed) for other types and smaller batches. Only where quant_available().
bool gemm_iq4xs_lanes(const GemmArgs& args, int64_t row_begin, int64_t row_end);
// Packed (row_groups) K-quant (Q2_K ... Q6_K) and IQ4_XS weights, whole 16-row groups [row_begin, row_end)
// (multiples of 16), any number of tokens: lane r of each register is row r of a group
// (gemm_k_groups_avx512.cpp). The same results as scalar::gemm_traits. Only where quant_available().
void gemm_k_groups(const GemmArgs& args, int64_t row_begin, int64_t row_end);
// gemm_k_groups for Q2_K, Q3_K and Q6_K (gemm_k16_groups_avx512.cpp), which it calls for them.
void gemm_k16_groups(const GemmArgs& args, int64_t row_begin, int64_t row_end);
// avx2::gemm_q32's tiles with EVEX vpdpbusd; the same results. Only where quant_available().
void gemm_q32(const GemmArgs& args, int64_t row_begin, int64_t row_end);
}  // namespace avx512

namespace amx {
// The same results with AMX int8 tiles for Q8_0/Q4_0 weights and batches of >= 3 tokens (others go to
// avx512::gemm_quant); only where the CPU has AMX-INT8, avx512::quant_available() and tile data is enabled for
// the process (amx_available()).
bool amx_available();
void gemm(const GemmArgs& args, int64_t row_begin, int64_t row_end);
}  // namespace amx

}  // namespace preface::kernels
