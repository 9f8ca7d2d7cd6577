// The options of `preface serve` (cli/cmd_serve.cpp): what the command line sets before the server starts.
#pragma once
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli/options.h"
#include "cli/serve_kv_events.h"
#include "engine/kv_tiers.h"
#include "server/http/server.h"

namespace preface::cli {

struct ServeOptions {
  ModelOptions model;
  server::ServerOptions server;
  std::string kv_cache_mem;        // parse_bytes syntax; empty: sized from the model (engine::default_kv_cache_bytes)
  std::string state_cache_mem;     // parse_bytes syntax; empty: engine::EngineConfig::state_snapshot_bytes's default
  int32_t state_snapshot_interval = 2048;  // tokens; 0: no interval snapshots
  std::string max_body = "16MiB";  // parse_bytes syntax
  int32_t max_batch_tokens = 512;
  int32_t max_running = 64;
  bool no_prefix_cache = false;
  std::string kv_window_reclaim = "on";  // on | off
  std::string chat_template;       // empty: the GGUF's; a family name or a Jinja file
  std::string chat_template_file;  // a Jinja file (llama.cpp's --chat-template-file)
  std::vector<std::string> aliases;
  bool quiet = false;
  bool no_mmap = false;  // --no-mmap: read the model into memory
  std::string api_key;             // --api-key (or $PREFACE_API_KEY): one key, tenant "default"
  std::string api_key_file;        // --api-key-file: the key on the file's first line
  std::string api_keys_file;       // --api-keys: `key tenant` lines
  double cache_ttl_s = 0;          // 0: no expiry
  int32_t pin_budget_per_tenant = 0;  // blocks; 0: only the half-pool cap
  std::string metrics_key_file;    // --metrics-key-file: the metrics key on the file's first line
  std::string admin_key_file;      // --admin-key-file: the admin key on the file's first line
  std::vector<std::string> trusted_proxies;  // --trusted-proxy: CIDRs (checked by the parser)
  double drain_s = 20;             // --drain-seconds: how long SIGTERM waits for in-flight requests
  double verify_fraction = 0;      // --verify-fraction: share of cache hits recomputed cold and compared
  engine::TierConfig tiers;          // --cache-dir, --cache-redis (engine/kv_tiers.h)
  std::string cache_disk_size = "0";   // parse_bytes syntax; > 0 turns the disk tier on, in <cache dir>/kv
  std::string cache_redis_max_record = "4MiB";
  KvEventOptions kv_events;          // --kv-events-* (cli/serve_kv_events.h)
};

// Registers every option of `serve` on cmd, writing into opts (which must outlive cmd's parse).
void add_serve_options(CLI::App& cmd, ServeOptions& opts);

}  // namespace preface::cli
