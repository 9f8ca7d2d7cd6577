// What each layer remembers between forward passes, and the groups of layers that remember alike: the one place
// that says how many bytes a token (or a sequence) costs. The KV storage (kv/kv_storage.h), the capacity
// calculator (model/capacity.h, `preface kv`), the engine's budget and the start-up summary all derive their sizes
// from a MemoryLayout, never from the model's shape directly.
//
// A layer kind declares its spec (model/arch/registry.h's row says which, per layer):
//   PagedRows  one K row and one V row per token, stored in the paged block pool (attention). window > 0: a query
//              at position p sees keys p - window + 1 .. p only (sliding-window layers). When the storage keeps
//              the windowed layers in a pool of their own (kv::KvStorage with window blocks, kv/window_pool.h),
//              a sequence holds only the last window of those rows; otherwise every position's, like a global
//              layer's.
//   State      a fixed number of bytes per sequence, whatever its length (a recurrent mixer's state). Every State
//              kind's bytes begin with an int64: the position the sequence's next token must have (0 when zeroed),
//              so that Model::forward can refuse a batch that does not continue the state.
//   None       nothing of its own (a layer that reads another layer's rows, source_layer, or a layer that reads
//              no memory at all, source_layer -1).
// Layers with equal specs form a group (window included: gemma's local and global layers are two groups).
//
//   paged bytes per token = sum over PagedRows layers of (K row bytes in the K type + V row bytes in the V type)
// where a row of n values (n_kv_heads x head size) of a KV type is kernels::kv_row_bytes over n rounded up to the
// type's block (q8_0: whole 32-value blocks, 34 bytes each). The storage refuses a type whose block does not divide
// the row (check_type_fits), so for every layout it accepts the rounding changes nothing.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/kv_type.h"

namespace preface::model {

enum class MemoryKind : uint8_t { PagedRows, State, None };
const char* memory_kind_name(MemoryKind k);  // "paged rows" | "state" | "none"

struct MemorySpec {
  MemoryKind kind = MemoryKind::None;
  int32_t n_kv_heads = 0;      // PagedRows: heads per token row
  int32_t k_head_dim = 0;      // PagedRows: values per K head row
  int32_t v_head_dim = 0;      // PagedRows: values per V head row
  int32_t window = 0;          // PagedRows: 0 = every earlier position visible; > 0 = the last `window` positions
  uint64_t state_bytes = 0;    // State: bytes per sequence
  int32_t source_layer = -1;   // None: the layer whose rows this one reads; -1 none

  static MemorySpec paged(int32_t n_kv_heads, int32_t k_head_dim, int32_t v_head_dim, int32_t window = 0);
  static MemorySpec state(uint64_t bytes);
  static MemorySpec none(int32_t source_layer = -1);

  bool operator==(const MemorySpec&) const = default;
  int32_t k_row_values() const { return n_kv_heads * k_head_dim; }  // PagedRows: K values per token
  int32_t v_row_values() const { return n_kv_heads * v_head_dim; }  // PagedRows: V values per token
  // PagedRows: K plus V bytes of one token in format f (0 for the other kinds).
  uint64_t token_bytes(const kernels::KvFormat& f) const;
  // "paged rows: 4 KV heads x 64 (K) + 64 (V), window 4096" | "state: 4096 bytes" (per sequence) | "none (reads
  // layer 3)".
  std::string describe() const;
};

// The first 8 bytes of a State layer's state (see above).
int64_t state_next_position(const uint8_t* state);

// Bytes of one row of n_values values of type t, rounded up to whole blocks of the type.
uint64_t kv_head_row_bytes(kernels::KvType t, int32_t n_values);

// Layers with one spec, in increasing order.
struct MemoryGroup {
  MemorySpec spec;
  std::vector<int32_t> layers;
  // "0-3", "0, 2, 4, 6" or "0-4, 6-10": for messages and summaries.
  std::string layer_list() const;
  // What the group costs in format f: "layers 0-4 (5): paged rows: 4 KV heads x 64 (K) + 64 (V); 2560 bytes per
  // token in f16" | "layers 1-3 (3): state: 4096 bytes; 12288 bytes per sequence" | "layers 5 (1): none (reads
  // layer 3)".
  std::string summary(const kernels::KvFormat& f) const;
};

class MemoryLayout {
 public:
  MemoryLayout() = default;
  // One spec per layer. Throws preface::Error when there are no layers or more than 65536, a paged spec's heads or
  // head sizes are outside [1, 65536] or a token row holds more than 2^24 values, a window is negative, a state is
  // empty or above 2^40 bytes, or a layer reads a layer that is not an earlier PagedRows layer.
  explicit MemoryLayout(std::vector<MemorySpec> layers);
  // Every layer the same PagedRows spec, global: the layout of a plain transformer.
  static MemoryLayout uniform(int32_t n_layers, int32_t n_kv_heads, int32_t head_dim);

  int32_t n_layers() const { return static_cast<int32_t>(layers_.size()); }
  const MemorySpec& layer(int32_t il) const { return layers_.at(static_cast<size_t>(il)); }
  const std::vector<MemorySpec>& layers() const { return layers_; }
  const std::vector<MemoryGroup>& groups() const { return groups_; }  // ordered by first layer
  bool has_paged() const;
  bool has_state() const;

  // Throws preface::Error naming the layer group when format f's types cannot store a paged row of its size
  // (kernels::check_kv_type_fits), f rotates a side whose heads cannot be rotated (kernels::kv_rotation_fits), or
  // f's keys are per channel and a layer reads another layer's rows.
  void check_type_fits(const kernels::KvFormat& f) const;
  // Whether every paged layer's K (V) heads can be rotated (kernels::kv_rotation_fits); true without paged layers.
  bool k_rotation_fits() const { return rotation_fits(&MemorySpec::k_head_dim); }
  bool v_rotation_fits() const { return rotation_fits(&MemorySpec::v_head_dim); }
  // The one formula (see the header): paged bytes of one token over every layer, in format f.
  uint64_t paged_bytes_per_token(const kernels::KvFormat& f) const;
  // The part of it that windowed PagedRows layers (window > 0) take, and their widest window (0: none).
  uint64_t windowed_bytes_per_token(const kernels::KvFormat& f) const;
  int32_t max_window() const;
  // Whether the windowed layers can live in a pool of their own: the layout has windowed PagedRows layers and
  // global ones (which keep every position, and so the whole prefix chain a hit is matched on).
  bool can_split_windows() const;
  // Bytes of every State layer of one sequence.
  uint64_t state_bytes_per_sequence() const;

 private:
  bool rotation_fits(int32_t MemorySpec::*head_dim) const;

  std::vector<MemorySpec> layers_;
  std::vector<MemoryGroup> groups_;
};

}  // namespace preface::model
