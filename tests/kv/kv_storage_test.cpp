// KvStorage: sizes, layout (per layer K then V, blocks of block_size rows), zeroing, residency and copy_rows;
// Q8_0 sizes and its head_dim check.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "kv/kv_storage.h"
#include "util/error.h"

namespace preface::test {
namespace {

kv::KvDims small_dims() { return kv::KvDims{.n_layers = 3, .n_kv_heads = 2, .head_dim = 8}; }

TEST(KvStorage, SizesAndLayout) {
  const kv::KvStorage s(small_dims(), kernels::KvType::F16, 16, 5);
  EXPECT_EQ(s.n_blocks(), 5);
  EXPECT_EQ(s.block_size(), 16);
  EXPECT_EQ(s.bytes_per_token(), 3u * 2u * 16u * 2u);  // layers x {K,V} x row_values x bytes
  EXPECT_EQ(s.size_bytes(), s.bytes_per_token() * 5 * 16);
  const kernels::KvView& v = s.view();
  ASSERT_EQ(v.k_layers.size(), 3u);
  ASSERT_EQ(v.v_layers.size(), 3u);
  EXPECT_EQ(v.row_values, 16);
  const size_t region = 5 * 16 * v.row_bytes();
  for (int l = 0; l < 3; ++l) {
    EXPECT_EQ(v.k_layers[l], v.k_layers[0] + 2 * region * l);
    EXPECT_EQ(v.v_layers[l], v.k_layers[l] + region);
  }
  EXPECT_EQ(v.k_row(1, 2, 3), v.k_layers[1] + (2 * 16 + 3) * v.row_bytes());
  for (size_t i = 0; i < s.size_bytes(); ++i) ASSERT_EQ(v.k_layers[0][i], 0) << "byte " << i;
}

TEST(KvStorage, CopyRowsCopiesThePrefixOfEveryLayer) {
  kv::KvStorage s(small_dims(), kernels::KvType::F32, 4, 3);
  const kernels::KvView& v = s.view();
  for (int l = 0; l < 3; ++l) {
    for (int slot = 0; slot < 4; ++slot) {
      std::memset(v.k_row(l, 0, slot), 10 * l + slot + 1, v.row_bytes());
      std::memset(v.v_row(l, 0, slot), 100 + 10 * l + slot, v.row_bytes());
    }
  }
  s.copy_rows(0, 2, 3);
  for (int l = 0; l < 3; ++l) {
    for (int slot = 0; slot < 3; ++slot) {
      EXPECT_EQ(std::memcmp(v.k_row(l, 2, slot), v.k_row(l, 0, slot), v.row_bytes()), 0);
      EXPECT_EQ(std::memcmp(v.v_row(l, 2, slot), v.v_row(l, 0, slot), v.row_bytes()), 0);
    }
    EXPECT_EQ(v.k_row(l, 2, 3)[0], 0);  // beyond n_rows: untouched
    EXPECT_EQ(v.k_row(l, 1, 0)[0], 0);  // other blocks: untouched
  }
  EXPECT_THROW(s.copy_rows(0, 3, 1), Error);
  EXPECT_THROW(s.copy_rows(0, 1, 5), Error);
}

TEST(KvStorage, BadSizesAreErrors) {
  EXPECT_THROW(kv::KvStorage(small_dims(), kernels::KvType::F16, 0, 4), Error);
  EXPECT_THROW(kv::KvStorage(small_dims(), kernels::KvType::F16, 16, 0), Error);
  for (const kv::KvDims& d : {kv::KvDims{0, 2, 8}, kv::KvDims{3, 0, 8}, kv::KvDims{3, 2, 0}, kv::KvDims{3, -1, 8},
                              kv::KvDims{3, 1 << 16, 1 << 16}}) {
    EXPECT_THROW(kv::KvStorage(d, kernels::KvType::F16, 16, 1), Error) << d.n_layers << " " << d.n_kv_heads;
  }
}

// Every type's bytes per token: 2 x layers x kernels::kv_row_bytes(type, kv_heads x head_dim), the formula the
// capacity calculator (model/capacity.h) is tested against.
TEST(KvStorage, BytesPerTokenOfEveryType) {
  const kv::KvDims d{.n_layers = 3, .n_kv_heads = 2, .head_dim = 64};
  const size_t expected[] = {3u * 2 * 128 * 4, 3u * 2 * 128 * 2, 3u * 2 * 128 * 2, 3u * 2 * 4 * 34};
  for (size_t i = 0; i < kernels::kAllKvTypes.size(); ++i) {
    const kernels::KvType t = kernels::kAllKvTypes[i];
    EXPECT_EQ(kv::KvStorage(d, t, 16, 1).bytes_per_token(), expected[i]) << kernels::kv_type_name(t);
    EXPECT_EQ(kv::KvStorage(d, t, 16, 1).bytes_per_token(), 2u * 3 * kernels::kv_row_bytes(t, 128));
  }
}

// Q8_0: per KV head, head_dim / 32 blocks of 34 bytes; heads that are not whole blocks are refused.
TEST(KvStorage, Q8_0SizesAndHeadDimCheck) {
  kv::KvDims c = small_dims();
  c.head_dim = 64;
  const kv::KvStorage s(c, kernels::KvType::Q8_0, 16, 5);
  EXPECT_EQ(s.view().row_bytes(), 2u * 2u * 34u);                // kv heads x blocks per head x 34
  EXPECT_EQ(s.bytes_per_token(), 3u * 2u * 2u * 64u * 34u / 32u);  // layers x {K,V} x kv heads x head_dim x 34/32
  EXPECT_EQ(s.size_bytes(), s.bytes_per_token() * 5 * 16);
  EXPECT_EQ(s.view().k_row(2, 4, 15) + s.view().row_bytes(), s.view().v_layers[2]);  // regions end to end
  for (int32_t head_dim : {8, 16, 48, 100}) {
    c.head_dim = head_dim;
    try {
      kv::KvStorage bad(c, kernels::KvType::Q8_0, 16, 5);
      FAIL() << "q8_0 accepted head_dim " << head_dim;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("head_dim is " + std::to_string(head_dim)), std::string::npos) << e.what();
    }
    EXPECT_NO_THROW(kv::KvStorage(c, kernels::KvType::F16, 16, 5));
  }
}

// Every page is resident once the storage exists (faulted in at start-up, not on the first write while serving).
TEST(KvStorage, PagesAreResidentFromTheStart) {
  const kv::KvStorage s(small_dims(), kernels::KvType::F16, 16, 512);
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t n_pages = (s.size_bytes() + page - 1) / page;
  ASSERT_GT(n_pages, 8u);
  std::vector<unsigned char> resident(n_pages);
  ASSERT_EQ(mincore(s.view().k_layers[0], s.size_bytes(), resident.data()), 0) << std::strerror(errno);
  size_t n_resident = 0;
  for (const unsigned char r : resident) n_resident += r & 1;
  EXPECT_EQ(n_resident, n_pages);
  for (size_t i = 0; i < s.size_bytes(); i += page) ASSERT_EQ(s.view().k_layers[0][i], 0) << "byte " << i;
}

TEST(KvStorage, MoveKeepsTheAllocation) {
  kv::KvStorage a(small_dims(), kernels::KvType::BF16, 8, 2);
  uint8_t* base = a.view().k_layers[0];
  kv::KvStorage b = std::move(a);
  EXPECT_EQ(b.view().k_layers[0], base);
  EXPECT_EQ(b.n_blocks(), 2);
}

}  // namespace
}  // namespace preface::test
