// The disk tier: one file per block record (kv/tier_record.h) in a directory, named by its chain hash
// (DIR/ab/abcdef...64 hex.kvb), bounded in bytes with LRU eviction; it survives the process.
//
// Writes (TierQueue thread): encode, write DIR/tmp/<hash>.<pid>.<n>.tmp, rename over the final name (atomic: a
// reader sees the old record, the new one or none, never a partial file; a crash leaves at most a temp file, which
// the next start-up removes when older than an hour). Then the LRU index is updated and the least recently used
// files are unlinked until the directory holds at most max_bytes of records. No fsync: a record torn by a power
// loss fails its checksum and is rejected.
// Reads (engine thread): the index says whether a hash is present; the file is read and decode_record checks it
// against what the lookup expects; a rejected file is unlinked and counted by reason. A hit refreshes the file's
// mtime, so the LRU order survives a restart.
// Start-up: the directory is scanned (stat + header of each record; index ordered by mtime). Headers that do not
// parse, files whose name is not their hash or whose size is not the record's are unlinked and counted; records of
// another model (another model file's digest) are counted as other_model and kept (another server may share the
// directory), taking their place in the LRU.
// Events (set_event_sink): each record written is offered to the sink, and the removal of one it announced is
// reported; records found by the start-up scan are not announced.
#pragma once
#include <atomic>
#include <cstdint>
#include <list>
#include <mutex>
#include <string>
#include <unordered_map>

#include "kv/tier.h"
#include "kv/tier_queue.h"

namespace preface::kv {

struct DiskTierOptions {
  std::string dir;
  uint64_t max_bytes = 0;              // records kept on disk (LRU beyond)
  Compression compression = Compression::None;
  Digest model;                        // model_digest of the serving model: other models' records are foreign
  // The pool's KV format name (kernels::KvFormat::name): the model's records of other formats are counted at the
  // scan (RecordStatus::KvLayout) and kept; their namespaces differ, so lookups never reach them. Empty: not counted.
  std::string kv_type;
  std::shared_ptr<const RecordKey> key;  // records sealed and opened with it (kv/record_seal.h); null: unsealed
  size_t max_queue_bytes = 256u << 20;  // payload bytes waiting to be written
};

class DiskTier final : public KvTier {
 public:
  // Creates dir (and its tmp/) when missing and scans it. Throws preface::Error when it cannot be created or read.
  explicit DiskTier(DiskTierOptions options);
  ~DiskTier() override;

  const char* name() const override { return "disk"; }
  void set_event_sink(TierEventSink* sink) override { sink_.store(sink); }
  std::vector<std::vector<uint8_t>> fetch(std::span<const RecordMeta> expect) override;
  bool contains(const Digest& hash) const override;
  void offer(const RecordMeta& meta, std::shared_ptr<const std::vector<uint8_t>> payload) override;
  void flush(int timeout_ms) override { queue_.flush(timeout_ms); }
  void purge_namespace(const Digest& ns) override;
  TierStats stats() const override;

  std::string path_of(const Digest& hash) const;  // DIR/ab/<hex>.kvb

 private:
  struct Entry {
    std::list<Digest>::iterator lru;  // position in lru_ (front = least recently used)
    uint64_t bytes = 0;
    Digest ns;
    bool announced = false;  // the event sink announced it: its removal is reported
  };
  void scan();
  void write(const TierWrite& w);     // queue thread
  void add_locked(const Digest& hash, const Digest& ns, uint64_t bytes, bool announced = false);
  void remove_locked(Digest hash, bool unlink_file);  // hash by value: it may be an lru_ element it erases
  void evict_locked();
  void reject(const Digest& hash, RecordStatus status);

  DiskTierOptions opt_;
  std::atomic<TierEventSink*> sink_{nullptr};
  mutable std::mutex mu_;  // index and stats
  std::list<Digest> lru_;
  std::unordered_map<Digest, Entry, DigestHash> index_;
  uint64_t total_bytes_ = 0;
  TierStats stats_;
  uint64_t tmp_seq_ = 0;   // queue thread only
  TierQueue queue_;        // last: its thread runs write() on the members above
};

}  // namespace preface::kv
