// KvStorage: sizes, layout (per layer K then V, blocks of block_size rows), zeroing, residency and copy_rows;
// Q8_0 sizes and its head_dim check; a layout whose layers remember differently.
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

struct Dims {
  int32_t n_layers, n_kv_heads, head_dim;
};
model::MemoryLayout layout(const Dims& d) { return model::MemoryLayout::uniform(d.n_layers, d.n_kv_heads, d.head_dim); }
model::MemoryLayout small_dims() { return layout({.n_layers = 3, .n_kv_heads = 2, .head_dim = 8}); }

TEST(KvStorage, SizesAndLayout) {
  const kv::KvStorage s(small_dims(), kernels::KvType::F16, 16, 5);
  EXPECT_EQ(s.n_blocks(), 5);
  EXPECT_EQ(s.block_size(), 16);
  EXPECT_EQ(s.bytes_per_token(), 3u * 2u * 16u * 2u);  // layers x {K,V} x row_values x bytes
  EXPECT_EQ(s.size_bytes(), s.bytes_per_token() * 5 * 16);
  const kernels::KvView& v = s.view();
  ASSERT_EQ(v.layers.size(), 3u);
  EXPECT_EQ(v.layers[0].k_values, 16);
  EXPECT_EQ(v.layers[0].v_values, 16);
  const size_t region = 5 * 16 * v.k_row_bytes(0);
  for (int l = 0; l < 3; ++l) {
    EXPECT_EQ(v.layers[l].k, v.layers[0].k + 2 * region * l);
    EXPECT_EQ(v.layers[l].v, v.layers[l].k + region);
  }
  EXPECT_EQ(v.k_row(1, 2, 3), v.layers[1].k + (2 * 16 + 3) * v.k_row_bytes(1));
  for (size_t i = 0; i < s.size_bytes(); ++i) ASSERT_EQ(v.layers[0].k[i], 0) << "byte " << i;
}

