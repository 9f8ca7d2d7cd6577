// Runtime selection between the scalar and AVX2 kernels, and the dispatching entry points of dot.h.
#include "kernels/dispatch.h"

#include "kernels/delta_rule.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "util/fp16.h"

namespace preface::kernels {

namespace avx2 {
// Compiled without -mavx2 so that the check itself runs on any x86-64.
bool available() {
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
}
bool vnni_available() { return available() && __builtin_cpu_supports("avxvnni"); }
}  // namespace avx2

namespace avx512 {
bool available() {
  return avx2::available() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
}
bool quant_available() {
  return available() && __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512vbmi");
}
}  // namespace avx512

namespace amx {
// Also asks the kernel for permission to use AMX tile data (Linux >= 5.16; once per process, idempotent). The AMX
// kernels pass leftover rows to avx2::gemm_vnni, so AVX-VNNI is required too (every AMX CPU has it).
bool amx_available() {
  if (!avx512::quant_available() || !avx2::vnni_available() || !__builtin_cpu_supports("amx-tile") ||
      !__builtin_cpu_supports("amx-int8")) {
    return false;
  }
  constexpr long kArchReqXcompPerm = 0x1023;
  constexpr long kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
}
}  // namespace amx

namespace {

constexpr KernelTable kScalar = {
    scalar::quantize_row_q8_0, scalar::dot_f32,        scalar::dot_f16,         scalar::dot_bf16,
    scalar::dot_q8_0,          scalar::dot_q4_0,       scalar::axpy_f32,        scalar::axpy_f16,
    scalar::axpy_bf16,         scalar::f32_to_f16_row, scalar::f32_to_bf16_row, scalar::attention_tile,
    scalar::gemm,              scalar::gemm,           scalar::swiglu,          scalar::logit_stats,
    scalar::dot_q4_k,          scalar::dot_q5_k,       scalar::dot_q6_k,        scalar::dot_iq4_xs,
    scalar::geglu,             scalar::softcap,        scalar::gemm_traits,     scalar::quantize_row_q8_k,
};

constexpr KernelTable kAvx2 = {
    avx2::quantize_row_q8_0, avx2::dot_f32,        avx2::dot_f16,         avx2::dot_bf16,
    avx2::dot_q8_0,          avx2::dot_q4_0,       avx2::axpy_f32,        avx2::axpy_f16,
    avx2::axpy_bf16,         avx2::f32_to_f16_row, avx2::f32_to_bf16_row, avx2::attention_tile,
    avx2::gemm,              avx2::gemm,           avx2::swiglu,          avx2::logit_stats,
    avx2::dot_q4_k,          avx2::dot_q5_k,       avx2::dot_q6_k,        avx2::dot_iq4_xs,
    avx2::geglu,             avx2::softcap,        avx2::gemm_traits,     avx2::quantize_row_q8_k,
};

// PREFACE_KERNELS=scalar forces the scalar kernels (to cross-check a whole model run against the reference);
// PREFACE_KERNELS=avx2 the AVX2 ones without AVX-VNNI, AVX-512 or AMX; PREFACE_KERNELS=vnni adds AVX-VNNI only;
// PREFACE_KERNELS=avx512 everything but AMX (Q4_0 and Q8_0 still packed at load, read by the AVX-512 VNNI kernels).
// The wider paths replace a kernel only with one that gives the same bits (see gemm_vnni_avx2.cpp,
// gemm_vnni_avx512.cpp, gemm_k_avx512.cpp, gemm_amx.cpp, gemm_avx512.cpp, attention_avx512.cpp,
// attention_decode_avx512.cpp), so this choice changes speed, never results.
KernelTable choose_table() {
  const char* forced = std::getenv("PREFACE_KERNELS");
  const auto is = [forced](const char* name) { return forced != nullptr && std::strcmp(forced, name) == 0; };
  if (is("scalar") || !avx2::available()) {
    KernelTable t = kScalar;
    t.delta_rule = scalar::delta_rule;
    return t;
  }
  KernelTable t = kAvx2;
  t.delta_rule = avx2::delta_rule;
  if (is("avx2")) return t;
  if (avx2::vnni_available()) t.gemm_quant = avx2::gemm_vnni;
  if (is("vnni")) return t;
  if (avx512::available()) {
    t.quantize_row_q8_0 = avx512::quantize_row_q8_0;
    t.attention_tile = avx512::attention_tile;
    t.attention_tiles = avx512::attention_tiles_shared;
    t.gemm_float = avx512::gemm_float;
    t.delta_rule = avx512::delta_rule;
    if (avx512::quant_available()) {
      t.gemm_quant = avx512::gemm_quant;
      t.gemm_traits = avx512::gemm_traits;
      t.row_group_layouts = true;
    }
  }
  if (is("avx512")) return t;
  if (amx::amx_available()) {
    t.gemm_quant = amx::gemm;
    t.row_group_layouts = true;
  }
  return t;
}

}  // namespace

const KernelTable& kernel_table() {
  static const KernelTable table = choose_table();
  return table;
}

void quantize_row_q8_0(const float* x, BlockQ8_0* out, size_t n) { kernel_table().quantize_row_q8_0(x, out, n); }
float dot_f32(const float* w, const float* x, size_t n) { return kernel_table().dot_f32(w, x, n); }
float dot_f16(const uint16_t* w, const float* x, size_t n) { return kernel_table().dot_f16(w, x, n); }
float dot_bf16(const uint16_t* w, const float* x, size_t n) { return kernel_table().dot_bf16(w, x, n); }
float dot_q8_0(const BlockQ8_0* w, const BlockQ8_0* x, size_t n) { return kernel_table().dot_q8_0(w, x, n); }
float dot_q4_0(const BlockQ4_0* w, const BlockQ8_0* x, size_t n) { return kernel_table().dot_q4_0(w, x, n); }
void axpy_f32(float a, const float* v, float* y, size_t n) { kernel_table().axpy_f32(a, v, y, n); }
void axpy_f16(float a, const uint16_t* v, float* y, size_t n) { kernel_table().axpy_f16(a, v, y, n); }
void axpy_bf16(float a, const uint16_t* v, float* y, size_t n) { kernel_table().axpy_bf16(a, v, y, n); }
void f32_to_f16_row(const float* x, uint16_t* out, size_t n) { kernel_table().f32_to_f16_row(x, out, n); }
void f32_to_bf16_row(const float* x, uint16_t* out, size_t n) { kernel_table().f32_to_bf16_row(x, out, n); }
void attention_tile(const AttnTile& tile, float* scratch) { kernel_table().attention_tile(tile, scratch); }
void attention_tiles(const AttnTile* tiles, size_t n_tiles, float* scratch, size_t scratch_stride) {
  const KernelTable& k = kernel_table();
  if (k.attention_tiles != nullptr && k.attention_tiles(tiles, n_tiles, scratch, scratch_stride)) return;
  for (size_t i = 0; i < n_tiles; ++i) k.attention_tile(tiles[i], scratch + i * scratch_stride);
}

void dequantize_row_q8_0(const BlockQ8_0* x, float* out, size_t n) {
  for (size_t b = 0; b < n / kQuantBlock; ++b) {
    const float d = f16_to_f32(x[b].d);
    for (size_t j = 0; j < kQuantBlock; ++j) out[b * kQuantBlock + j] = d * static_cast<float>(x[b].qs[j]);
  }
}

void dequantize_row_q4_0(const BlockQ4_0* x, float* out, size_t n) {
  constexpr size_t kHalf = kQuantBlock / 2;
  for (size_t b = 0; b < n / kQuantBlock; ++b) {
    const float d = f16_to_f32(x[b].d);
    float* ob = out + b * kQuantBlock;  // [32]
    for (size_t j = 0; j < kHalf; ++j) {
      ob[j] = d * static_cast<float>((x[b].qs[j] & 0x0f) - 8);
      ob[j + kHalf] = d * static_cast<float>((x[b].qs[j] >> 4) - 8);
    }
  }
}

}  // namespace preface::kernels
