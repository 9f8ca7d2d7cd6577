#include "kernels/repack.h"

#include <algorithm>
#include <cstring>

#include "kernels/dispatch.h"
#include "util/error.h"

namespace preface::kernels {

namespace {

bool packable(gguf::TensorType type) { return type == gguf::TensorType::Q4_0 || type == gguf::TensorType::Q8_0; }

// fn(gguf_at, unit_at, n_bytes) for the pieces of row r's block {d; qs}: d (2 bytes, at 2 r in the unit) and
// qs[4k..4k+3] (at 32 + 64 k + 4 r), with their offsets in the GGUF block and in the unit (repack.h).
template <typename Fn>
void for_block_pieces(gguf::TensorType type, size_t r, Fn fn) {
  const size_t qs_bytes = (row_group_unit_bytes(type) - 2 * kRowGroupRows) / kRowGroupRows;
  fn(0, 2 * r, 2);
  for (size_t k = 0; k < qs_bytes / 4; ++k) fn(2 + 4 * k, 2 * kRowGroupRows + 64 * k + 4 * r, 4);
}

// Row r of a packed group as its GGUF bytes (n_blocks blocks) into out.
void unpack_group_row(gguf::TensorType type, const uint8_t* group, size_t n_blocks, size_t r, uint8_t* out) {
  const size_t block_bytes = gguf::row_bytes(type, gguf::kQuantBlock), unit_bytes = row_group_unit_bytes(type);
  for (size_t b = 0; b < n_blocks; ++b) {
    uint8_t* block = out + b * block_bytes;
    const uint8_t* unit = group + b * unit_bytes;
    for_block_pieces(type, r, [&](size_t at, size_t unit_at, size_t n) { std::memcpy(block + at, unit + unit_at, n); });
  }
}

}  // namespace

bool row_groups_preferred(const Matrix& w) {
  return kernel_table().row_group_layouts && packable(w.type) && !w.row_groups && w.n_rows >= kRowGroupRows;
}

Matrix pack_row_groups(const Matrix& w, std::vector<uint8_t>& storage) {
  if (!packable(w.type) || w.row_groups) throw Error("pack_row_groups: not a GGUF-layout Q4_0 or Q8_0 matrix");
  const size_t n_cols = static_cast<size_t>(w.n_cols);
  const size_t row_bytes = gguf::row_bytes(w.type, n_cols);
  const size_t block_bytes = gguf::row_bytes(w.type, gguf::kQuantBlock), unit_bytes = row_group_unit_bytes(w.type);
  const size_t n_blocks = n_cols / gguf::kQuantBlock;
  storage.resize(row_bytes * static_cast<size_t>(w.n_rows));
  const size_t n_groups = static_cast<size_t>(w.n_rows / kRowGroupRows);
  const size_t group_bytes = kRowGroupRows * row_bytes;
  for (size_t g = 0; g < n_groups; ++g) {
    const uint8_t* src = w.data + g * group_bytes;
    uint8_t* dst = storage.data() + g * group_bytes;
    for (size_t r = 0; r < kRowGroupRows; ++r) {
      for (size_t b = 0; b < n_blocks; ++b) {
        const uint8_t* block = src + r * row_bytes + b * block_bytes;
        uint8_t* unit = dst + b * unit_bytes;
        for_block_pieces(w.type, r,
                         [&](size_t at, size_t unit_at, size_t n) { std::memcpy(unit + unit_at, block + at, n); });
      }
    }
  }
  const size_t packed_bytes = n_groups * group_bytes;
  std::memcpy(storage.data() + packed_bytes, w.data + packed_bytes, storage.size() - packed_bytes);  // tail rows
  Matrix packed = w;
  packed.data = storage.data();
  packed.row_groups = true;
  return packed;
}

void unpack_row_group(gguf::TensorType type, const uint8_t* group, size_t n_blocks, uint8_t* out) {
  const size_t row_bytes = n_blocks * gguf::row_bytes(type, gguf::kQuantBlock);
  for (size_t r = 0; r < kRowGroupRows; ++r) unpack_group_row(type, group, n_blocks, r, out + r * row_bytes);
}

void unpack_row(const Matrix& w, int64_t row, uint8_t* out) {
  const size_t n_blocks = static_cast<size_t>(w.n_cols) / gguf::kQuantBlock;
  const size_t row_bytes = gguf::row_bytes(w.type, static_cast<size_t>(w.n_cols));
  const int64_t packed_rows = w.n_rows / kRowGroupRows * kRowGroupRows;
  if (!w.row_groups || row >= packed_rows) {
    std::memcpy(out, w.data + static_cast<size_t>(row) * row_bytes, row_bytes);
    return;
  }
  const size_t r = static_cast<size_t>(row % kRowGroupRows);
  unpack_group_row(w.type, w.data + static_cast<size_t>(row - static_cast<int64_t>(r)) * row_bytes, n_blocks, r,
                   out);
}

Matrix prepare_matrix(const Matrix& w, std::vector<uint8_t>& storage) {
  return row_groups_preferred(w) ? pack_row_groups(w, storage) : w;
}

void split_row_groups(const GemmArgs& args, int64_t row_begin, int64_t row_end, GemmFn packed, GemmFn gguf_gemm) {
  const int64_t packed_rows = args.n_rows / kRowGroupRows * kRowGroupRows;
  const int64_t whole_begin = std::min((row_begin + kRowGroupRows - 1) / kRowGroupRows * kRowGroupRows, row_end);
  const int64_t whole_end = std::max(whole_begin, std::min(row_end / kRowGroupRows * kRowGroupRows, packed_rows));
  GemmArgs gguf_args = args;
  gguf_args.row_groups = false;
  // Rows [begin, end) outside whole groups of the range: unpacked group by group, or in place past the groups.
  const auto partial = [&](int64_t begin, int64_t end) {
    if (begin >= end) return;
    std::vector<uint8_t> rows;  // [16][row_bytes]: an unpacked group (only ranges not aligned to groups)
    for (int64_t r = begin; r < end;) {
      if (r >= packed_rows) {
        gguf_gemm(gguf_args, r, end);
        return;
      }
      const int64_t g0 = r / kRowGroupRows * kRowGroupRows;
      const int64_t stop = std::min(end, g0 + kRowGroupRows);
      rows.resize(kRowGroupRows * args.w_row_bytes);
      unpack_row_group(args.type, args.w + static_cast<size_t>(g0) * args.w_row_bytes,
                       args.n_cols / gguf::kQuantBlock, rows.data());
      GemmArgs group = gguf_args;
      group.w = rows.data();
      group.n_rows = kRowGroupRows;
      group.y = args.y + g0;
      gguf_gemm(group, r - g0, stop - g0);
      r = stop;
    }
  };
  if (packed == nullptr) {
    partial(row_begin, row_end);
    return;
  }
  partial(row_begin, whole_begin);
  if (whole_begin < whole_end) packed(args, whole_begin, whole_end);
  partial(whole_end, row_end);
}

}  // namespace preface::kernels
