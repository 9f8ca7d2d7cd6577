// `serve --kv-events-endpoint ...`: the options of the KV cache event publisher (engine/kv_event_publisher.h) and
// opening it, kept beside cmd_serve.cpp so that file stays about serving.
#pragma once
#include <CLI/CLI.hpp>

#include <cstdint>
#include <memory>
#include <string>

#include "engine/kv_event_publisher.h"

namespace preface::cli {

struct KvEventOptions {
  std::string endpoint;             // empty: no events
  std::string topic;                // the first frame of every message
  std::string hash_format = "int";  // "int" | "bytes" (engine::KvEventHashFormat)
  std::string format = "vllm";      // "vllm" | "vllm-legacy" (engine::KvEventLayout)
  std::string replay_endpoint;      // empty: no replay socket
  size_t replay_buffer = 10000;     // batches kept for replay
  std::string medium = "GPU";       // BlockStored/BlockRemoved's medium
  std::string disk_medium = "CPU";  // the disk tier's events' medium
  size_t max_queued = 100000;       // records queued for the publisher thread; more are dropped
};

// Adds --kv-events-endpoint, --kv-events-topic, --kv-events-format, --kv-events-hash-format, --kv-events-medium,
// --kv-events-queue, --kv-events-replay-endpoint, --kv-events-replay-buffer, --kv-events-disk-medium.
void add_kv_event_options(CLI::App& cmd, KvEventOptions& opts);

// The publisher, bound or connected (null when no endpoint is given); announces itself on stderr with the endpoint
// it bound (a wildcard port resolved) as "preface: KV events on ENDPOINT ...". Throws preface::Error when ZeroMQ
// refuses the endpoint.
std::unique_ptr<engine::KvEventPublisher> open_kv_event_publisher(const KvEventOptions& opts, int32_t block_size);

// One stderr line with the publisher's counters (records, messages, drops, send failures), at shutdown.
void report_kv_events(const engine::KvEventPublisher& publisher);

}  // namespace preface::cli
