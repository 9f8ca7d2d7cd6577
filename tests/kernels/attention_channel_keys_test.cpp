// Attention over per-channel keys (KvPages with k_type q8_pc / q4_pc): sealed groups are read as exactly the values
// kv_widen_group gives and the open group as its f32 rows, the query unrounded, so a tile gives the same bits as
// the same tile over F32 rows holding those values; on every path (scalar, AVX2, AVX-512), for heads inside a row
// and windows that start inside a group.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "kernels/attention.h"
#include "kernels/kernel_test_util.h"
#include "kernels/kv_channels.h"
#include "kernels/paged_kv.h"

namespace preface::kernels {
namespace {

using namespace test_attention;  // NOLINT: the shared fixtures of paged_kv.h

TEST(AttentionChannelKeys, SealedAndOpenGroupsEqualF32OfTheirValuesOnEveryPath) {
  const std::vector<std::pair<size_t, size_t>> shapes = {{32, 3}, {64, 2}, {8, 4}, {128, 1}};
  for (const Path& path : paths()) {
    for (KvType k_type : kChannelKvTypes) {
      for (KvType v_type : {KvType::F16, KvType::Q4_0, KvType::Q8_0, KvType::F32}) {
        for (const auto& [head_dim, n_heads] : shapes) {
          SCOPED_TRACE(std::string(path.name) + " K " + kv_type_name(k_type) + " V " + kv_type_name(v_type) +
                       " head_dim " + std::to_string(head_dim) + " x " + std::to_string(n_heads));
          const int32_t n_pos = 150, block_size = 64;
          const size_t n = head_dim * n_heads;
          // F32 keys of random values; V of v_type. The expected pages hold the per-channel values.
          PagedKv expected(KvType::F32, v_type, head_dim, n_heads, block_size, n_pos, 7);
          const std::vector<float> keys = expected.kf;  // [n_pos][n] the layer's f32 K rows
          const int32_t open_from = (n_pos - 1) / kKvChannelGroup * kKvChannelGroup;
          std::vector<uint8_t> sealed(expected.k.size() / expected.k_row_bytes * kv_row_bytes(k_type, n), 0);
          const size_t pc_row_bytes = kv_row_bytes(k_type, n);
          std::vector<float> widened(kKvChannelGroup * n);
          for (int32_t g0 = 0; g0 < open_from; g0 += kKvChannelGroup) {
            uint8_t* group = expected.row(sealed.data(), pc_row_bytes, g0);
            kv_seal_group(k_type, keys.data() + static_cast<size_t>(g0) * n, n, n, group);
            kv_widen_group(k_type, group, n, 0, n, kKvChannelGroup, widened.data(), n);
            for (int32_t r = 0; r < kKvChannelGroup; ++r) {
              for (size_t i = 0; i < n; ++i) expected.write(expected.k.data(), g0 + r, i, widened[r * n + i]);
            }
          }
          const auto q = test::random_floats(head_dim * 4, 9, 3.0f);
          for (size_t head = 0; head < n_heads; ++head) {
            KvPages pc = expected.pages(head);
            pc.k_type = k_type;
            pc.k_base = sealed.data();
            pc.k_row_bytes = pc_row_bytes;
            pc.k_row_values = n;
            pc.open_k = keys.data() + static_cast<size_t>(open_from) * n;
            pc.open_k_stride = n;
            pc.open_from = open_from;
            std::vector<float> a(head_dim * 4), b(head_dim * 4);
            std::vector<AttnQuery> qa, qb;
            for (size_t j = 0; j < 4; ++j) {
              const int32_t np = n_pos - static_cast<int32_t>(5 * j);  // all in the open group
              const int32_t first = j == 3 ? np - 70 : 0;             // a window starting inside a group
              qa.push_back({q.data() + j * head_dim, a.data() + j * head_dim, np, first});
              qb.push_back({q.data() + j * head_dim, b.data() + j * head_dim, np, first});
            }
            run_tile(path.fn, pc, head_dim, 0.17f, qa);
            run_tile(path.fn, expected.pages(head), head_dim, 0.17f, qb);
            EXPECT_TRUE(same_bits(a, b)) << "head " << head;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace preface::kernels
