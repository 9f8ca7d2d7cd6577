// The write side shared by the tiers: a queue bounded in bytes, drained by one thread that runs the tier's write
// function on each item. Records waiting in it can still be read (pending), so a block evicted a moment ago is a
// hit before its write lands. push() never blocks: when the queue is full the item is refused (the caller counts a
// drop).
#pragma once
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <vector>

#include "kv/tier_record.h"

namespace preface::kv {

struct TierWrite {
  RecordMeta meta;                                    // the record to write (unused for a purge)
  std::shared_ptr<const std::vector<uint8_t>> payload;  // [meta.payload_bytes]; null for a purge
  std::optional<Digest> purge_ns;                     // set: remove the records of this namespace instead
};

class TierQueue {
 public:
  // `write` runs on the queue's thread, one item at a time, in push order; it must not throw.
  TierQueue(size_t max_bytes, std::function<void(const TierWrite&)> write);
  ~TierQueue();  // stop()
  TierQueue(const TierQueue&) = delete;
  TierQueue& operator=(const TierQueue&) = delete;

  // False (nothing queued) when the queue holds max_bytes already or is stopped.
  bool push(TierWrite item);
  // The payload queued (or being written) under hash, with its meta; null when none.
  std::shared_ptr<const std::vector<uint8_t>> pending(const Digest& hash, RecordMeta* meta) const;
  bool contains(const Digest& hash) const;
  // Drops every queued record of namespace ns (a purge: what was offered before it must not land after it) and
  // waits for a record of ns being written right now to land, so the caller's purge then sees it. Returns how
  // many queued records it dropped.
  size_t drop_namespace(const Digest& ns);
  // Waits until the queue is empty and idle, at most timeout_ms. True when it is.
  bool flush(int timeout_ms);
  // Writes nothing more: drops what is queued, waits for the item being written, joins the thread.
  void stop();

 private:
  void run();

  size_t max_bytes_;
  std::function<void(const TierWrite&)> write_;
  mutable std::mutex mu_;
  std::condition_variable cv_;       // work arrived or stopping
  std::condition_variable idle_cv_;  // queue drained
  std::condition_variable done_cv_;  // an item finished
  std::deque<std::shared_ptr<TierWrite>> queue_;
  std::unordered_map<Digest, std::shared_ptr<TierWrite>, DigestHash> pending_;  // queued or in progress, by hash
  size_t queued_bytes_ = 0;
  bool busy_ = false;
  std::shared_ptr<TierWrite> current_;  // the item being written (busy_), else null
  bool stopping_ = false;
  std::thread thread_;  // last: starts once the members above exist
};

}  // namespace preface::kv
