// A KV event consumer written from vLLM's current structs (vllm/distributed/kv_events.py: msgspec Structs with
// omit_defaults, events tagged by a "type" key; EventBatch {ts, events, data_parallel_rank = None}; BlockStored
// {block_hashes, parent_block_hash, token_ids, block_size, lora_id, medium, lora_name, extra_keys = None,
// group_idx = None, kv_cache_spec_kind = None, kv_cache_spec_sliding_window = None}; BlockRemoved {block_hashes,
// medium, group_idx = None}; AllBlocksCleared {}), stricter than msgspec: a field of the wrong type, a missing
// field without a default, and a field the struct does not have are all errors. Also decodes the legacy
// array-like layout. For the tests of engine/kv_event_wire.h and of `serve --kv-events-endpoint`.
#pragma once
#include <msgpack.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace preface::test {

struct VllmKvEvent {
  std::string type;                         // BlockStored | BlockRemoved | AllBlocksCleared
  std::vector<std::string> hashes;          // each hash as its msgpack bytes: an int's 8 bytes big-endian, or bin
  std::optional<std::string> parent;        // BlockStored: nil for a chain's first block
  std::vector<int64_t> tokens;
  int64_t block_size = 0;
  std::string medium;
  std::vector<std::vector<std::string>> extra_keys;  // BlockStored, map layout: one tuple per block
};

struct VllmKvBatch {
  double ts = 0;
  int64_t data_parallel_rank = -1;
  std::vector<VllmKvEvent> events;
  std::string error;  // "" when the payload decodes
};

namespace vllm_kv_detail {

inline std::string hash_bytes(const msgpack::object& o, std::string& error) {
  if (o.type == msgpack::type::POSITIVE_INTEGER) {
    std::string out(8, '\0');
    for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<char>((o.via.u64 >> (56 - 8 * i)) & 0xff);
    return out;
  }
  if (o.type == msgpack::type::BIN) return std::string(o.via.bin.ptr, o.via.bin.size);
  error = "a block hash is neither an int nor bytes";
  return {};
}

inline bool is_str(const msgpack::object& o) { return o.type == msgpack::type::STR; }
inline std::string as_str(const msgpack::object& o) { return std::string(o.via.str.ptr, o.via.str.size); }
inline bool is_int(const msgpack::object& o) {
  return o.type == msgpack::type::POSITIVE_INTEGER || o.type == msgpack::type::NEGATIVE_INTEGER;
}

inline void hashes(const msgpack::object& o, std::vector<std::string>& out, std::string& error) {
  if (o.type != msgpack::type::ARRAY) {
    error = "block_hashes is not a list";
    return;
  }
  for (uint32_t i = 0; i < o.via.array.size; ++i) out.push_back(hash_bytes(o.via.array.ptr[i], error));
}

inline void tokens(const msgpack::object& o, std::vector<int64_t>& out, std::string& error) {
  if (o.type != msgpack::type::ARRAY) {
    error = "token_ids is not a list";
    return;
  }
  for (uint32_t i = 0; i < o.via.array.size; ++i) {
    if (!is_int(o.via.array.ptr[i])) error = "a token id is not an int";
    out.push_back(o.via.array.ptr[i].via.i64);
  }
}

// The event map `o` into `e`; sets `error` on anything vLLM's struct would not accept (or does not define).
inline void event_from_map(const msgpack::object& o, VllmKvEvent& e, std::string& error) {
  std::map<std::string, const msgpack::object*> f;
  for (uint32_t i = 0; i < o.via.map.size; ++i) {
    const msgpack::object_kv& kv = o.via.map.ptr[i];
    if (!is_str(kv.key)) {
      error = "an event key is not a string";
      return;
    }
    f[as_str(kv.key)] = &kv.val;
  }
  if (!f.count("type") || !is_str(*f["type"])) {
    error = "an event has no \"type\" tag";
    return;
  }
  e.type = as_str(*f["type"]);
  static const std::map<std::string, std::pair<std::set<std::string>, std::set<std::string>>> kStructs = {
      // type -> {required fields, fields with defaults}
      {"BlockStored",
       {{"block_hashes", "parent_block_hash", "token_ids", "block_size", "lora_id", "medium", "lora_name"},
        {"extra_keys", "group_idx", "kv_cache_spec_kind", "kv_cache_spec_sliding_window"}}},
      {"BlockRemoved", {{"block_hashes", "medium"}, {"group_idx"}}},
      {"AllBlocksCleared", {{}, {}}},
  };
  const auto it = kStructs.find(e.type);
  if (it == kStructs.end()) {
    error = "unknown event type " + e.type;
    return;
  }
  for (const std::string& name : it->second.first) {
    if (!f.count(name)) error = e.type + " lacks the field " + name;
  }
  for (const auto& [name, value] : f) {
    if (name != "type" && !it->second.first.count(name) && !it->second.second.count(name)) {
      error = e.type + " has no field " + name;
    }
  }
  if (!error.empty() || e.type == "AllBlocksCleared") return;
  hashes(*f["block_hashes"], e.hashes, error);
  const msgpack::object& medium = *f["medium"];
  if (!medium.is_nil() && !is_str(medium)) error = "medium is not a string";
  if (is_str(medium)) e.medium = as_str(medium);
  if (e.type != "BlockStored") return;
  if (!f["parent_block_hash"]->is_nil()) e.parent = hash_bytes(*f["parent_block_hash"], error);
  tokens(*f["token_ids"], e.tokens, error);
  if (!is_int(*f["block_size"])) error = "block_size is not an int";
  e.block_size = f["block_size"]->via.i64;
  if (!f["lora_id"]->is_nil() && !is_int(*f["lora_id"])) error = "lora_id is not an int";
  if (!f["lora_name"]->is_nil() && !is_str(*f["lora_name"])) error = "lora_name is not a string";
  if (f.count("extra_keys") && !f["extra_keys"]->is_nil()) {
    const msgpack::object& keys = *f["extra_keys"];
    if (keys.type != msgpack::type::ARRAY) {
      error = "extra_keys is not a list";
      return;
    }
    for (uint32_t i = 0; i < keys.via.array.size; ++i) {
      const msgpack::object& k = keys.via.array.ptr[i];
      std::vector<std::string> tuple;
      if (k.type == msgpack::type::ARRAY) {
        for (uint32_t j = 0; j < k.via.array.size; ++j) {
          tuple.push_back(is_str(k.via.array.ptr[j]) ? as_str(k.via.array.ptr[j]) : "<not a string>");
        }
      } else if (!k.is_nil()) {
        error = "an extra_keys entry is neither a tuple nor None";
      }
      e.extra_keys.push_back(std::move(tuple));
    }
    if (e.extra_keys.size() != e.hashes.size()) error = "extra_keys has not one entry per block";
  }
}

// The legacy array-like event `o` into `e`.
inline void event_from_array(const msgpack::object& o, VllmKvEvent& e, std::string& error) {
  const msgpack::object_array& a = o.via.array;
  if (a.size == 0 || !is_str(a.ptr[0])) {
    error = "an array event has no tag";
    return;
  }
  e.type = as_str(a.ptr[0]);
  if (e.type == "AllBlocksCleared") return;
  if (e.type == "BlockRemoved" && a.size >= 3) {
    hashes(a.ptr[1], e.hashes, error);
    if (is_str(a.ptr[2])) e.medium = as_str(a.ptr[2]);
    return;
  }
  if (e.type != "BlockStored" || a.size < 7) {
    error = "malformed array event " + e.type;
    return;
  }
  hashes(a.ptr[1], e.hashes, error);
  if (!a.ptr[2].is_nil()) e.parent = hash_bytes(a.ptr[2], error);
  tokens(a.ptr[3], e.tokens, error);
  e.block_size = a.ptr[4].via.i64;
  if (is_str(a.ptr[6])) e.medium = as_str(a.ptr[6]);
}

}  // namespace vllm_kv_detail

