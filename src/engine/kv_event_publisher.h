// Publishes the block pool's events (kv/block_events.h) over ZeroMQ in vLLM's shape (engine/kv_event_wire.h), so
// cache-aware routers built for vLLM (Dynamo's KV router, SGLang's gateway, llm-d's indexer) can route to preface:
// `serve --kv-events-endpoint tcp://*:5557`.
//
// Wire: a PUB socket; each message is the multipart [topic, seq, payload], seq the batch number (0, 1, ...) as
// 8 bytes big-endian, payload one KVEventBatch. As in vLLM, the endpoint is bound when it holds '*' or "::" or is
// ipc:// or inproc://, and connected to otherwise (so a `tcp://HOST:PORT` names a collector's SUB/XSUB socket).
//
// Replay (optional, as vLLM's ZmqEventPublisher): a ROUTER socket bound at replay_endpoint keeps the last
// replay_buffer_batches messages; a client (a DEALER or REQ socket) sends [empty, start_seq (8 bytes big-endian)]
// and receives every buffered [empty, seq, payload] with seq >= start_seq in order, then [empty, -1 as 8 bytes,
// empty]. A consumer that sees a gap in seq, or joins late, asks for what it missed; the batch at seq 0 holds the
// start-up AllBlocksCleared while the buffer still reaches back to it. Malformed requests are ignored and counted.
//
// Tier events (kv::TierEventSink): a block record written to this replica's disk tier -> BlockStored with medium
// config.tier_medium ("CPU": vLLM's offloading connector names its tier below the GPU so, and routers weigh it
// below the compute tier), its removal -> BlockRemoved of that medium; state snapshot records are not announced.
// These arrive on the tier's thread; they take no part in the AllBlocksCleared count below.
//
// Mapping: Registered -> BlockStored; Evicted, Expired, Purged -> BlockRemoved; all_blocks_cleared() (the server
// calls it at start-up: a restarted replica holds nothing) -> AllBlocksCleared. A purge (DELETE /v1/cache) that
// leaves no block registered is followed by an AllBlocksCleared too: a consumer may take it as a point where its
// view of this replica is exactly empty. (The pool emits exactly one removal per registration, so the count of
// registered blocks is known here, provided the publisher was subscribed before the first registration.)
//
// The engine never waits on the network: on_block_event copies the event into a bounded queue under a mutex
// (O(block_size)) and returns; a publisher thread, the only one that touches the socket, takes everything queued,
// encodes it as one batch and sends it (a PUB socket drops at its high-water mark rather than block). Records that
// find the queue full are dropped and counted (stats().n_dropped): a consumer then misses them, as it misses
// messages a PUB socket drops, and should resynchronise as it would after a restart. Batches of one wake-up follow
// the pool's order; the sequence number has no gaps of its own making.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/kv_event_wire.h"
#include "kv/block_events.h"
#include "kv/tier.h"

namespace preface::engine {

struct KvEventPublisherConfig {
  std::string endpoint;                // e.g. "tcp://*:5557" (bind) or "tcp://collector:5557" (connect)
  std::string topic;                   // the first frame of every message ("" as vLLM's default)
  KvEventWireConfig wire;
  size_t max_queued_records = 100000;  // the queue's bound: past it records are dropped
  size_t max_batch_records = 8192;     // one message holds at most this many records
  int send_hwm = 100000;               // ZMQ_SNDHWM of the PUB socket, in messages
  std::string replay_endpoint;         // "" = no replay socket; else a ROUTER socket bound there
  size_t replay_buffer_batches = 10000;  // messages kept for replay (the oldest dropped first)
  std::string tier_medium = "CPU";     // the medium of the disk tier's events
};

class KvEventPublisher final : public kv::BlockEventSink, public kv::TierEventSink {
 public:
  // Opens the socket (on the publisher thread) and binds or connects it. Throws preface::Error when ZeroMQ refuses
  // the endpoint (malformed, port taken).
  explicit KvEventPublisher(KvEventPublisherConfig config);
  // Sends what is still queued, then closes the socket, giving queued messages up to a second to leave.
  ~KvEventPublisher() override;
  KvEventPublisher(const KvEventPublisher&) = delete;
  KvEventPublisher& operator=(const KvEventPublisher&) = delete;

  void on_block_event(const kv::BlockEvent& event) override;  // never blocks on I/O
  bool on_tier_stored(const char* tier, const kv::RecordMeta& meta) override;
  void on_tier_removed(const char* tier, const kv::Digest& hash) override;
  void all_blocks_cleared();                                  // queues one AllBlocksCleared

  // The bound endpoint with a wildcard port resolved (ZMQ_LAST_ENDPOINT, e.g. "tcp://0.0.0.0:40123"), or the
  // configured one when connecting.
  const std::string& endpoint() const { return endpoint_; }
  // The replay socket's bound endpoint, a wildcard port resolved ("" without one).
  const std::string& replay_endpoint() const { return replay_endpoint_; }

  struct Stats {
    uint64_t n_records = 0;        // records queued
    uint64_t n_dropped = 0;        // records dropped (queue full)
    uint64_t n_batches = 0;        // messages sent
    uint64_t n_send_failures = 0;  // messages ZeroMQ refused
    uint64_t n_replays = 0;        // replay requests answered
    uint64_t n_bad_replays = 0;    // replay requests ignored (not [identity, empty, 8-byte seq])
  };
  Stats stats() const;

 private:
  void push(KvEventRecord record);
  void run();  // the publisher thread

  KvEventPublisherConfig config_;
  int64_t n_live_ = 0;                // registered blocks (registrations - removals), on the engine thread
  std::string endpoint_;
  std::string replay_endpoint_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<KvEventRecord> queue_;  // under mu_
  bool stopping_ = false;             // under mu_
  Stats stats_;                       // under mu_
  std::string open_error_;            // set by the thread before ready_
  bool ready_ = false;                // under mu_: the socket is open (or failed: open_error_)
  std::thread thread_;
};

}  // namespace preface::engine
