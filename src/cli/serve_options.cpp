// `preface serve`'s command line: every option, its help text, its range.
#include "cli/serve_options.h"

#include "chat/chat_template.h"

namespace preface::cli {

void add_serve_options(CLI::App& cmd, ServeOptions& opts) {
  add_model_options(cmd, opts.model);
  server::ServerOptions& s = opts.server;
  cmd.add_option("--host", s.host, "Address to listen on")->capture_default_str();
  cmd.add_option("--port", s.port, "Port to listen on (0: any free port)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  cmd.add_option("--state-cache-mem", opts.state_cache_mem,
                 "Models with recurrent layers (qwen35): memory for recurrent-state snapshots, where prefix hits "
                 "resume, e.g. 512MiB (default: 256 MiB)");
  cmd.add_option("--state-snapshot-interval", opts.state_snapshot_interval,
                 "Models with recurrent layers (qwen35): also snapshot the state every this many prompt tokens, so a "
                 "prompt edited past one recomputes at most this many (0: only at breakpoints, prompt and reply ends "
                 "and junctions)")
      ->check(CLI::Range(0, 1 << 24))
      ->capture_default_str();
  cmd.add_option("--kv-cache-mem", opts.kv_cache_mem,
                 "KV cache budget, e.g. 2GiB or 512MB (default: --max-running sequences of the full context, at most "
                 "25% of available memory and 8 GiB)");
  cmd.add_option("--max-batch-tokens", opts.max_batch_tokens, "Tokens per engine step")
      ->check(CLI::Range(1, 1 << 16))
      ->capture_default_str();
  cmd.add_option("--max-running", opts.max_running, "Sequences decoding at once")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  cmd.add_flag("--no-prefix-cache", opts.no_prefix_cache, "Disable prefix caching (every prompt is computed)");
  cmd.add_option("--kv-window-reclaim", opts.kv_window_reclaim,
                 "Models with sliding-window and global layers: keep only the window of the windowed layers' rows per "
                 "sequence (what leaves stays cached until evicted): on or off (off with the cache tiers)")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  cmd.add_option("--chat-template", opts.chat_template,
                 "Chat template overriding the model's: a Jinja file (or a JSON file with a \"chat_template\" or "
                 "\"template\" string), or a built-in family (" +
                     chat::chat_template_names() + ")");
  cmd.add_option("--chat-template-file", opts.chat_template_file, "Jinja chat template file overriding the model's");
  cmd.add_option("--alias", opts.aliases,
                 "Model name accepted by the API; repeatable, the first is the reported one (default: the file name)");
  cmd.add_option("--cors-origin", s.cors_origins,
                 "Origin whose browser pages may call the API (e.g. http://localhost:3000; \"*\": any); repeatable. "
                 "Default: none (no CORS headers)");
  cmd.add_flag("--strict-model-names", s.strict_model_names,
               "Answer 404 model_not_found to a `model` that is not one of the model's names (default: any name "
               "reaches the one model)");
  cmd.add_option("--max-body-bytes", opts.max_body,
                 "Largest request body; larger gets 413 (a request or header line is limited to " +
                     std::to_string(server::kMaxHeaderLineBytes) + " bytes, fixed by httplib; longer gets 400)")
      ->capture_default_str();
  cmd.add_option("--max-in-flight", s.limits.max_in_flight, "Generation requests at once; more get 503")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  cmd.add_option("--http-threads", s.n_http_threads,
                 "HTTP worker threads = connections served at once; more wait for a thread (0: max-in-flight + 8)")
      ->check(CLI::Range(0, 8192))
      ->capture_default_str();
  cmd.add_option("--max-connections", s.max_connections,
                 "Connections served or waiting for an HTTP thread at once; requests on more get a quick 503 "
                 "(Connection: close)")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  cmd.add_option("--max-stop-strings", s.limits.max_stop_strings, "Stop strings per request")
      ->check(CLI::Range(0, 1024))
      ->capture_default_str();
  cmd.add_option("--max-queued-requests", s.limits.max_in_flight,
                 "Same limit as --max-in-flight: generation requests admitted (running or queued); more get 503 "
                 "with Retry-After")
      ->check(CLI::Range(1, 4096));
  cmd.add_option("--max-messages", s.limits.max_messages, "Chat messages per request; more get 400")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  cmd.add_option("--max-prompt-tokens", s.limits.max_prompt_tokens,
                 "Prompt tokens per request; more get 400 (0: the model's context)")
      ->check(CLI::Range(0, 1 << 30))
      ->capture_default_str();
  cmd.add_option("--max-tokens-limit", s.limits.max_output_tokens,
                 "Largest max_tokens a request may ask for; more get 400 (also caps OpenAI's default)")
      ->check(CLI::Range(1, 1 << 30))
      ->capture_default_str();
  cmd.add_option("--read-timeout", s.read_timeout_s, "Seconds one read of a request may wait before the connection is closed (the whole request: "
                 "--header-timeout)")
      ->check(CLI::Range(1, 3600))
      ->capture_default_str();
  cmd.add_option("--write-timeout", s.write_timeout_s, "Seconds one write may block on a client that does not read")
      ->check(CLI::Range(1, 3600))
      ->capture_default_str();
  cmd.add_option("--keep-alive-timeout", s.keep_alive_timeout_s, "Seconds an idle keep-alive connection is kept")
      ->check(CLI::Range(1, 3600))
      ->capture_default_str();
  cmd.add_option("--header-timeout", s.header_timeout_s,
                 "Seconds a whole request (line, headers and body) may take to arrive from its first byte, plus 1 s "
                 "per 64 KiB received; slower gets 408 and the connection is closed")
      ->check(CLI::Range(1, 3600))
      ->capture_default_str();
  cmd.add_option("--max-connections-per-client", s.max_connections_per_client,
                 "Connections of one client address served at once; more get 429 before their request is read "
                 "(0: half the HTTP threads)")
      ->check(CLI::Range(0, 1 << 20))
      ->capture_default_str();
  cmd.add_option("--drain-seconds", opts.drain_s,
                 "On SIGTERM/SIGINT: stop accepting, let in-flight requests finish for up to this many seconds, "
                 "then cancel the rest (streams get a final error event) and exit 0")
      ->check(CLI::Range(0.0, 86400.0))
      ->capture_default_str();
  cmd.add_option("--trusted-proxy", opts.trusted_proxies,
                 "Address or network (CIDR, e.g. 10.0.0.0/8, 127.0.0.1, fd00::/8; repeatable or comma-separated) of "
                 "proxies in front of this server: a request from one counts against the per-client limit and is "
                 "logged under the client its X-Forwarded-For names (the rightmost address not itself a trusted "
                 "proxy), not under the proxy's address")
      ->delimiter(',')
      ->check([](const std::string& v) {
        return server::Cidr::parse(v) ? std::string() : "not an IP address or network (CIDR): '" + v + "'";
      });
  cmd.add_option("--liveness-timeout", s.liveness_timeout_s,
                 "Seconds one engine step may run before GET /livez and /health answer 503 (a wedged engine; keep it "
                 "above the longest step, a full --max-batch-tokens prefill, on this machine)")
      ->check(CLI::Range(0.001, 86400.0))
      ->capture_default_str();
  cmd.add_option("--metrics-key", s.metrics_key,
                 "Key that shows the per-tenant series on GET /metrics (Authorization: Bearer KEY); the admin key "
                 "does too; without it /metrics shows aggregate series only")
      ->envname("PREFACE_METRICS_KEY");
  cmd.add_option("--metrics-key-file", opts.metrics_key_file, "Read --metrics-key's key from the first line of this file");
  cmd.add_option("--api-key", opts.api_key,
                 "Require this key (Authorization: Bearer KEY or x-api-key); its tenant is 'default'. "
                 "GET /health and /metrics stay open. Prefer PREFACE_API_KEY or --api-key-file: a key on the "
                 "command line is visible to every local user in the process list")
      ->envname("PREFACE_API_KEY");
  cmd.add_option("--api-key-file", opts.api_key_file, "Read --api-key's key from the first line of this file");
  cmd.add_option("--api-keys", opts.api_keys_file,
                 "File of `key tenant` lines (# comments): each tenant gets its own prompt cache");
  cmd.add_option("--admin-key", s.admin_key,
                 "Key allowed to purge a tenant's cache (DELETE /v1/cache). Prefer PREFACE_ADMIN_KEY or "
                 "--admin-key-file: a key on the command line is visible to every local user in the process list")
      ->envname("PREFACE_ADMIN_KEY");
  cmd.add_option("--admin-key-file", opts.admin_key_file, "Read --admin-key's key from the first line of this file");
  cmd.add_option("--pin-budget-per-tenant", opts.pin_budget_per_tenant,
                 "KV blocks one tenant's cache_control breakpoints may pin at once (0: no per-tenant cap; all pins "
                 "together never take more than half the pool)")
      ->check(CLI::NonNegativeNumber);
  cmd.add_option("--cache-ttl", opts.cache_ttl_s,
                 "Seconds after which a cached KV block nobody used (no hit, no release) is dropped; pinned "
                 "blocks (cache_control) are kept (0: never)")
      ->check(CLI::Range(0.0, 1e9))
      ->capture_default_str();
  cmd.add_option("--verify-fraction", opts.verify_fraction,
                 "Share of cache hits whose prompt is recomputed cold while the engine is idle, the first "
                 "generated position's logits compared bit for bit (preface_cache_verify_total; a mismatch is "
                 "logged)")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  cmd.add_option("--cache-disk-size", opts.cache_disk_size,
                 "Turns the disk KV cache tier on, in <--cache-dir>/kv, holding at most this many bytes (e.g. "
                 "50GiB; least recently used blocks removed beyond): evicted KV blocks are written there and "
                 "loaded back on a later hit, also by the next server on the same model file (0: off)")
      ->capture_default_str();
  cmd.add_flag("--cache-write-through", opts.tiers.write_through,
               "Write each KV block to the disk tier as soon as it is computed, not only when evicted (survives a "
               "crash, costs a copy per block)");
  cmd.add_flag("--cache-compress", opts.tiers.compress, "zstd-compress the KV records of the disk and Redis tiers");
  cmd.add_option("--cache-tier-key-file", opts.tiers.key_file,
                 "Seal the disk and Redis tiers' records with AES-256-GCM under a key derived from this file (at "
                 "least 16 bytes, e.g. `openssl rand -hex 32`; the same file on every replica sharing a tier): "
                 "records not sealed under it are rejected and counted, and prompt tokens are not stored in clear");
  cmd.add_option("--cache-redis", opts.tiers.redis_url,
                 "Shared cache tier on Redis, redis://[[user]:password@]host:port[/db], or rediss:// for TLS (user "
                 "and password percent-encoded; the password is masked in every log line; credentials the server "
                 "refuses stop start-up): computed KV blocks are published there and other replicas on the same model load them "
                 "(default: none; $PREFACE_CACHE_REDIS, so that a password need not be on the command line)")
      ->envname("PREFACE_CACHE_REDIS");
  cmd.add_option("--cache-redis-ttl", opts.tiers.redis_ttl_s, "Seconds a block stays in Redis (0: no expiry)")
      ->check(CLI::Range(0, 1 << 30))
      ->capture_default_str();
  cmd.add_option("--cache-redis-max-record", opts.cache_redis_max_record,
                 "Largest block record stored in Redis; larger ones are not stored")
      ->capture_default_str();
  cmd.add_option("--cache-redis-tls-ca", opts.tiers.redis_tls_ca,
                 "rediss://: PEM file of the CA certificates the Redis server's certificate must chain to (default: "
                 "the system's); the certificate must also name the URL's host or IP address")
      ->check(CLI::ExistingFile);
  cmd.add_option("--cache-redis-tls-cert", opts.tiers.redis_tls_cert,
                 "rediss://: PEM client certificate, for a server that asks for one (tls-auth-clients)")
      ->check(CLI::ExistingFile);
  cmd.add_option("--cache-redis-tls-key", opts.tiers.redis_tls_key, "rediss://: the client certificate's PEM key")
      ->check(CLI::ExistingFile);
  cmd.add_option("--cache-redis-timeout-ms", opts.tiers.redis_timeout_ms,
                 "Connect and reply timeout for Redis; a slow or unreachable Redis turns into cache misses")
      ->check(CLI::Range(1, 60000))
      ->capture_default_str();
  add_kv_event_options(cmd, opts.kv_events);
  cmd.add_flag("--quiet", opts.quiet, "No per-request log lines");
  cmd.add_flag("--no-mmap", opts.no_mmap,
               "Read the model into memory instead of mapping it: costs its size in RAM, and the file may then be "
               "replaced or truncated while serving (a mapped file truncated under the server crashes it, SIGBUS)");
  cmd.add_flag("--debug-invariants", s.debug_invariants,
               "Check the KV cache's invariants at every /metrics scrape (preface_kv_invariants_ok; slow: takes "
               "the engine's step lock)");
}

}  // namespace preface::cli
