#include "model/base/memory.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

#include "util/error.h"

namespace preface::model {
namespace {

constexpr int32_t kMaxDim = 1 << 16;          // layers, heads, head sizes: keeps every product below 2^64
constexpr int64_t kMaxRowValues = 1 << 24;    // values of one token's K (or V) row
constexpr uint64_t kMaxStateBytes = 1ull << 40;

bool in_range(int32_t v) { return v >= 1 && v <= kMaxDim; }

}  // namespace

const char* memory_kind_name(MemoryKind k) {
  switch (k) {
    case MemoryKind::PagedRows: return "paged rows";
    case MemoryKind::State: return "state";
    case MemoryKind::None: return "none";
  }
  return "?";
}

MemorySpec MemorySpec::paged(int32_t n_kv_heads, int32_t k_head_dim, int32_t v_head_dim, int32_t window) {
  MemorySpec s;
  s.kind = MemoryKind::PagedRows;
  s.n_kv_heads = n_kv_heads;
  s.k_head_dim = k_head_dim;
  s.v_head_dim = v_head_dim;
  s.window = window;
  return s;
}

MemorySpec MemorySpec::state(uint64_t bytes) {
  MemorySpec s;
  s.kind = MemoryKind::State;
  s.state_bytes = bytes;
  return s;
}

MemorySpec MemorySpec::none(int32_t source_layer) {
  MemorySpec s;
  s.source_layer = source_layer;
  return s;
}

int64_t state_next_position(const uint8_t* state) {
  int64_t next = 0;
  std::memcpy(&next, state, sizeof next);
  return next;
}

uint64_t kv_head_row_bytes(kernels::KvType t, int32_t n_values) {
  if (n_values < 1 || n_values > kMaxRowValues) {
    throw Error(std::string("row of ") + std::to_string(n_values) + " values is out of range");
  }
  const size_t block = kernels::kv_type_block_values(t);
  const size_t n = (static_cast<size_t>(n_values) + block - 1) / block * block;
  return kernels::kv_row_bytes(t, n);
}

uint64_t MemorySpec::token_bytes(const kernels::KvFormat& f) const {
  if (kind != MemoryKind::PagedRows) return 0;
  return kv_head_row_bytes(f.k, k_row_values()) + kv_head_row_bytes(f.v, v_row_values());
}

std::string MemorySpec::describe() const {
  switch (kind) {
    case MemoryKind::PagedRows: {
      std::string out = std::string("paged rows: ") + std::to_string(n_kv_heads) + " KV heads x " +
                        std::to_string(k_head_dim) + " (K) + " + std::to_string(v_head_dim) + " (V)";
      if (window > 0) out += std::string(", window ") + std::to_string(window);
      return out;
    }
    case MemoryKind::State: return std::string("state: ") + std::to_string(state_bytes) + " bytes";
    case MemoryKind::None:
      return source_layer < 0 ? std::string("none")
                              : std::string("none (reads layer ") + std::to_string(source_layer) + ")";
  }
  return "?";
}

std::string MemoryGroup::layer_list() const {
  std::string out;
  for (size_t i = 0; i < layers.size();) {
    size_t j = i;
    while (j + 1 < layers.size() && layers[j + 1] == layers[j] + 1) ++j;
    if (!out.empty()) out += ", ";
    out += std::to_string(layers[i]);
    if (j > i + 1) {
      out += std::string("-") + std::to_string(layers[j]);
    } else if (j == i + 1) {
      out += std::string(", ") + std::to_string(layers[j]);
    }
    i = j + 1;
  }
  return out;
}

std::string MemoryGroup::summary(const kernels::KvFormat& t) const {
  std::string out = std::string("layers ") + layer_list() + " (" + std::to_string(layers.size()) + "): ";
  out += spec.describe();
  if (spec.kind == MemoryKind::PagedRows) {
    out += std::string("; ") + std::to_string(spec.token_bytes(t) * layers.size()) + " bytes per token in " +
           t.name();
  } else if (spec.kind == MemoryKind::State) {
    out += std::string("; ") + std::to_string(spec.state_bytes * layers.size()) + " bytes per sequence";
  }
  return out;
}

MemoryLayout::MemoryLayout(std::vector<MemorySpec> layers) : layers_(std::move(layers)) {
  if (layers_.empty() || layers_.size() > static_cast<size_t>(kMaxDim)) {
    throw Error(std::string("memory layout: ") + std::to_string(layers_.size()) + " layers is out of range [1, 65536]");
  }
  for (size_t il = 0; il < layers_.size(); ++il) {
    const MemorySpec& s = layers_[il];
    const std::string where = std::string("memory layout: layer ") + std::to_string(il) + " (" + s.describe() + "): ";
    switch (s.kind) {
      case MemoryKind::PagedRows:
        if (!in_range(s.n_kv_heads) || !in_range(s.k_head_dim) || !in_range(s.v_head_dim) ||
            static_cast<int64_t>(s.n_kv_heads) * std::max(s.k_head_dim, s.v_head_dim) > kMaxRowValues) {
          throw Error(where + "heads or head sizes out of range");
        }
        if (s.window < 0) throw Error(where + "negative window");
        break;
      case MemoryKind::State:
        if (s.state_bytes == 0 || s.state_bytes > kMaxStateBytes) throw Error(where + "state size out of range");
        break;
      case MemoryKind::None:
        if (s.source_layer >= static_cast<int32_t>(il) ||
            (s.source_layer >= 0 && layers_[static_cast<size_t>(s.source_layer)].kind != MemoryKind::PagedRows)) {
          throw Error(where + "the layer it reads is not an earlier layer with paged rows");
        }
        break;
    }
    bool placed = false;
    for (MemoryGroup& g : groups_) {
      if (g.spec == s) {
        g.layers.push_back(static_cast<int32_t>(il));
        placed = true;
        break;
      }
    }
    if (!placed) groups_.push_back(MemoryGroup{s, {static_cast<int32_t>(il)}});
  }
}

MemoryLayout MemoryLayout::uniform(int32_t n_layers, int32_t n_kv_heads, int32_t head_dim) {
  if (n_layers < 1 || n_layers > kMaxDim) {
    throw Error(std::string("memory layout: ") + std::to_string(n_layers) + " layers is out of range [1, 65536]");
  }
  return MemoryLayout(std::vector<MemorySpec>(static_cast<size_t>(n_layers),
                                              MemorySpec::paged(n_kv_heads, head_dim, head_dim)));
}

bool MemoryLayout::has_paged() const {
  for (const MemoryGroup& g : groups_) {
    if (g.spec.kind == MemoryKind::PagedRows) return true;
  }
  return false;
}

bool MemoryLayout::has_state() const {
  for (const MemoryGroup& g : groups_) {
    if (g.spec.kind == MemoryKind::State) return true;
  }
  return false;
}

void MemoryLayout::check_type_fits(const kernels::KvFormat& f) const {
  for (const MemoryGroup& g : groups_) {
    // A layer reading another's rows would need that layer's open keys of every group of the batch, which are
    // kept only while that layer runs (model/layers/paged_attention.h).
    if (kernels::kv_type_is_per_channel(f.k) && g.spec.kind == MemoryKind::None && g.spec.source_layer >= 0) {
      throw Error(std::string("KV type ") + kernels::kv_type_name(f.k) + " cannot serve layers " + g.layer_list() +
                  ", which read another layer's K/V rows; use a row type for K (q8_0, q4_0, ...)");
    }
    if (g.spec.kind != MemoryKind::PagedRows) continue;
    try {
      kernels::check_kv_type_fits(f.k, g.spec.k_row_values());
      kernels::check_kv_type_fits(f.v, g.spec.v_row_values());
    } catch (const Error& e) {
      throw Error(std::string(e.what()) + " (layers " + g.layer_list() + ")");
    }
    if ((f.rotate_k && !kernels::kv_rotation_fits(g.spec.k_head_dim)) ||
        (f.rotate_v && !kernels::kv_rotation_fits(g.spec.v_head_dim))) {
      throw Error("KV rotation needs heads whose size is a multiple of 64; layers " + g.layer_list() + " have " +
                  std::to_string(f.rotate_k ? g.spec.k_head_dim : g.spec.v_head_dim));
    }
  }
}

bool MemoryLayout::rotation_fits(int32_t MemorySpec::*head_dim) const {
  return std::all_of(groups_.begin(), groups_.end(), [&](const MemoryGroup& g) {
    return g.spec.kind != MemoryKind::PagedRows || kernels::kv_rotation_fits(g.spec.*head_dim);
  });
}

uint64_t MemoryLayout::paged_bytes_per_token(const kernels::KvFormat& t) const {
  // Each term < 2^16 x 2 x (2^16 x 34 / 32 + 34) < 2^35, times at most 2^16 layers: below 2^64.
  uint64_t total = 0;
  for (const MemoryGroup& g : groups_) total += g.spec.token_bytes(t) * g.layers.size();
  return total;
}

uint64_t MemoryLayout::windowed_bytes_per_token(const kernels::KvFormat& t) const {
  uint64_t total = 0;
  for (const MemoryGroup& g : groups_) {
    if (g.spec.window > 0) total += g.spec.token_bytes(t) * g.layers.size();
  }
  return total;
}

int32_t MemoryLayout::max_window() const {
  int32_t w = 0;
  for (const MemoryGroup& g : groups_) {
    if (g.spec.kind == MemoryKind::PagedRows) w = std::max(w, g.spec.window);
  }
  return w;
}

bool MemoryLayout::can_split_windows() const {
  bool windowed = false, global = false;
  for (const MemoryGroup& g : groups_) {
    if (g.spec.kind != MemoryKind::PagedRows) continue;
    (g.spec.window > 0 ? windowed : global) = true;
  }
  return windowed && global;
}

uint64_t MemoryLayout::state_bytes_per_sequence() const {
  uint64_t total = 0;  // < 2^40 x 2^16
  for (const MemoryGroup& g : groups_) {
    if (g.spec.kind == MemoryKind::State) total += g.spec.state_bytes * g.layers.size();
  }
  return total;
}

}  // namespace preface::model
