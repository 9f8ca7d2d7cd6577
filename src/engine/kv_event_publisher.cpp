#include "engine/kv_event_publisher.h"

#include <zmq.hpp>

#include <zmq_addon.hpp>

#include <array>
#include <chrono>
#include <deque>
#include <iterator>

#include "util/error.h"

namespace preface::engine {
namespace {

// vLLM's heuristic (ZmqEventPublisher._socket_setup): a stable, wildcard or local endpoint is bound; a host name
// is a collector's to connect to.
bool binds(const std::string& endpoint) {
  return endpoint.find('*') != std::string::npos || endpoint.find("::") != std::string::npos ||
         endpoint.rfind("ipc://", 0) == 0 || endpoint.rfind("inproc://", 0) == 0;
}

std::array<uint8_t, 8> big_endian(uint64_t v) {
  std::array<uint8_t, 8> out{};
  for (int i = 7; i >= 0; --i, v >>= 8) out[static_cast<size_t>(i)] = static_cast<uint8_t>(v & 0xff);
  return out;
}

constexpr std::chrono::milliseconds kReplayPoll{20};  // how long a replay request may wait while nothing is queued

double unix_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// Answers every replay request waiting on `replay` from `sent`; returns {answered, ignored as malformed}.
std::pair<uint64_t, uint64_t> serve_replays(zmq::socket_t& replay,
                                            const std::deque<std::pair<uint64_t, std::string>>& sent) {
  uint64_t n_answered = 0, n_bad = 0;
  for (;;) {
    std::vector<zmq::message_t> frames;
    try {
      if (!zmq::recv_multipart(replay, std::back_inserter(frames), zmq::recv_flags::dontwait)) break;
    } catch (const zmq::error_t&) {
      break;
    }
    if (frames.size() != 3 || frames[1].size() != 0 || frames[2].size() != 8) {
      ++n_bad;
      continue;
    }
    uint64_t start = 0;
    for (size_t i = 0; i < 8; ++i) start = (start << 8) | frames[2].data<uint8_t>()[i];
    const std::string client(frames[0].data<char>(), frames[0].size());
    try {
      for (const auto& [seq, payload] : sent) {
        if (seq < start) continue;
        const auto seq_bytes = big_endian(seq);
        replay.send(zmq::buffer(client), zmq::send_flags::sndmore);
        replay.send(zmq::const_buffer(nullptr, 0), zmq::send_flags::sndmore);
        replay.send(zmq::const_buffer(seq_bytes.data(), seq_bytes.size()), zmq::send_flags::sndmore);
        replay.send(zmq::buffer(payload), zmq::send_flags::none);
      }
      const auto end = big_endian(~uint64_t{0});  // -1: the end of the replay
      replay.send(zmq::buffer(client), zmq::send_flags::sndmore);
      replay.send(zmq::const_buffer(nullptr, 0), zmq::send_flags::sndmore);
      replay.send(zmq::const_buffer(end.data(), end.size()), zmq::send_flags::sndmore);
      replay.send(zmq::const_buffer(nullptr, 0), zmq::send_flags::none);
    } catch (const zmq::error_t&) {  // the client went away: nothing to answer
    }
    ++n_answered;
  }
  return {n_answered, n_bad};
}

}  // namespace

KvEventPublisher::KvEventPublisher(KvEventPublisherConfig config) : config_(std::move(config)) {
  if (config_.endpoint.empty()) throw Error("the KV event endpoint is empty");
  thread_ = std::thread([this] { run(); });
  std::unique_lock lock(mu_);
  cv_.wait(lock, [this] { return ready_; });
  if (!open_error_.empty()) {
    lock.unlock();
    thread_.join();
    throw Error("KV events: cannot open " + config_.endpoint + ": " + open_error_);
  }
}

KvEventPublisher::~KvEventPublisher() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void KvEventPublisher::push(KvEventRecord record) {
  {
    std::lock_guard lock(mu_);
    if (queue_.size() >= config_.max_queued_records) {
      ++stats_.n_dropped;
      return;
    }
    queue_.push_back(std::move(record));
    ++stats_.n_records;
  }
  cv_.notify_one();
}

void KvEventPublisher::on_block_event(const kv::BlockEvent& e) {
  KvEventRecord r;
  r.hash = e.hash;
  if (e.kind == kv::BlockEventKind::Registered) {
    r.kind = KvEventRecord::Kind::Stored;
    r.parent = e.parent_hash;
    r.first_in_chain = e.parent_hash == e.root;
    r.root = e.root;
    r.tokens.assign(e.tokens.begin(), e.tokens.end());
  } else {
    r.kind = KvEventRecord::Kind::Removed;
  }
  n_live_ += r.kind == KvEventRecord::Kind::Stored ? 1 : -1;
  push(std::move(r));
  if (e.kind == kv::BlockEventKind::Purged && n_live_ == 0) all_blocks_cleared();
}

bool KvEventPublisher::on_tier_stored(const char* /*tier*/, const kv::RecordMeta& meta) {
  if (meta.kv_type == "state") return false;  // a recurrent-state snapshot is no block (docs/deploy.md)
  KvEventRecord r;
  r.kind = KvEventRecord::Kind::Stored;
  r.hash = meta.hash;
  r.parent = meta.parent;
  r.first_in_chain = meta.parent == meta.ns;
  r.root = meta.ns;
  r.tokens = meta.tokens;
  r.medium = config_.tier_medium;
  push(std::move(r));
  return true;
}

void KvEventPublisher::on_tier_removed(const char* /*tier*/, const kv::Digest& hash) {
  KvEventRecord r;
  r.kind = KvEventRecord::Kind::Removed;
  r.hash = hash;
  r.medium = config_.tier_medium;
  push(std::move(r));
}

void KvEventPublisher::all_blocks_cleared() {
  KvEventRecord r;
  r.kind = KvEventRecord::Kind::Cleared;
  push(std::move(r));
}

KvEventPublisher::Stats KvEventPublisher::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

void KvEventPublisher::run() {
  // The context and the socket live and die on this thread (ZeroMQ sockets are not thread-safe).
  zmq::context_t ctx(1);
  zmq::socket_t pub;
  zmq::socket_t replay;
  try {
    if (!config_.replay_endpoint.empty()) {
      replay = zmq::socket_t(ctx, zmq::socket_type::router);
      replay.set(zmq::sockopt::linger, 0);
      replay.bind(config_.replay_endpoint);
      replay_endpoint_ = replay.get(zmq::sockopt::last_endpoint);
    }
    pub = zmq::socket_t(ctx, zmq::socket_type::pub);
    pub.set(zmq::sockopt::sndhwm, config_.send_hwm);
    pub.set(zmq::sockopt::linger, 1000);  // ms a closing socket may still spend sending
    if (binds(config_.endpoint)) {
      pub.bind(config_.endpoint);
      endpoint_ = pub.get(zmq::sockopt::last_endpoint);
    } else {
      pub.connect(config_.endpoint);
      endpoint_ = config_.endpoint;
    }
  } catch (const zmq::error_t& e) {
    std::lock_guard lock(mu_);
    open_error_ = e.what();
    ready_ = true;
    cv_.notify_all();
    return;
  }
  {
    std::lock_guard lock(mu_);
    ready_ = true;
  }
  cv_.notify_all();

  uint64_t seq = 0;
  std::vector<KvEventRecord> batch;
  std::deque<std::pair<uint64_t, std::string>> sent;  // (seq, payload) kept for replay
  const bool replaying = static_cast<bool>(replay);
  for (;;) {
    bool stop;
    {
      std::unique_lock lock(mu_);
      const auto ready = [this] { return stopping_ || !queue_.empty(); };
      if (replaying) {
        cv_.wait_for(lock, kReplayPoll, ready);  // wakes to look at the replay socket too
      } else {
        cv_.wait(lock, ready);
      }
      stop = stopping_;
      batch.swap(queue_);
    }
    for (size_t begin = 0; begin < batch.size(); begin += config_.max_batch_records) {
      const size_t n = std::min(config_.max_batch_records, batch.size() - begin);
      std::string payload = encode_kv_event_batch(unix_seconds(), std::span(batch).subspan(begin, n), config_.wire);
      const auto seq_bytes = big_endian(seq);
      bool ok = true;
      try {
        ok = pub.send(zmq::buffer(config_.topic), zmq::send_flags::sndmore).has_value() &&
             pub.send(zmq::const_buffer(seq_bytes.data(), seq_bytes.size()), zmq::send_flags::sndmore).has_value() &&
             pub.send(zmq::buffer(payload), zmq::send_flags::none).has_value();
      } catch (const zmq::error_t&) {
        ok = false;
      }
      if (replaying && config_.replay_buffer_batches > 0) {
        if (sent.size() >= config_.replay_buffer_batches) sent.pop_front();
        sent.emplace_back(seq, std::move(payload));
      }
      ++seq;
      std::lock_guard lock(mu_);
      ++(ok ? stats_.n_batches : stats_.n_send_failures);
    }
    batch.clear();
    if (replaying) {
      const auto [n_answered, n_bad] = serve_replays(replay, sent);
      if (n_answered + n_bad > 0) {
        std::lock_guard lock(mu_);
        stats_.n_replays += n_answered;
        stats_.n_bad_replays += n_bad;
      }
    }
    if (stop) {
      std::lock_guard lock(mu_);
      if (queue_.empty()) break;
    }
  }
  if (replaying) replay.close();
  pub.close();  // lingers up to 1 s for what is still in flight
}

}  // namespace preface::engine
