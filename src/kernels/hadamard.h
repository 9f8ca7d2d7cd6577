// The Walsh-Hadamard rotation of K/V rows (llama.cpp's attention rotation for quantized KV caches): each block of
// `block` values (a power of two) is multiplied by the orthonormal Sylvester Hadamard matrix H / sqrt(block), which
// is its own inverse. Rotating a query and a key by the same blocks leaves their dot product unchanged in exact
// arithmetic while spreading outlier channels over the block, so a quantized row loses less.
//
// Arithmetic (the definition, one scalar path): in place, for len = 1, 2, 4, ..., block / 2, for each pair
// (j, j + len) of each 2 len-run in increasing j: (a, b) -> (a + b, a - b); then every value times
// f32(1 / sqrt(block)) (computed in double). A row's rotation depends on its values only.
#pragma once
#include <cstddef>
#include <cstdint>

namespace preface::kernels {

// Rotates x[0..n) (n % block == 0) block by block.
void hadamard_rotate(float* x, size_t n, size_t block);

// The block K rows of heads of head_dim values are rotated by: the largest power of two dividing head_dim (as
// llama.cpp's K rotation). V rows use kHadamardVBlock.
size_t hadamard_k_block(size_t head_dim);
inline constexpr size_t kHadamardVBlock = 64;

}  // namespace preface::kernels
