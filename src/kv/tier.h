// A cache tier below RAM: a store of block records (kv/tier_record.h) keyed by chain hash, written asynchronously
// and read synchronously by the engine thread. Implementations: kv/disk_tier.h (a directory), kv/redis_tier.h.
//
// Threading: fetch() and offer() are called from one thread (the engine's); stats() from any thread. Writes go
// through a bounded queue drained by the tier's own thread: offer() never blocks on I/O; a full queue drops the
// record (counted). A tier that fails (I/O error, server down) counts the error and answers misses; it never
// throws into the engine.
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kv/hash.h"
#include "kv/tier_record.h"

namespace preface::kv {

struct TierStats {
  std::string name;                  // "disk" | "redis"
  int64_t n_lookup_blocks = 0;       // blocks asked for by fetch()
  int64_t n_hit_blocks = 0;          // blocks returned (valid records)
  int64_t n_miss_blocks = 0;         // blocks asked for and not returned (absent, rejected, or after the first gap)
  int64_t n_read_bytes = 0;          // record bytes read by fetch()
  int64_t n_written_bytes = 0;       // record bytes stored
  int64_t n_written_records = 0;
  int64_t n_dropped_writes = 0;      // offers dropped: queue full, tier unavailable, record over the size cap
  int64_t n_errors = 0;              // I/O or server errors (each degrades to a miss or a dropped write)
  int64_t n_fetches = 0;             // fetch() calls that returned at least one block
  double fetch_seconds = 0;          // time spent in those fetch() calls
  int64_t n_records = 0;             // records held now (disk: indexed files; redis: -1, unknown)
  int64_t n_stored_bytes = 0;        // bytes held now (disk), -1 when unknown
  std::array<int64_t, kRecordStatusCount> n_rejected{};  // records refused, by RecordStatus (index Ok unused)
  // 1 while the tier answers (disk: always); 0 from a failed connection or command until one succeeds (redis).
  int up = 1;
};

// Told when a tier's own store gains or loses a block record, for KV events (engine/kv_event_publisher.h). Called
// on the tier's threads, under its lock: it must not call back into the tier.
class TierEventSink {
 public:
  virtual ~TierEventSink() = default;
  // A record was stored; returns whether it was announced (a removal is then reported too).
  virtual bool on_tier_stored(const char* tier, const RecordMeta& meta) = 0;
  // An announced record left the tier (evicted past its size, purged, rejected).
  virtual void on_tier_removed(const char* tier, const Digest& hash) = 0;
};

class KvTier {
 public:
  virtual ~KvTier() = default;
  virtual const char* name() const = 0;
  // Valid records for expect[0], expect[1], ... in order, stopping at the first block that is absent or rejected
  // (a chain is only usable up to its first gap): payloads[i] is the decompressed payload of expect[i].
  virtual std::vector<std::vector<uint8_t>> fetch(std::span<const RecordMeta> expect) = 0;
  // True when the tier holds (or has queued) a record under this hash; a hint to skip a redundant write.
  virtual bool contains(const Digest& hash) const = 0;
  // Queues meta + payload for writing (the tier encodes it on its own thread). Never blocks on I/O.
  virtual void offer(const RecordMeta& meta, std::shared_ptr<const std::vector<uint8_t>> payload) = 0;
  // Waits until every queued record is written or dropped, at most `timeout_ms`.
  virtual void flush(int timeout_ms) = 0;
  // Removes every record of namespace root `ns` that this tier can find (a purge; best effort).
  virtual void purge_namespace(const Digest& ns) = 0;
  virtual TierStats stats() const = 0;
  // Reports the records this process stores and removes from now on (a tier whose store is this replica's own; a
  // shared tier such as Redis reports nothing: what it holds is no one replica's). Set before the first offer().
  virtual void set_event_sink(TierEventSink* /*sink*/) {}
};

}  // namespace preface::kv
