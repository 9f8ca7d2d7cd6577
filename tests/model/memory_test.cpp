// Memory specs and groups (model/base/memory.h): grouping, the one bytes-per-token formula, validation, and the
// layouts the architecture rows give the shared models (one paged group; gemma's local and global layers as two).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gguf/reader.h"
#include "model/arch/registry.h"
#include "model/base/memory.h"
#include "model/capacity.h"
#include "model/model.h"
#include "support/shared_data.h"
#include "util/error.h"

namespace preface::test {
namespace {

using model::MemoryGroup;
using model::MemoryKind;
using model::MemoryLayout;
using model::MemorySpec;

TEST(MemoryLayout, UniformIsOneGroupWithThePlainFormula) {
  const MemoryLayout m = MemoryLayout::uniform(32, 8, 128);
  ASSERT_EQ(m.groups().size(), 1u);
  EXPECT_EQ(m.groups()[0].layers.size(), 32u);
  EXPECT_EQ(m.groups()[0].layer_list(), "0-31");
  EXPECT_TRUE(m.has_paged());
  EXPECT_FALSE(m.has_state());
  // llama3-8b: 2 x 32 x 8 x 128 x bytes per value.
  EXPECT_EQ(m.paged_bytes_per_token(kernels::KvType::F16), 2u * 32 * 8 * 128 * 2);
  EXPECT_EQ(m.paged_bytes_per_token(kernels::KvType::F32), 2u * 32 * 8 * 128 * 4);
  EXPECT_EQ(m.paged_bytes_per_token(kernels::KvType::Q8_0), 2u * 32 * 8 * 128 / 32 * 34);
  EXPECT_EQ(m.state_bytes_per_sequence(), 0u);
  EXPECT_EQ(m.groups()[0].summary(kernels::KvType::F16),
            "layers 0-31 (32): paged rows: 8 KV heads x 128 (K) + 128 (V); 131072 bytes per token in f16");
}

TEST(MemoryLayout, EqualSpecsGroupAndEachGroupCostsItsOwn) {
  const MemoryLayout m({MemorySpec::paged(2, 64, 64, 512), MemorySpec::paged(4, 128, 128),
                        MemorySpec::paged(2, 64, 64, 512), MemorySpec::state(1000), MemorySpec::none(1),
                        MemorySpec::paged(2, 64, 64, 512), MemorySpec::state(1000)});
  ASSERT_EQ(m.groups().size(), 4u);
  EXPECT_EQ(m.groups()[0].layers, (std::vector<int32_t>{0, 2, 5}));
  EXPECT_EQ(m.groups()[0].layer_list(), "0, 2, 5");
  EXPECT_EQ(m.groups()[1].layers, (std::vector<int32_t>{1}));
  EXPECT_EQ(m.groups()[2].layers, (std::vector<int32_t>{3, 6}));
  EXPECT_EQ(m.groups()[3].spec.source_layer, 1);
  EXPECT_EQ(m.paged_bytes_per_token(kernels::KvType::BF16), 3u * 2 * (64 + 64) * 2 + 4u * (128 + 128) * 2);
  EXPECT_EQ(m.state_bytes_per_sequence(), 2000u);
  EXPECT_TRUE(m.has_state());
  EXPECT_EQ(m.groups()[2].summary(kernels::KvType::F16),
            "layers 3, 6 (2): state: 1000 bytes; 2000 bytes per sequence");
  EXPECT_EQ(m.groups()[3].summary(kernels::KvType::F16), "layers 4 (1): none (reads layer 1)");
  EXPECT_EQ(m.groups()[0].spec.describe(), "paged rows: 2 KV heads x 64 (K) + 64 (V), window 512");
}

TEST(MemoryLayout, LayerListsNameRuns) {
  MemoryGroup g;
  g.layers = {0, 1};
  EXPECT_EQ(g.layer_list(), "0, 1");
  g.layers = {0, 1, 2, 3, 4, 6, 7, 8, 9, 10};
  EXPECT_EQ(g.layer_list(), "0-4, 6-10");
  g.layers = {5};
  EXPECT_EQ(g.layer_list(), "5");
}

// K and V heads of different sizes (MLA-like and Gemma-like layouts later) are counted separately.
TEST(MemoryLayout, KAndVHeadsMayDiffer) {
  const MemoryLayout m({MemorySpec::paged(1, 192, 128)});
  EXPECT_EQ(m.paged_bytes_per_token(kernels::KvType::F16), (192u + 128u) * 2);
  EXPECT_EQ(m.layer(0).k_row_values(), 192);
  EXPECT_EQ(m.layer(0).v_row_values(), 128);
}

TEST(MemoryLayout, BadLayoutsAreErrors) {
  EXPECT_THROW(MemoryLayout(std::vector<MemorySpec>{}), Error);
  EXPECT_THROW(MemoryLayout::uniform(0, 2, 8), Error);
  EXPECT_THROW(MemoryLayout::uniform(2, 0, 8), Error);
  EXPECT_THROW(MemoryLayout::uniform(2, 2, -8), Error);
  EXPECT_THROW(MemoryLayout::uniform(2, 1 << 16, 1 << 16), Error);  // a row of 2^32 values
  EXPECT_THROW(MemoryLayout({MemorySpec::paged(2, 8, 8, -1)}), Error);
  EXPECT_THROW(MemoryLayout({MemorySpec::state(0)}), Error);
  EXPECT_THROW(MemoryLayout({MemorySpec::state(uint64_t{1} << 41)}), Error);
  EXPECT_THROW(MemoryLayout({MemorySpec::none(0)}), Error);                               // itself
  EXPECT_THROW(MemoryLayout({MemorySpec::paged(2, 8, 8), MemorySpec::none(2)}), Error);   // a later layer
  EXPECT_THROW(MemoryLayout({MemorySpec::state(8), MemorySpec::none(0)}), Error);         // a layer without rows
  EXPECT_NO_THROW(MemoryLayout({MemorySpec::paged(2, 8, 8), MemorySpec::none(0), MemorySpec::none()}));
}

TEST(MemoryLayout, TypeThatCannotStoreAGroupNamesItsLayers) {
  // Rows of 2 x 64 and 1 x 48 values: the second is no whole number of 32-value blocks.
  const MemoryLayout m({MemorySpec::paged(2, 64, 64), MemorySpec::paged(1, 48, 48), MemorySpec::paged(1, 48, 48)});
  EXPECT_NO_THROW(m.check_type_fits(kernels::KvType::F16));
  EXPECT_NO_THROW(MemoryLayout({MemorySpec::paged(2, 48, 48)}).check_type_fits(kernels::KvType::Q8_0));  // 96 values
  try {
    m.check_type_fits(kernels::KvType::Q8_0);
    FAIL() << "q8_0 accepted a row of 48 values";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("layers 1, 2"), std::string::npos) << e.what();
  }
}

// The rows of the shared models: llama-shaped files are one global group; gemma2 alternates local (even) and global
// (odd) layers, gemma3 has a global layer every sliding_window_pattern layers; the model, the calculator and the
// registry agree.
TEST(MemoryLayout, ArchitectureRowsGroupTheSharedModels) {
  if (shared_dir().empty()) GTEST_SKIP() << "../shared is absent";
  struct Case {
    const char* file;
    size_t n_groups;
  };
  for (const Case& k : {Case{"models/synth-llama-d256-f16.gguf", 1}, Case{"models/synth-qwen3-d256-f16.gguf", 1},
                        Case{"models/synth-phi3-d256-f16.gguf", 1}, Case{"models/synth-gemma2-d128-f16.gguf", 2},
                        Case{"models/synth-gemma3-d256-f16.gguf", 2}}) {
    SCOPED_TRACE(k.file);
    const std::string path = shared_file(k.file).string();
    ASSERT_FALSE(path.empty());
    const gguf::File file = gguf::File::open(path);
    const model::Config c = model::read_config(file);
    const MemoryLayout m = model::memory_layout(c);
    ASSERT_EQ(m.groups().size(), k.n_groups);
    ASSERT_EQ(m.n_layers(), c.n_layers);
    for (int32_t il = 0; il < c.n_layers; ++il) {
      EXPECT_EQ(m.layer(il), MemorySpec::paged(c.n_kv_heads, c.head_dim, c.head_dim, c.layer_window(il)));
    }
    if (k.n_groups == 2) {
      EXPECT_GT(m.groups()[0].spec.window, 0);  // layer 0 is local in both gemmas
      EXPECT_EQ(m.groups()[1].spec.window, 0);
      EXPECT_EQ(m.groups()[0].layers.size() + m.groups()[1].layers.size(), static_cast<size_t>(c.n_layers));
    }
    // Windows keep every row today, so the bytes are those of the uniform layout.
    EXPECT_EQ(m.paged_bytes_per_token(kernels::KvType::F16),
              MemoryLayout::uniform(c.n_layers, c.n_kv_heads, c.head_dim).paged_bytes_per_token(kernels::KvType::F16));
    const model::KvShape shape = model::shape_from_gguf(file);
    EXPECT_EQ(shape.memory.groups().size(), k.n_groups);
    EXPECT_EQ(model::kv_bytes_per_token(shape, kernels::KvType::F16), m.paged_bytes_per_token(kernels::KvType::F16));
    const auto loaded = model::Model::load(path, 8);
    EXPECT_EQ(loaded->memory().layers(), m.layers());
  }
}

}  // namespace
}  // namespace preface::test
