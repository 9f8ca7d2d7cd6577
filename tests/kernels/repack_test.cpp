// Row groups (Q4_0, Q8_0, the K-quants, IQ4_XS): packing keeps every row's bytes recoverable, rows past the
// last whole group untouched, the documented unit layout, and matmul / matmul_multi / get_row on a packed matrix
// give the GGUF matrix's bits for any batch and thread count.
#include "kernels/repack.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "kernels/dispatch.h"
#include "kernels/kernel_test_util.h"
#include "kernels/matmul.h"
#include "util/error.h"

namespace preface::kernels {
namespace {

using gguf::TensorType;

constexpr TensorType kPackable[] = {TensorType::Q4_0, TensorType::Q8_0, TensorType::Q2_K, TensorType::Q3_K,
                                     TensorType::Q4_K, TensorType::Q5_K, TensorType::Q6_K, TensorType::IQ4_XS};

template <typename Block>
void fill_random(std::vector<uint8_t>& bytes, uint32_t seed) {
  std::mt19937 rng(seed);
  const auto blocks = test::random_blocks<Block>(bytes.size() / sizeof(Block), rng);
  std::memcpy(bytes.data(), blocks.data(), bytes.size());
}

// Random weights of a packable type in GGUF layout, n_blocks blocks (32 values, or 256 for the super-block types)
// per row (Q8_0: values in [-128, 127]).
struct QMatrix {
  QMatrix(TensorType type, int64_t n_rows, int64_t n_blocks, uint32_t seed) {
    const int64_t n_cols = n_blocks * static_cast<int64_t>(gguf::type_block_values(type));
    const size_t n = static_cast<size_t>(n_rows * n_cols);
    bytes.resize(gguf::row_bytes(type, n));
    if (type == TensorType::Q4_0) {
      const auto blocks = test::random_q4_0(n, seed);
      std::memcpy(bytes.data(), blocks.data(), bytes.size());
    } else if (type == TensorType::Q8_0) {
      const auto blocks = test::random_q8_0(n, seed);
      std::memcpy(bytes.data(), blocks.data(), bytes.size());
    } else if (type == TensorType::Q2_K) {
      fill_random<BlockQ2_K>(bytes, seed);
    } else if (type == TensorType::Q3_K) {
      fill_random<BlockQ3_K>(bytes, seed);
    } else if (type == TensorType::Q4_K) {
      fill_random<BlockQ4_K>(bytes, seed);
    } else if (type == TensorType::Q5_K) {
      fill_random<BlockQ5_K>(bytes, seed);
    } else if (type == TensorType::Q6_K) {
      fill_random<BlockQ6_K>(bytes, seed);
    } else {
      fill_random<BlockIQ4_XS>(bytes, seed);
    }
    m = Matrix{type, bytes.data(), n_rows, n_cols};
  }
  size_t row_bytes() const { return gguf::row_bytes(m.type, static_cast<size_t>(m.n_cols)); }
  std::vector<uint8_t> bytes;  // [n_rows][row_bytes]
  Matrix m;
};

TEST(Repack, EveryRowUnpacksToItsGgufBytes) {
  for (int64_t n_rows : {16, 35, 48}) {
    for (int64_t n_blocks : {1, 5, 24}) {
      for (TensorType type : kPackable) {
        SCOPED_TRACE(gguf::tensor_type_name(type));
        const QMatrix w(type, n_rows, n_blocks, static_cast<uint32_t>(n_rows + n_blocks));
        std::vector<uint8_t> storage;
        const Matrix packed = pack_row_groups(w.m, storage);
        ASSERT_TRUE(packed.row_groups);
        ASSERT_EQ(storage.size(), w.bytes.size());
        EXPECT_NE(storage, w.bytes) << "whole groups are rearranged";
        const size_t rb = w.row_bytes();
        const size_t packed_rows = static_cast<size_t>(n_rows / kRowGroupRows * kRowGroupRows);
        // Rows past the last whole group keep their GGUF bytes in place.
        EXPECT_EQ(std::memcmp(storage.data() + packed_rows * rb, w.bytes.data() + packed_rows * rb,
                              storage.size() - packed_rows * rb),
                  0);
        std::vector<uint8_t> row(rb);
        for (int64_t r = 0; r < n_rows; ++r) {
          unpack_row(packed, r, row.data());
          ASSERT_EQ(std::memcmp(row.data(), w.bytes.data() + static_cast<size_t>(r) * rb, rb), 0) << "row " << r;
        }
        std::vector<uint8_t> group(kRowGroupRows * rb);
        for (size_t g = 0; g < packed_rows / kRowGroupRows; ++g) {
          unpack_row_group(type, storage.data() + g * group.size(), static_cast<size_t>(n_blocks), group.data());
          ASSERT_EQ(std::memcmp(group.data(), w.bytes.data() + g * group.size(), group.size()), 0) << "group " << g;
        }
      }
    }
  }
}

TEST(Repack, UnitLayoutIsDocumented) {
  EXPECT_EQ(kQ4_0UnitBytes, 16 * sizeof(gguf::BlockQ4_0));
  EXPECT_EQ(kQ8_0UnitBytes, 16 * sizeof(gguf::BlockQ8_0));
  for (TensorType type : kPackable) {
    SCOPED_TRACE(gguf::tensor_type_name(type));
    const QMatrix w(type, 16, 2, 7);
    std::vector<uint8_t> storage;
    pack_row_groups(w.m, storage);
    const size_t block_bytes = w.row_bytes() / 2;
    ASSERT_EQ(row_group_unit_bytes(type), 16 * block_bytes);
    const uint8_t* block = w.bytes.data() + 5 * w.row_bytes() + block_bytes;  // row 5's block 1
    const uint8_t* unit = storage.data() + row_group_unit_bytes(type);
    if (type == TensorType::Q4_0 || type == TensorType::Q8_0) {
      // d at unit bytes 10, 11; qs[j] at 32 + 64 (j / 4) + 4 x 5 + j % 4.
      EXPECT_EQ(unit[10], block[0]);
      EXPECT_EQ(unit[11], block[1]);
      for (size_t j = 0; j + 2 < block_bytes; ++j) EXPECT_EQ(unit[32 + 64 * (j / 4) + 20 + j % 4], block[2 + j]) << j;
      continue;
    }
    // Byte j of the block at 64 (j / 4) + 4 x 5 + j % 4; Q3_K's and Q6_K's last two at 64 x n4 + 2 x 5.
    const size_t n4 = block_bytes / 4;
    for (size_t j = 0; j < 4 * n4; ++j) EXPECT_EQ(unit[64 * (j / 4) + 20 + j % 4], block[j]) << j;
    if (type == TensorType::Q3_K || type == TensorType::Q6_K) {
      ASSERT_EQ(n4, type == TensorType::Q3_K ? 27u : 52u);
      EXPECT_EQ(unit[64 * n4 + 10], block[4 * n4]);
      EXPECT_EQ(unit[64 * n4 + 11], block[4 * n4 + 1]);
    }
  }
}

TEST(Repack, RejectsWhatItCannotPack) {
  const QMatrix w(TensorType::Q4_0, 16, 1, 1);
  std::vector<uint8_t> storage;
  const Matrix packed = pack_row_groups(w.m, storage);
  std::vector<uint8_t> again;
  EXPECT_THROW(pack_row_groups(packed, again), Error);
  std::vector<uint8_t> f32(16 * 32 * 4);
  EXPECT_THROW(pack_row_groups(Matrix{TensorType::F32, f32.data(), 16, 32}, again), Error);
  EXPECT_FALSE(row_groups_preferred(packed));
  EXPECT_FALSE(row_groups_preferred(Matrix{TensorType::F32, f32.data(), 16, 32}));
  for (TensorType type : kPackable) {
    EXPECT_FALSE(row_groups_preferred(QMatrix(type, 15, 1, 2).m)) << "no whole group";
  }
  std::vector<uint8_t> q4_1(16 * sizeof(BlockQ4_1));
  EXPECT_THROW(pack_row_groups(Matrix{TensorType::Q4_1, q4_1.data(), 16, 32}, again), Error) << "no layout";
  EXPECT_FALSE(row_groups_preferred(Matrix{TensorType::Q4_1, q4_1.data(), 16, 32}));
}

TEST(Repack, MatmulOnPackedEqualsGguf) {
  if (!kernel_table().row_group_layouts) {
    // The packed matrix is refused rather than misread by kernels that expect GGUF rows.
    for (TensorType type : kPackable) {
      const QMatrix w(type, 16, 1, 3);
      std::vector<uint8_t> storage;
      const Matrix packed = pack_row_groups(w.m, storage);
      ThreadPool pool(1);
      std::vector<float> x(static_cast<size_t>(w.m.n_cols), 0.5f), y(16);
      std::vector<uint8_t> scratch;
      EXPECT_THROW(matmul(pool, packed, x.data(), 1, y.data(), scratch), Error);
    }
    GTEST_SKIP() << "these kernels read every type in GGUF layout only";
  }
  for (TensorType type : kPackable) {
    ASSERT_TRUE(row_groups_preferred(QMatrix(type, 16, 1, 4).m));
    for (int64_t n_rows : {16, 35, 64}) {
      SCOPED_TRACE(gguf::tensor_type_name(type));
      const QMatrix w(type, n_rows, 3, static_cast<uint32_t>(n_rows));
      const int64_t n_cols = w.m.n_cols;
      std::vector<uint8_t> storage;
      const Matrix packed = pack_row_groups(w.m, storage);
      for (int64_t n_tokens : {1, 2, 4, 8, 9, 40}) {
        const auto x =
            test::random_floats(static_cast<size_t>(n_tokens * n_cols), static_cast<uint32_t>(n_tokens), 2.0f);
        for (int n_threads : {1, 2, 3}) {
          ThreadPool pool(n_threads);
          std::vector<uint8_t> scratch;
          std::vector<float> expected(static_cast<size_t>(n_tokens * n_rows)), got(expected.size(), -1.0f);
          matmul(pool, w.m, x.data(), n_tokens, expected.data(), scratch);
          matmul(pool, packed, x.data(), n_tokens, got.data(), scratch);
          ASSERT_EQ(std::memcmp(expected.data(), got.data(), got.size() * sizeof(float)), 0)
              << n_rows << " rows, " << n_tokens << " tokens, " << n_threads << " threads";
        }
      }
      std::vector<float> a(static_cast<size_t>(n_cols)), b(a.size());
      for (int64_t r = 0; r < n_rows; ++r) {
        get_row(w.m, r, a.data());
        get_row(packed, r, b.data());
        ASSERT_EQ(a, b) << "row " << r;
      }
    }
  }
}

TEST(PrepareMatrix, ChoosesWhatTheKernelsRead) {
  const QMatrix q4(TensorType::Q4_0, 32, 2, 31), q8(TensorType::Q8_0, 32, 2, 32), q4_k(TensorType::Q4_K, 32, 1, 33);
  std::vector<uint8_t> f32(32 * 64 * 4);
  const Matrix f{TensorType::F32, f32.data(), 32, 64};
  std::vector<uint8_t> s4, s8, sf;
  const Matrix p4 = prepare_matrix(q4.m, s4), p8 = prepare_matrix(q8.m, s8), pf = prepare_matrix(f, sf);
  const bool packs = kernel_table().row_group_layouts;
  EXPECT_EQ(p4.row_groups, packs);
  EXPECT_EQ(p4.data == s4.data(), packs);
  EXPECT_EQ(p8.row_groups, packs);
  EXPECT_EQ(p8.data == s8.data(), packs);
  std::vector<uint8_t> s4_k;
  EXPECT_EQ(prepare_matrix(q4_k.m, s4_k).row_groups, packs);
  EXPECT_TRUE(pf.data == f.data && !pf.row_groups && sf.empty());
}

// A packed matrix after one whose rows are not a multiple of 16 in one fused job: its groups still start where
// the kernels expect them.
TEST(Repack, FusedAfterAnOddMatrixEqualsSeparate) {
  if (!kernel_table().row_group_layouts) GTEST_SKIP() << "these kernels read every type in GGUF layout only";
  for (TensorType type : kPackable) {
    SCOPED_TRACE(gguf::tensor_type_name(type));
    const QMatrix odd(type, 35, 2, 11), wide(type, 48, 2, 12);
    std::vector<uint8_t> storage;
    const Matrix packed = pack_row_groups(wide.m, storage);
    for (int64_t n_tokens : {1, 5, 20}) {
      const auto x = test::random_floats(static_cast<size_t>(n_tokens * wide.m.n_cols), 13, 2.0f);
      ThreadPool pool(2);
      std::vector<uint8_t> scratch;
      std::vector<float> y_odd(static_cast<size_t>(35 * n_tokens)), y_wide(static_cast<size_t>(48 * n_tokens));
      std::vector<float> s_odd(y_odd.size()), s_wide(y_wide.size());
      matmul_multi(pool, {&odd.m, &packed}, x.data(), n_tokens, {y_odd.data(), y_wide.data()}, scratch);
      matmul(pool, odd.m, x.data(), n_tokens, s_odd.data(), scratch);
      matmul(pool, wide.m, x.data(), n_tokens, s_wide.data(), scratch);
      EXPECT_EQ(std::memcmp(y_odd.data(), s_odd.data(), y_odd.size() * sizeof(float)), 0) << n_tokens;
      EXPECT_EQ(std::memcmp(y_wide.data(), s_wide.data(), y_wide.size() * sizeof(float)), 0) << n_tokens;
    }
  }
}

}  // namespace
}  // namespace preface::kernels
