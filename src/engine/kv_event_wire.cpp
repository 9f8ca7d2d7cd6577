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
  if (prev.kind != next.kind) return false;
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

void pack_group(Packer& pk, std::span<const KvEventRecord> run, const KvEventWireConfig& c) {
  using K = KvEventRecord::Kind;
  const KvEventRecord& first = run.front();
  switch (first.kind) {
    case K::Stored: {
      pk.pack_array(8);
      pack_str(pk, "BlockStored");
      pk.pack_array(static_cast<uint32_t>(run.size()));
      for (const KvEventRecord& r : run) pack_hash(pk, r.hash, c.hash_format);
      if (first.first_in_chain) {
        pk.pack_nil();
      } else {
        pack_hash(pk, first.parent, c.hash_format);
      }
      size_t n_tokens = 0;
      for (const KvEventRecord& r : run) n_tokens += r.tokens.size();
      pk.pack_array(static_cast<uint32_t>(n_tokens));
      for (const KvEventRecord& r : run) {
        for (const int32_t t : r.tokens) pk.pack_int32(t);
      }
      pk.pack_int32(c.block_size);
      pk.pack_nil();  // lora_id
      pack_str(pk, c.medium);
      pk.pack_nil();  // lora_name
      break;
    }
    case K::Removed:
      pk.pack_array(3);
      pack_str(pk, "BlockRemoved");
      pk.pack_array(static_cast<uint32_t>(run.size()));
      for (const KvEventRecord& r : run) pack_hash(pk, r.hash, c.hash_format);
      pack_str(pk, c.medium);
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

std::string encode_kv_event_batch(double ts, std::span<const KvEventRecord> records, const KvEventWireConfig& config) {
  msgpack::sbuffer buf;
  Packer pk(&buf);
  const std::vector<Group> groups = group(records);
  pk.pack_array(3);
  pk.pack_double(ts);
  pk.pack_array(static_cast<uint32_t>(groups.size()));
  for (const Group& g : groups) pack_group(pk, records.subspan(g.begin, g.end - g.begin), config);
  pk.pack_int32(0);  // data_parallel_rank: one engine per process
  return {buf.data(), buf.size()};
}

}  // namespace preface::engine
