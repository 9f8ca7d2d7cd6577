#include "engine/kv_event_wire.h"

#include <msgpack.hpp>

namespace preface::engine {
namespace {

using Packer = msgpack::packer<msgpack::sbuffer>;

void pack_str(Packer& pk, const std::string& s) {
  pk.pack_str(static_cast<uint32_t>(s.size()));
  pk.pack_str_body(s.data(), static_cast<uint32_t>(s.size()));
}

void pack_hash(Packer& pk, const kv::Digest& d, KvEventHashFormat format) {
  if (format == KvEventHashFormat::Int) {
    pk.pack_uint64(kv_event_int_hash(d));
  } else {
    pk.pack_bin(static_cast<uint32_t>(d.bytes.size()));
    pk.pack_bin_body(reinterpret_cast<const char*>(d.bytes.data()), static_cast<uint32_t>(d.bytes.size()));
  }
}

// A run of records that encodes as one event: [begin, end) of the batch.
struct Group {
  size_t begin = 0, end = 0;
};

bool continues(const KvEventRecord& prev, const KvEventRecord& next) {
  using K = KvEventRecord::Kind;
  if (prev.kind != next.kind || prev.medium != next.medium) return false;
  if (next.kind == K::Removed) return true;
  if (next.kind == K::Stored) return !next.first_in_chain && next.parent == prev.hash;
  return false;  // Cleared: one event each
}

std::vector<Group> group(std::span<const KvEventRecord> records) {
  std::vector<Group> groups;
  for (size_t i = 0; i < records.size(); ++i) {
    if (!groups.empty() && continues(records[i - 1], records[i])) {
      groups.back().end = i + 1;
    } else {
      groups.push_back({i, i + 1});
    }
  }
  return groups;
}

const std::string& medium_of(const KvEventRecord& r, const KvEventWireConfig& c) {
  return r.medium.empty() ? c.medium : r.medium;
}

void pack_hashes(Packer& pk, std::span<const KvEventRecord> run, const KvEventWireConfig& c) {
  pk.pack_array(static_cast<uint32_t>(run.size()));
  for (const KvEventRecord& r : run) pack_hash(pk, r.hash, c.hash_format);
}

void pack_parent(Packer& pk, const KvEventRecord& first, const KvEventWireConfig& c) {
  if (first.first_in_chain) {
    pk.pack_nil();
  } else {
    pack_hash(pk, first.parent, c.hash_format);
  }
}

void pack_tokens(Packer& pk, std::span<const KvEventRecord> run) {
  size_t n_tokens = 0;
  for (const KvEventRecord& r : run) n_tokens += r.tokens.size();
  pk.pack_array(static_cast<uint32_t>(n_tokens));
  for (const KvEventRecord& r : run) {
    for (const int32_t t : r.tokens) pk.pack_int32(t);
  }
}

// vLLM's map layout: the "type" tag, then the struct's fields in declaration order.
void pack_group_map(Packer& pk, std::span<const KvEventRecord> run, const KvEventWireConfig& c) {
  using K = KvEventRecord::Kind;
  const KvEventRecord& first = run.front();
  switch (first.kind) {
    case K::Stored:
      pk.pack_map(9);
      pack_str(pk, "type");
      pack_str(pk, "BlockStored");
      pack_str(pk, "block_hashes");
      pack_hashes(pk, run, c);
      pack_str(pk, "parent_block_hash");
      pack_parent(pk, first, c);
      pack_str(pk, "token_ids");
      pack_tokens(pk, run);
      pack_str(pk, "block_size");
      pk.pack_int32(c.block_size);
      pack_str(pk, "lora_id");
      pk.pack_nil();
      pack_str(pk, "medium");
      pack_str(pk, medium_of(first, c));
      pack_str(pk, "lora_name");
      pk.pack_nil();
      pack_str(pk, "extra_keys");  // one tuple per block: its namespace
      pk.pack_array(static_cast<uint32_t>(run.size()));
      for (const KvEventRecord& r : run) {
        pk.pack_array(1);
        pack_str(pk, kv_event_namespace_key(r.root));
      }
      break;
    case K::Removed:
      pk.pack_map(3);
      pack_str(pk, "type");
      pack_str(pk, "BlockRemoved");
      pack_str(pk, "block_hashes");
      pack_hashes(pk, run, c);
      pack_str(pk, "medium");
      pack_str(pk, medium_of(first, c));
      break;
    case K::Cleared:
      pk.pack_map(1);
      pack_str(pk, "type");
      pack_str(pk, "AllBlocksCleared");
      break;
  }
}

// The legacy array layout: the class name, then the fields in order.
void pack_group_array(Packer& pk, std::span<const KvEventRecord> run, const KvEventWireConfig& c) {
  using K = KvEventRecord::Kind;
  const KvEventRecord& first = run.front();
  switch (first.kind) {
    case K::Stored:
      pk.pack_array(8);
      pack_str(pk, "BlockStored");
      pack_hashes(pk, run, c);
      pack_parent(pk, first, c);
      pack_tokens(pk, run);
      pk.pack_int32(c.block_size);
      pk.pack_nil();  // lora_id
      pack_str(pk, medium_of(first, c));
      pk.pack_nil();  // lora_name
      break;
    case K::Removed:
      pk.pack_array(3);
      pack_str(pk, "BlockRemoved");
      pack_hashes(pk, run, c);
      pack_str(pk, medium_of(first, c));
      break;
    case K::Cleared:
      pk.pack_array(1);
      pack_str(pk, "AllBlocksCleared");
      break;
  }
}

}  // namespace

uint64_t kv_event_int_hash(const kv::Digest& d) {
  uint64_t v = 0;
  for (size_t i = d.bytes.size() - 8; i < d.bytes.size(); ++i) v = (v << 8) | d.bytes[i];
  return v;
}

std::string kv_event_namespace_key(const kv::Digest& root) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "ns:";
  for (size_t i = 0; i < 16; ++i) {
    out += kHex[root.bytes[i] >> 4];
    out += kHex[root.bytes[i] & 15];
  }
  return out;
}

std::string encode_kv_event_batch(double ts, std::span<const KvEventRecord> records, const KvEventWireConfig& config) {
  msgpack::sbuffer buf;
  Packer pk(&buf);
  const std::vector<Group> groups = group(records);
  const bool maps = config.layout == KvEventLayout::Vllm;
  if (maps) {
    pk.pack_map(3);
    pack_str(pk, "ts");
  } else {
    pk.pack_array(3);
  }
  pk.pack_double(ts);
  if (maps) pack_str(pk, "events");
  pk.pack_array(static_cast<uint32_t>(groups.size()));
  for (const Group& g : groups) {
    const auto run = records.subspan(g.begin, g.end - g.begin);
    maps ? pack_group_map(pk, run, config) : pack_group_array(pk, run, config);
  }
  if (maps) pack_str(pk, "data_parallel_rank");
  pk.pack_int32(0);  // one engine per process
  return {buf.data(), buf.size()};
}

}  // namespace preface::engine