TEST(KvStorage, CopyRowsCopiesThePrefixOfEveryLayer) {
  kv::KvStorage s(small_dims(), kernels::KvType::F32, 4, 3);
  const kernels::KvView& v = s.view();
  for (int l = 0; l < 3; ++l) {
    for (int slot = 0; slot < 4; ++slot) {
      std::memset(v.k_row(l, 0, slot), 10 * l + slot + 1, v.k_row_bytes(l));
      std::memset(v.v_row(l, 0, slot), 100 + 10 * l + slot, v.v_row_bytes(l));
    }
  }
  s.copy_rows(0, 2, 3);
  for (int l = 0; l < 3; ++l) {
    for (int slot = 0; slot < 3; ++slot) {
      EXPECT_EQ(std::memcmp(v.k_row(l, 2, slot), v.k_row(l, 0, slot), v.k_row_bytes(l)), 0);
      EXPECT_EQ(std::memcmp(v.v_row(l, 2, slot), v.v_row(l, 0, slot), v.v_row_bytes(l)), 0);
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
  for (const Dims& d : {Dims{0, 2, 8}, Dims{3, 0, 8}, Dims{3, 2, 0}, Dims{3, -1, 8}, Dims{3, 1 << 16, 1 << 16}}) {
    EXPECT_THROW(kv::KvStorage(layout(d), kernels::KvType::F16, 16, 1), Error) << d.n_layers << " " << d.n_kv_heads;
  }
}

// Every type's bytes per token: 2 x layers x kernels::kv_row_bytes(type, kv_heads x head_dim), the formula the
// capacity calculator (model/capacity.h) is tested against.
TEST(KvStorage, BytesPerTokenOfEveryType) {
  const model::MemoryLayout d = layout({.n_layers = 3, .n_kv_heads = 2, .head_dim = 64});
  // f32, f16, bf16, then the block types: 4 blocks of 128 values per row.
  const size_t expected[] = {3u * 2 * 128 * 4, 3u * 2 * 128 * 2, 3u * 2 * 128 * 2, 3u * 2 * 4 * 34, 3u * 2 * 4 * 18,
                             3u * 2 * 4 * 20,  3u * 2 * 4 * 18,  3u * 2 * 4 * 22,  3u * 2 * 4 * 24};
  static_assert(std::size(expected) == kernels::kAllKvTypes.size());
  for (size_t i = 0; i < kernels::kAllKvTypes.size(); ++i) {
    const kernels::KvType t = kernels::kAllKvTypes[i];
    EXPECT_EQ(kv::KvStorage(d, t, 16, 1).bytes_per_token(), expected[i]) << kernels::kv_type_name(t);
    EXPECT_EQ(kv::KvStorage(d, t, 16, 1).bytes_per_token(), 2u * 3 * kernels::kv_row_bytes(t, 128));
  }
}

// Q8_0: a row of kv heads x head_dim values in blocks of 34 bytes per 32; a head may start inside a block (rows of
// 2 x 16 values are one block), rows that are not whole blocks are refused. Separate K and V types size each side.
TEST(KvStorage, Q8_0SizesAndHeadDimCheck) {
  Dims c{.n_layers = 3, .n_kv_heads = 2, .head_dim = 8};
  c.head_dim = 64;
  const kv::KvStorage s(layout(c), kernels::KvType::Q8_0, 16, 5);
  EXPECT_EQ(s.view().k_row_bytes(0), 2u * 2u * 34u);             // kv heads x blocks per head x 34
  EXPECT_EQ(s.bytes_per_token(), 3u * 2u * 2u * 64u * 34u / 32u);  // layers x {K,V} x kv heads x head_dim x 34/32
  EXPECT_EQ(s.size_bytes(), s.bytes_per_token() * 5 * 16);
  EXPECT_EQ(s.view().k_row(2, 4, 15) + s.view().k_row_bytes(2), s.view().layers[2].v);  // regions end to end
  for (int32_t head_dim : {8, 36, 100}) {
    c.head_dim = head_dim;
    try {
      kv::KvStorage bad(layout(c), kernels::KvType::Q8_0, 16, 5);
      FAIL() << "q8_0 accepted head_dim " << head_dim;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("rows of " + std::to_string(2 * head_dim) + " values"), std::string::npos)
          << e.what();
    }
    EXPECT_NO_THROW(kv::KvStorage(layout(c), kernels::KvType::F16, 16, 5));
  }
  c.head_dim = 16;  // two heads: one block per row
  EXPECT_EQ(kv::KvStorage(layout(c), kernels::KvType::Q4_0, 16, 5).view().k_row_bytes(0), 18u);
  c.head_dim = 64;
  const kv::KvStorage mixed(layout(c), kernels::KvFormat(kernels::KvType::Q8_0, kernels::KvType::Q4_0), 16, 5);
  EXPECT_EQ(mixed.view().k_row_bytes(0), 4u * 34u);
  EXPECT_EQ(mixed.view().v_row_bytes(0), 4u * 18u);
  EXPECT_EQ(mixed.bytes_per_token(), 3u * 4u * (34u + 18u));
  EXPECT_EQ(mixed.view().k_row(2, 4, 15) + mixed.view().k_row_bytes(2), mixed.view().layers[2].v);
  c.head_dim = 32;  // rotation needs heads of multiples of 64
  EXPECT_THROW(kv::KvStorage(layout(c), kernels::KvFormat(kernels::KvType::Q4_0, kernels::KvType::Q4_0, true, false),
                             16, 5),
               Error);
}

// Every page is resident once the storage exists (faulted in at start-up, not on the first write while serving).
TEST(KvStorage, PagesAreResidentFromTheStart) {
  const kv::KvStorage s(small_dims(), kernels::KvType::F16, 16, 512);
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t n_pages = (s.size_bytes() + page - 1) / page;
  ASSERT_GT(n_pages, 8u);
  std::vector<unsigned char> resident(n_pages);
  ASSERT_EQ(mincore(s.view().layers[0].k, s.size_bytes(), resident.data()), 0) << std::strerror(errno);
  size_t n_resident = 0;
  for (const unsigned char r : resident) n_resident += r & 1;
  EXPECT_EQ(n_resident, n_pages);
  for (size_t i = 0; i < s.size_bytes(); i += page) ASSERT_EQ(s.view().layers[0].k[i], 0) << "byte " << i;
}

TEST(KvStorage, MoveKeepsTheAllocation) {
  kv::KvStorage a(small_dims(), kernels::KvType::BF16, 8, 2);
  uint8_t* base = a.view().layers[0].k;
  kv::KvStorage b = std::move(a);
  EXPECT_EQ(b.view().layers[0].k, base);
  EXPECT_EQ(b.n_blocks(), 2);
}

// Layers that remember differently: a global and a windowed group of another width, a layer reading layer 0's rows
// and a recurrent state. Each paged layer gets its own K and V widths, the state layer its slots, the reading layer
// nothing; a block record holds the paged layers only, in layer order, and moves them verbatim.
TEST(KvStorage, MixedLayoutGivesEachLayerItsOwnRegions) {
  using model::MemorySpec;
  const model::MemoryLayout mixed({MemorySpec::paged(2, 8, 8), MemorySpec::paged(1, 16, 8, /*window=*/4),
                                   MemorySpec::none(0), MemorySpec::state(40), MemorySpec::paged(2, 8, 8)});
  ASSERT_EQ(mixed.groups().size(), 4u);
  EXPECT_EQ(mixed.groups()[0].layers, (std::vector<int32_t>{0, 4}));
  kv::KvStorage s(mixed, kernels::KvType::F32, 4, 3, /*n_state_slots=*/2);
  const kernels::KvView& v = s.view();
  const size_t per_token = 2 * (16 + 16) * 4 + (16 + 8) * 4;  // layers 0 and 4, then layer 1
  EXPECT_EQ(s.bytes_per_token(), per_token);
  EXPECT_EQ(s.bytes_per_token(), mixed.paged_bytes_per_token(kernels::KvType::F32));
  EXPECT_EQ(s.size_bytes(), per_token * 3 * 4 + 2 * 40 + 48);  // layer 4's K starts on a 64-byte boundary
  EXPECT_EQ(s.block_bytes(), per_token * 4);
  EXPECT_EQ(v.n_state_slots, 2);
  EXPECT_EQ(v.k_row_bytes(1), 16u * 4);
  EXPECT_EQ(v.v_row_bytes(1), 8u * 4);
  EXPECT_EQ(v.layers[1].v, v.layers[1].k + 3 * 4 * 16 * 4);
  EXPECT_EQ(v.layers[2].k, nullptr);
  EXPECT_EQ(v.layers[2].state, nullptr);
  EXPECT_EQ(v.layers[3].k, nullptr);
  ASSERT_NE(v.layers[3].state, nullptr);
  EXPECT_EQ(v.state(3, 1), v.layers[3].state + 40);
  EXPECT_EQ(v.layers[4].k, v.state(3, 0) + 2 * 40 + 48);
  for (const kernels::KvLayerView& l : v.layers) {  // every region on a 64-byte boundary
    for (const uint8_t* p : {l.k, l.v, l.state}) EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
  }

  std::vector<uint8_t> record(s.block_bytes());
  for (size_t i = 0; i < record.size(); ++i) record[i] = static_cast<uint8_t>(i * 7 + 1);
  s.write_block(1, record);
  EXPECT_EQ(v.k_row(0, 1, 0)[0], record[0]);
  EXPECT_EQ(v.v_row(0, 1, 0)[0], record[4 * 16 * 4]);                      // after layer 0's four K rows
  EXPECT_EQ(v.k_row(1, 1, 0)[0], record[2 * 4 * 16 * 4]);                  // after layer 0's K and V rows
  EXPECT_EQ(v.k_row(4, 1, 3)[0], record[record.size() - 4 * 16 * 4 - 16 * 4]);  // layer 4's last K row
  std::memset(v.state(3, 0), 0xAB, 80);  // states are not part of a block
  s.copy_rows(1, 2, 4);
  std::vector<uint8_t> back(s.block_bytes());
  s.read_block(2, back);
  EXPECT_EQ(back, record);
  EXPECT_EQ(v.state(3, 1)[39], 0xAB);
  EXPECT_THROW(kv::KvStorage(mixed, kernels::KvType::F32, 4, 3, /*n_state_slots=*/0), Error);
}

}  // namespace
}  // namespace preface::test