// Decodes one payload; `legacy` selects the array-like layout.
inline VllmKvBatch decode_vllm_kv_batch(const std::string& payload, bool legacy = false) {
  namespace d = vllm_kv_detail;
  VllmKvBatch out;
  msgpack::object_handle oh;
  try {
    oh = msgpack::unpack(payload.data(), payload.size());
  } catch (const std::exception& e) {
    out.error = std::string("not msgpack: ") + e.what();
    return out;
  }
  const msgpack::object& b = oh.get();
  const msgpack::object* ts = nullptr;
  const msgpack::object* events = nullptr;
  const msgpack::object* rank = nullptr;
  if (legacy) {
    if (b.type != msgpack::type::ARRAY || b.via.array.size < 2) {
      out.error = "the batch is not an array";
      return out;
    }
    ts = &b.via.array.ptr[0];
    events = &b.via.array.ptr[1];
    if (b.via.array.size > 2) rank = &b.via.array.ptr[2];
  } else {
    if (b.type != msgpack::type::MAP) {
      out.error = "Expected `object`, got `" + std::string(b.type == msgpack::type::ARRAY ? "array" : "other") + "`";
      return out;
    }
    for (uint32_t i = 0; i < b.via.map.size; ++i) {
      const msgpack::object_kv& kv = b.via.map.ptr[i];
      const std::string key = d::is_str(kv.key) ? d::as_str(kv.key) : "";
      if (key == "ts") {
        ts = &kv.val;
      } else if (key == "events") {
        events = &kv.val;
      } else if (key == "data_parallel_rank") {
        rank = &kv.val;
      } else {
        out.error = "the batch has no field " + key;
      }
    }
  }
  // msgspec takes an int for a float field (msgpack-c packs an integral double as an int).
  if (ts == nullptr || (ts->type != msgpack::type::FLOAT64 && ts->type != msgpack::type::FLOAT32 && !d::is_int(*ts))) {
    out.error = "ts is missing or not a float";
    return out;
  }
  out.ts = d::is_int(*ts) ? static_cast<double>(ts->via.i64) : ts->via.f64;
  if (rank != nullptr && !rank->is_nil()) out.data_parallel_rank = rank->via.i64;
  if (events == nullptr || events->type != msgpack::type::ARRAY) {
    out.error = "events is missing or not a list";
    return out;
  }
  for (uint32_t i = 0; i < events->via.array.size && out.error.empty(); ++i) {
    const msgpack::object& o = events->via.array.ptr[i];
    VllmKvEvent e;
    if (!legacy && o.type == msgpack::type::MAP) {
      d::event_from_map(o, e, out.error);
    } else if (legacy && o.type == msgpack::type::ARRAY) {
      d::event_from_array(o, e, out.error);
    } else {
      out.error = legacy ? "Expected `array`" : "Expected `object`, got `array`";
    }
    out.events.push_back(std::move(e));
  }
  return out;
}

}  // namespace preface::test
