// Row groups: weights rearranged once, at load, into the order the AVX-512 VNNI and AMX kernels read them
// (Q4_0 and Q8_0: gemm_groups_avx512.cpp, gemm_amx.cpp; the K-quants and IQ4_XS: gemm_k_groups_avx512.cpp,
// gemm_k16_groups_avx512.cpp).
//
// In GGUF layout a row is n_blocks blocks, rows one after another, so a kernel working on 16 rows at once reads 16
// scattered pieces per block. Packed, a group of 16 consecutive rows (rows 16 g .. 16 g + 15) keeps exactly the
// bytes its rows had (16 x row_bytes at offset 16 g x row_bytes), rearranged as n_blocks units of
// row_group_unit_bytes(type) = 16 x block bytes, unit b holding block b of all 16 rows.
//
// Q4_0 ({f16 d; uint8 qs[16]}, 18 bytes) and Q8_0 ({f16 d; int8 qs[32]}, 34 bytes):
//   bytes  0..31              16 x f16 d, row order
//   bytes 32..32 + 16 x |qs|  for k = 0 .. |qs| / 4 - 1, for row r = 0..15: qs_r[4k .. 4k + 3] (4 bytes)
// where qs_r is row r's GGUF qs. So a 64-byte load at 32 + 64 k holds, in 32-bit lane r, row r's qs bytes
// 4k..4k+3 — Q8_0: values 4k..4k+3; Q4_0 (byte j: value j + 8 in the low nibble, value j + 16 + 8 in the high
// one): values 4k..4k+3 and 16+4k..16+4k+3 — the VNNI order in which one vpdpbusd against a broadcast 4-byte
// piece of the activations adds 4 products to each of the 16 rows' sums, with no horizontal reduction.
//
// Q2_K (84 bytes), Q3_K (110), Q4_K (144), Q5_K (176), Q6_K (210) and IQ4_XS (136), super-blocks of 256 values:
// the block's bytes in 4-byte pieces, in GGUF order: piece k of row r at 64 k + 4 r (so a 64-byte load at 64 k
// holds piece k of the 16 rows in its 32-bit lanes); Q3_K's and Q6_K's last 2 bytes (f16 d) as 16 x f16 in row
// order after the pieces (Q6_K: unit bytes 3328..3359 after 52 pieces).
//
// Rows past the last whole group keep GGUF layout at their GGUF offsets: row r of any matrix starts at byte
// r x row_bytes either way, and only the inside of whole groups differs. Values, and so every result, are the same
// in both layouts.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/gemm.h"
#include "kernels/matmul.h"

namespace preface::kernels {

inline constexpr int64_t kRowGroupRows = 16;
inline constexpr size_t kQ4_0UnitBytes = 2 * kRowGroupRows + kRowGroupRows * gguf::kQuantBlock / 2;  // 288
inline constexpr size_t kQ8_0UnitBytes = 2 * kRowGroupRows + kRowGroupRows * gguf::kQuantBlock;      // 544

// True for the types with a packed layout: Q4_0, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS.
bool row_group_type(gguf::TensorType type);

// Bytes of one unit of a packed matrix of `type` (a row_group_type): 16 x its block bytes.
size_t row_group_unit_bytes(gguf::TensorType type);

// True when the dispatched kernels read w (a row_group_type with at least one whole group) faster packed (AVX-512
// VNNI, with or without AMX); only then does matmul accept a packed matrix.
bool row_groups_preferred(const Matrix& w);

// w packed into storage (resized to w's bytes); returns the packed matrix, which points into storage.
// w must be of a row_group_type, in GGUF layout.
Matrix pack_row_groups(const Matrix& w, std::vector<uint8_t>& storage);

// GGUF rows of group g of a packed matrix of `type` (n_blocks blocks per row) into out: [16][row_bytes].
void unpack_row_group(gguf::TensorType type, const uint8_t* group, size_t n_blocks, uint8_t* out);

// Row `row` of a packed matrix as its GGUF bytes (row_bytes) into out.
void unpack_row(const Matrix& w, int64_t row, uint8_t* out);

// w as the dispatched kernels read it fastest: packed into `storage` where row_groups_preferred, else w itself.
// Done once per matrix, at load.
Matrix prepare_matrix(const Matrix& w, std::vector<uint8_t>& storage);

// Runs rows [row_begin, row_end) of a packed matrix (args.row_groups): `packed` for the whole groups inside the
// range (row_begin, row_end multiples of 16 when it is called) and, for the rows of partial groups, `gguf_gemm`
// on their GGUF bytes (rows past the last whole group in place; rows inside a group unpacked to a buffer first).
// packed == nullptr: every row goes the second way.
void split_row_groups(const GemmArgs& args, int64_t row_begin, int64_t row_end, GemmFn packed, GemmFn gguf_gemm);

}  // namespace preface::kernels
