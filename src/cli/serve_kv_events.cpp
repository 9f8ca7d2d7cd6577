#include "cli/serve_kv_events.h"

#include <cstdio>

#include "util/error.h"

namespace preface::cli {

void add_kv_event_options(CLI::App& cmd, KvEventOptions& opts) {
  cmd.add_option("--kv-events-endpoint", opts.endpoint,
                 "Publish KV cache events (vLLM's BlockStored/BlockRemoved/AllBlocksCleared, msgpack over a ZeroMQ "
                 "PUB socket) for cache-aware routers: tcp://*:5557 binds (every interface: the events carry every "
                 "tenant's prompt token ids), tcp://HOST:PORT connects to a collector (default: none)");
  cmd.add_option("--kv-events-topic", opts.topic, "Topic frame of every KV event message")->capture_default_str();
  cmd.add_option("--kv-events-format", opts.format,
                 "KV event layout: vllm (vLLM since June 2026: maps tagged by \"type\", with per-tenant extra_keys) "
                 "or vllm-legacy (the array-like events of older vLLM and of consumers built for them)")
      ->check(CLI::IsMember({"vllm", "vllm-legacy"}))
      ->capture_default_str();
  cmd.add_option("--kv-events-replay-endpoint", opts.replay_endpoint,
                 "Bind a ZeroMQ ROUTER socket here (e.g. tcp://*:5558) from which a subscriber that missed messages "
                 "asks for the buffered ones from a sequence number on (vLLM's replay protocol)");
  cmd.add_option("--kv-events-replay-buffer", opts.replay_buffer, "KV event messages kept for replay")
      ->check(CLI::Range(size_t{1}, size_t{1} << 24))
      ->capture_default_str();
  cmd.add_option("--kv-events-hash-format", opts.hash_format,
                 "Block hashes in KV events: int (the SHA-256 digest's low 64 bits, as vLLM's "
                 "VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES) or bytes (the 32-byte digest)")
      ->check(CLI::IsMember({"int", "bytes"}))
      ->capture_default_str();
  cmd.add_option("--kv-events-medium", opts.medium,
                 "The `medium` of KV events (vLLM's name for the tier a request computes in is GPU)")
      ->capture_default_str();
  cmd.add_option("--kv-events-disk-medium", opts.disk_medium,
                 "The `medium` of the disk tier's KV events (blocks written to and removed from --cache-dir's kv/); "
                 "CPU is what vLLM's offloading connector calls the tier below the compute one")
      ->capture_default_str();
  cmd.add_option("--kv-events-queue", opts.max_queued,
                 "KV event records waiting for the publisher thread at most; more are dropped and counted")
      ->check(CLI::Range(size_t{1}, size_t{1} << 24))
      ->capture_default_str();
}

std::unique_ptr<engine::KvEventPublisher> open_kv_event_publisher(const KvEventOptions& opts, int32_t block_size) {
  if (opts.endpoint.empty()) return nullptr;
  engine::KvEventPublisherConfig config;
  config.endpoint = opts.endpoint;
  config.topic = opts.topic;
  config.max_queued_records = opts.max_queued;
  config.wire.block_size = block_size;
  config.wire.layout = opts.format == "vllm-legacy" ? engine::KvEventLayout::VllmLegacy : engine::KvEventLayout::Vllm;
  config.replay_endpoint = opts.replay_endpoint;
  config.replay_buffer_batches = opts.replay_buffer;
  config.wire.medium = opts.medium;
  config.tier_medium = opts.disk_medium;
  config.wire.hash_format =
      opts.hash_format == "bytes" ? engine::KvEventHashFormat::Bytes : engine::KvEventHashFormat::Int;
  auto publisher = std::make_unique<engine::KvEventPublisher>(config);
  std::fprintf(stderr, "preface: KV events on %s (topic '%s', %s layout, %s block hashes%s%s)\n",
               publisher->endpoint().c_str(), opts.topic.c_str(), opts.format.c_str(), opts.hash_format.c_str(),
               publisher->replay_endpoint().empty() ? "" : ", replay on ", publisher->replay_endpoint().c_str());
  if (opts.endpoint.starts_with("tcp://*") || opts.endpoint.starts_with("tcp://0.0.0.0") ||
      opts.endpoint.find("::") != std::string::npos) {
    std::fprintf(stderr,
                 "preface: warning: KV events are published on every interface: anyone who can reach the port "
                 "subscribes to every tenant's prompt token ids; publish on a private network only\n");
  }
  return publisher;
}

void report_kv_events(const engine::KvEventPublisher& publisher) {
  const auto st = publisher.stats();
  std::fprintf(stderr,
               "preface: KV events: %llu records in %llu messages, %llu dropped, %llu send failures, %llu replays\n",
               static_cast<unsigned long long>(st.n_records), static_cast<unsigned long long>(st.n_batches),
               static_cast<unsigned long long>(st.n_dropped), static_cast<unsigned long long>(st.n_send_failures),
               static_cast<unsigned long long>(st.n_replays));
}

}  // namespace preface::cli
