// The shared tier on Redis (hiredis): the same records as the disk tier (kv/tier_record.h), one value per block
// under "preface:kv:v1:<namespace hex>:<chain hash hex>" with a TTL. Keys are rooted in the namespace digest, which
// carries the model fingerprint, KV type, block size, RoPE settings and tenant salt: a replica can only ask for
// keys of namespaces it serves, so tenants stay isolated across replicas.
//
// Two connections: the engine thread's for lookups (a chain is one pipelined round trip: GET per block, every reply
// read), the queue thread's for writes (SET key value PX ttl). Each has a socket timeout; a connection that fails
// (refused, timed out, protocol error) is dropped and retried after a backoff (100 ms doubling to 5 s for lookups,
// whose connect attempts cost the engine thread up to the timeout; to 500 ms for writes, on their own thread), and
// until then lookups miss at once and writes are dropped; once the writer's connection answers again, lookups
// retry at once rather than wait out their backoff: a Redis that is down, slow or full (an OOM error reply) costs
// counted errors and cache hits, never a request. rediss:// runs each connection over TLS (kv/redis_tls.h); a
// certificate that does not verify is a refused connection like any other (counted, retried, the tier down).
// A single Redis node (or one address a proxy or Sentinel keeps pointing at the primary): Redis Cluster's
// MOVED/ASK redirections are not followed.
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "kv/redis_tls.h"
#include "kv/tier.h"
#include "kv/tier_queue.h"

struct redisContext;

namespace preface::kv {

struct RedisTierOptions {
  std::string url;                     // redis://host:port[/db], or rediss:// (TLS)
  RedisTlsOptions tls;                 // rediss:// only: CA, client certificate (kv/redis_tls.h)
  int ttl_s = 3600;                    // 0: no expiry
  size_t max_record_bytes = 4u << 20;  // larger records are not stored (counted as dropped)
  int timeout_ms = 500;                // connect and per-reply socket timeout
  Compression compression = Compression::None;
  Digest model;
  std::shared_ptr<const RecordKey> key;  // records sealed and opened with it (kv/record_seal.h); null: unsealed
  size_t max_queue_bytes = 256u << 20;
};

struct RedisAddress {
  std::string host;
  int port = 6379;
  int db = 0;
  std::string user;      // empty: AUTH with the password alone (the `default` user)
  std::string password;  // empty: no AUTH
  bool tls = false;      // rediss://
};
// redis://[[user]:password@]host[:port][/db], or rediss:// for TLS; user and password may be percent-encoded (%40
// for '@').
// Throws preface::Error naming what is wrong with the URL, the password masked.
RedisAddress parse_redis_url(const std::string& url);
// The URL with its password replaced by "***", for every log line and error.
std::string redact_redis_url(const std::string& url);

std::string redis_key(const Digest& ns, const Digest& hash);

class RedisTier final : public KvTier {
 public:
  // Throws preface::Error on a malformed URL, and when the server answers but refuses the credentials (a wrong
  // password, or none where one is required): a start-up error. An unreachable server is a counted error,
  // retried later.
  explicit RedisTier(RedisTierOptions options);
  ~RedisTier() override;

  const char* name() const override { return "redis"; }
  std::vector<std::vector<uint8_t>> fetch(std::span<const RecordMeta> expect) override;
  bool contains(const Digest& hash) const override { return queue_.contains(hash); }
  void offer(const RecordMeta& meta, std::shared_ptr<const std::vector<uint8_t>> payload) override;
  void flush(int timeout_ms) override { queue_.flush(timeout_ms); }
  void purge_namespace(const Digest& ns) override;
  TierStats stats() const override;

 private:
  // One hiredis connection with reconnect backoff; used by one thread.
  class Connection {
   public:
    Connection(RedisTier& tier, const RedisAddress& addr, int timeout_ms, std::chrono::milliseconds max_backoff)
        : tier_(tier), addr_(addr), timeout_ms_(timeout_ms), max_backoff_(max_backoff) {}
    Connection(const Connection&) = delete;
    Connection& operator=(const Connection&) = delete;
    ~Connection();
    // The live context, connecting if the backoff allows; nullptr (error counted in *n_errors) otherwise. A failed
    // connection marks the tier down, a new one up (RedisTier::mark).
    redisContext* get(int64_t* n_errors);
    void drop();           // after an I/O error: the next get() waits for the backoff; marks the tier down
    void ok() { backoff_ = std::chrono::milliseconds(0); }
    void back_off(const std::string& why);  // marks the tier down; the next connection waits for the backoff

   private:
    RedisTier& tier_;
    RedisAddress addr_;
    int timeout_ms_;
    std::chrono::milliseconds max_backoff_;
    redisContext* ctx_ = nullptr;
    std::unique_ptr<RedisTlsLink> tls_;  // rediss://: the relay under ctx_ (destroyed after it)
    std::chrono::steady_clock::time_point retry_at_{};
    std::chrono::milliseconds backoff_{0};
  };
  void write(const TierWrite& w);  // queue thread
  void count(int64_t TierStats::*field, int64_t n = 1);
  // Sets stats_.up; on a change prints one line to stderr ("... is down (why) ..." / "... answers again").
  void mark(bool up, const std::string& why);
  bool up() const;

  RedisTierOptions opt_;
  RedisAddress addr_;
  Connection lookup_;     // engine thread
  Connection writer_;     // queue thread
  mutable std::mutex mu_;  // stats
  TierStats stats_;
  TierQueue queue_;       // last
};

}  // namespace preface::kv
