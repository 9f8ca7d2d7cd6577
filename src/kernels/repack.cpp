#include "kernels/repack.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <type_traits>

#include "kernels/dispatch.h"
#include "util/error.h"

namespace preface::kernels {

namespace {

using gguf::TensorType;

size_t block_bytes(TensorType type) { return gguf::row_bytes(type, gguf::type_block_values(type)); }

// Where a block's bytes go in its unit (repack.h): an optional 2-byte head (Q4_0/Q8_0's d, at 2 r), n4 4-byte
// pieces (piece k of row r at base4 + 64 k + 4 r, from block byte off4 + 4 k), an optional 2-byte tail (Q6_K's d,
// at base4 + 64 n4 + 2 r).
struct Layout {
  bool head = false, tail = false;
  size_t n4 = 0, off4 = 0, base4 = 0, block_bytes = 0;
};

Layout layout(TensorType type) {
  Layout l;
  l.block_bytes = block_bytes(type);
  l.head = type == TensorType::Q4_0 || type == TensorType::Q8_0;
  l.off4 = l.head ? 2 : 0;
  l.base4 = l.head ? 2 * kRowGroupRows : 0;
  l.n4 = (l.block_bytes - l.off4) / 4;
  l.tail = (l.block_bytes - l.off4) % 4 != 0;
  return l;
}

// fn(gguf_at, unit_at, n_bytes) for the pieces of row r's block, with their offsets in the GGUF block and in the
// unit; n_bytes is a std::integral_constant, so the copies fn makes have a size known at compile time.
template <typename Fn>
inline void for_block_pieces(const Layout& l, size_t r, Fn fn) {
  using Two = std::integral_constant<size_t, 2>;
  using Four = std::integral_constant<size_t, 4>;
  if (l.head) fn(size_t{0}, 2 * r, Two{});
  for (size_t k = 0; k < l.n4; ++k) fn(l.off4 + 4 * k, l.base4 + 64 * k + 4 * r, Four{});
  if (l.tail) fn(l.off4 + 4 * l.n4, l.base4 + 64 * l.n4 + 2 * r, Two{});
}

// Row r of a packed group as its GGUF bytes (n_blocks blocks) into out.
void unpack_group_row(TensorType type, const uint8_t* group, size_t n_blocks, size_t r, uint8_t* out) {
  const Layout l = layout(type);
  const size_t unit_bytes = kRowGroupRows * l.block_bytes;
  for (size_t b = 0; b < n_blocks; ++b) {
    uint8_t* block = out + b * l.block_bytes;
    const uint8_t* unit = group + b * unit_bytes;
    for_block_pieces(l, r, [&](size_t at, size_t unit_at, auto n) { std::memcpy(block + at, unit + unit_at, n); });
  }
}

}  // namespace

bool row_group_type(TensorType type) {
  switch (type) {
    case TensorType::Q4_0:
    case TensorType::Q8_0:
    case TensorType::Q2_K:
    case TensorType::Q3_K:
    case TensorType::Q4_K:
    case TensorType::Q5_K:
    case TensorType::Q6_K:
    case TensorType::IQ4_XS:
      return true;
    default:
      return false;
  }
}

size_t row_group_unit_bytes(TensorType type) { return kRowGroupRows * block_bytes(type); }

bool row_groups_preferred(const Matrix& w) {
  return kernel_table().row_group_layouts && row_group_type(w.type) && !w.row_groups && w.n_rows >= kRowGroupRows;
}

Matrix pack_row_groups(const Matrix& w, std::vector<uint8_t>& storage) {
  if (!row_group_type(w.type) || w.row_groups) {
    throw Error("pack_row_groups: a GGUF-layout matrix of " + std::string(gguf::tensor_type_name(w.type)) +
                " has no row-group layout");
  }
  const size_t n_cols = static_cast<size_t>(w.n_cols);
  const size_t row_bytes = gguf::row_bytes(w.type, n_cols);
  const Layout l = layout(w.type);
  const size_t block_bytes = l.block_bytes, unit_bytes = kRowGroupRows * block_bytes;
  const size_t n_blocks = n_cols / gguf::type_block_values(w.type);
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
        for_block_pieces(l, r, [&](size_t at, size_t unit_at, auto n) { std::memcpy(unit + unit_at, block + at, n); });
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

void unpack_row_group(TensorType type, const uint8_t* group, size_t n_blocks, uint8_t* out) {
  const size_t row_bytes = n_blocks * block_bytes(type);
  for (size_t r = 0; r < kRowGroupRows; ++r) unpack_group_row(type, group, n_blocks, r, out + r * row_bytes);
}

void unpack_row(const Matrix& w, int64_t row, uint8_t* out) {
  const size_t n_blocks = static_cast<size_t>(w.n_cols) / gguf::type_block_values(w.type);
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
                       args.n_cols / gguf::type_block_values(args.type), rows.data());
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
