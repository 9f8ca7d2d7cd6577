// Q4_0 row groups: Q4_0 weights rearranged once, at load, into the order the AMX-table kernels read them (and,
// at the end, the Q8_0 group scales those kernels read beside GGUF-layout Q8_0 weights).
//
// In GGUF layout a Q4_0 row is n_blocks blocks {f16 d; uint8 qs[16]} (18 bytes), rows one after another, so a
// kernel working on 16 rows at once reads 16 scattered 18-byte pieces per block and gathers 16 scales. Packed, a
// group of 16 consecutive rows (rows 16 g .. 16 g + 15) keeps exactly the bytes its rows had (16 x row_bytes at
// offset 16 g x row_bytes), rearranged as n_blocks units of kRowGroupUnitBytes, unit b holding block b of all
// 16 rows:
//   bytes   0..31   16 x f16 d, row order
//   bytes  32..287  for k = 0..3, for row r = 0..15: qs_r[4k .. 4k + 3] (4 bytes)
// where qs_r is row r's GGUF qs (byte j: value j + 8 in the low nibble, value j + 16 + 8 in the high one). So a
// 64-byte load at 32 + 64 k holds, in 32-bit lane r, values 4k..4k+3 (low nibbles) and 16+4k..16+4k+3 (high
// nibbles) of row r: the VNNI order in which one vpdpbusd against a broadcast 4-byte piece of the activations
// adds 4 products to each of the 16 rows' sums, with no horizontal reduction. Rows past the last whole group
// keep GGUF layout at their GGUF offsets: row r of any matrix starts at byte r x row_bytes either way, and only
// the inside of whole groups differs. Values, and so every result, are the same in both layouts.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/gemm.h"
#include "kernels/matmul.h"

namespace preface::kernels {

inline constexpr int64_t kRowGroupRows = 16;
inline constexpr size_t kRowGroupUnitBytes = 2 * kRowGroupRows + kRowGroupRows * gguf::kQuantBlock / 2;  // 288

// True when the dispatched kernels read Q4_0 matrices of at least one whole group faster packed (the AMX table);
// only then does matmul accept a packed matrix.
bool row_groups_preferred(const Matrix& w);

// w packed into storage (resized to w's bytes); returns the packed matrix, which points into storage.
// w must be Q4_0 in GGUF layout.
Matrix pack_row_groups(const Matrix& w, std::vector<uint8_t>& storage);

// GGUF rows of group g of a packed matrix (n_blocks blocks per row) into out: [16][row_bytes].
void unpack_row_group(const uint8_t* group, size_t n_blocks, uint8_t* out);

// Row `row` of a packed Q4_0 matrix as its GGUF bytes (row_bytes) into out.
void unpack_row(const Matrix& w, int64_t row, uint8_t* out);

// Q8_0 group scales: for each whole group of 16 rows and each block b, the 16 rows' f16 d, at
// [(g * n_blocks + b) * 16 + i] (i = row within the group); rows past the last whole group have none. The AMX
// kernels load a block's 16 scales from here in one instruction instead of gathering them from 16 rows. A side
// table (1/17 of the weights' bytes): the weights stay in GGUF layout.
bool group_scales_preferred(const Matrix& w);  // the AMX table, Q8_0, at least one whole group
std::vector<uint16_t> q8_0_group_scales(const Matrix& w);

// What prepare_matrix adds to a matrix; the prepared matrix points into it.
struct MatrixExtras {
  std::vector<uint8_t> packed;         // packed Q4_0 (pack_row_groups)
  std::vector<uint16_t> group_scales;  // Q8_0 group scales
};

// w as the dispatched kernels read it fastest: Q4_0 packed into row groups, Q8_0 with its group scales, or w
// itself (unchanged where the kernels prefer neither). Done once per matrix, at load.
Matrix prepare_matrix(const Matrix& w, MatrixExtras& extras);

// Runs rows [row_begin, row_end) of a packed matrix (args.row_groups): `packed` for the whole groups inside the
// range (row_begin, row_end multiples of 16 when it is called) and, for the rows of partial groups, `gguf_gemm`
// on their GGUF bytes (rows past the last whole group in place; rows inside a group unpacked to a buffer first).
// packed == nullptr: every row goes the second way.
void split_row_groups(const GemmArgs& args, int64_t row_begin, int64_t row_end, GemmFn packed, GemmFn gguf_gemm);

}  // namespace preface::kernels
