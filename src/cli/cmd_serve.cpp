// `preface serve`: the OpenAI- and Anthropic-compatible HTTP server (see server/http/server.h). Listens first (so
// /health answers 503 while the model loads), loads the model, prints the KV cache capacity, serves until
// SIGINT or SIGTERM, then stops accepting, cancels in-flight requests and exits 0.
//
// Signals: SIGINT and SIGTERM are blocked in every thread (the mask is set before any thread starts and is
// inherited) and the main thread takes them with sigwait(), so no handler and no global state are needed.
#include <pthread.h>
#include <signal.h>

#include <cctype>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/options.h"
#include "cli/serve_kv_events.h"
#include "engine/engine.h"
#include "model/capacity.h"
#include "model/fingerprint.h"
#include "model/model.h"
#include "server/api/api_error.h"
#include "server/http/auth.h"
#include "server/http/server.h"
#include "util/bytes.h"
#include "util/error.h"
#include "util/json_depth.h"
#include "util/read_file.h"

namespace preface::cli {
namespace {

struct ServeOptions {
  ModelOptions model;
  server::ServerOptions server;
  std::string kv_cache_mem;        // parse_bytes syntax; empty: sized from the model (engine::default_kv_cache_bytes)
  std::string max_body = "16MiB";  // parse_bytes syntax
  int32_t max_batch_tokens = 512;
  int32_t max_running = 64;
  bool no_prefix_cache = false;
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
  double drain_s = 20;             // --drain-seconds: how long SIGTERM waits for in-flight requests
  double verify_fraction = 0;      // --verify-fraction: share of cache hits recomputed cold and compared
  engine::TierConfig tiers;          // --cache-dir, --cache-redis (engine/kv_tiers.h)
  std::string cache_disk_size = "0";   // parse_bytes syntax; > 0 turns the disk tier on, in <cache dir>/kv
  std::string cache_redis_max_record = "4MiB";
  KvEventOptions kv_events;          // --kv-events-* (cli/serve_kv_events.h)
};

sigset_t shutdown_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

// Waits for SIGINT/SIGTERM (blocked in every thread) on its own thread from the start, so a signal is answered at
// any point: while the model loads it ends the process at once (nothing is served yet, nothing to drain); once
// loading is over, wait() returns the first one for an orderly drain, and a second one ends the process at once
// (an operator who will not wait for the drain).
class SignalWatcher {
 public:
  explicit SignalWatcher(const sigset_t& signals) : signals_(signals), thread_([this] { run(); }) {}
  ~SignalWatcher() {
    {
      std::lock_guard lock(mu_);
      leaving_ = true;
    }
    if (thread_.joinable()) {
      pthread_kill(thread_.native_handle(), SIGTERM);  // wakes its sigwait
      thread_.join();
    }
  }
  void loaded() {
    std::lock_guard lock(mu_);
    loading_ = false;
  }
  int wait() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return sig_ != 0; });
    return sig_;
  }

 private:
  void run() {
    for (;;) {
      int sig = 0;
      sigwait(&signals_, &sig);
      std::lock_guard lock(mu_);
      if (leaving_) return;
      const char* name = sig == SIGINT ? "SIGINT" : "SIGTERM";
      if (loading_) {
        std::fprintf(stderr, "preface: %s received while loading the model; exiting\n", name);
        std::_Exit(128 + sig);
      }
      if (sig_ != 0) {
        std::fprintf(stderr, "preface: second %s received; exiting without finishing the drain\n", name);
        std::_Exit(128 + sig);
      }
      sig_ = sig;
      cv_.notify_all();
    }
  }

  sigset_t signals_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool loading_ = true;
  bool leaving_ = false;
  int sig_ = 0;
  std::thread thread_;  // last: starts once the members above exist
};

// The key on the first line of `path` (trailing blanks dropped), for --api-key-file, --metrics-key-file and
// --admin-key-file.
std::string read_key_file(const std::string& path, const char* flag) {
  const std::string text = read_regular_file(path, 1u << 16, std::string(flag) + " file");
  std::string key = text.substr(0, text.find('\n'));
  while (!key.empty() && std::isspace(static_cast<unsigned char>(key.back()))) key.pop_back();
  if (key.empty()) throw Error(std::string(flag) + " " + path + " holds no key on its first line");
  return key;
}

// --api-key / $PREFACE_API_KEY / --api-key-file name one key of tenant "default", beside the --api-keys file.
// --metrics-key / $PREFACE_METRICS_KEY / --metrics-key-file: the key that shows per-tenant metrics.
void configure_keys(ServeOptions& opts) {
  if (!opts.api_key_file.empty()) {
    if (!opts.api_key.empty()) throw Error("give the key with --api-key (or PREFACE_API_KEY) or --api-key-file, not both");
    opts.api_key = read_key_file(opts.api_key_file, "--api-key-file");
  }
  if (!opts.metrics_key_file.empty()) {
    if (!opts.server.metrics_key.empty()) {
      throw Error("give the metrics key with --metrics-key (or PREFACE_METRICS_KEY) or --metrics-key-file, not both");
    }
    opts.server.metrics_key = read_key_file(opts.metrics_key_file, "--metrics-key-file");
  }
  if (!opts.admin_key_file.empty()) {
    if (!opts.server.admin_key.empty()) {
      throw Error("give the admin key with --admin-key (or PREFACE_ADMIN_KEY) or --admin-key-file, not both");
    }
    opts.server.admin_key = read_key_file(opts.admin_key_file, "--admin-key-file");
  }
  if (!opts.api_keys_file.empty()) opts.server.api_keys = server::load_api_keys(opts.api_keys_file);
  if (opts.api_key.empty()) return;
  for (const auto& [key, tenant] : opts.server.api_keys) {
    if (tenant == "default") {
      throw Error("--api-keys names a tenant 'default', which is the tenant of --api-key: they would share one "
                  "prompt cache; rename that tenant");
    }
  }
  if (!opts.server.api_keys.emplace(opts.api_key, "default").second) throw Error("--api-key is also listed in --api-keys");
}

// Reads a Jinja template file whole (a template over 1 MiB is refused: no real one comes close). A JSON object
// file with a "chat_template" or "template" string (a tokenizer_config.json, or the template corpus's .json
// form, nested no deeper than a request body may be) gives that string.
std::string read_template_file(const std::string& path) {
  const std::string text = read_regular_file(path, 1u << 20, "chat template file");
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && text[first] == '{' && json_depth_within(text, server::kMaxJsonDepth)) {
    const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    for (const char* key : {"chat_template", "template"}) {
      if (j.is_object() && j.contains(key) && j[key].is_string()) return j[key].get<std::string>();
    }
  }
  return text;
}

// --chat-template NAME picks a built-in family; --chat-template FILE and --chat-template-file FILE a Jinja file.
void resolve_chat_template(const ServeOptions& opts, server::ModelIdentity& identity) {
  if (!opts.chat_template.empty() && !opts.chat_template_file.empty()) {
    throw Error("--chat-template and --chat-template-file cannot be combined");
  }
  if (!opts.chat_template_file.empty()) {
    identity.chat_template_jinja = read_template_file(opts.chat_template_file);
    return;
  }
  if (opts.chat_template.empty()) return;
  identity.chat_template = chat::chat_template_from_name(opts.chat_template);
  if (identity.chat_template) return;
  if (!std::filesystem::is_regular_file(opts.chat_template)) {
    throw Error("unknown chat template '" + opts.chat_template + "' (expected a Jinja file or one of " +
                chat::chat_template_names() + ")");
  }
  identity.chat_template_jinja = read_template_file(opts.chat_template);
}

void serve(ServeOptions& opts) {
  const sigset_t signals = shutdown_signals();
  if (pthread_sigmask(SIG_BLOCK, &signals, nullptr) != 0) throw Error("cannot block SIGINT/SIGTERM");
  SignalWatcher watcher(signals);

  server::ModelIdentity identity;
  identity.path = resolve_model_path(opts.model.model_path);
  identity.aliases = opts.aliases;
  resolve_chat_template(opts, identity);
  engine::EngineConfig config;
  config.kv_type = kernels::parse_kv_type(opts.model.kv_type);
  config.block_size = opts.model.block_size;
  config.kv_cache_bytes = opts.kv_cache_mem.empty() ? 0 : parse_bytes(opts.kv_cache_mem);
  config.max_batch_tokens = opts.max_batch_tokens;
  config.max_running = opts.max_running;
  config.n_threads = resolve_threads(opts.model.threads);
  config.prefix_cache = !opts.no_prefix_cache;
  opts.server.limits.max_body_bytes = parse_bytes(opts.max_body);
  config.cache_ttl = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(opts.cache_ttl_s));
  config.max_pinned_blocks_per_group = opts.pin_budget_per_tenant;
  config.verify_fraction = opts.verify_fraction;
  config.tiers = opts.tiers;
  config.tiers.disk_bytes = parse_bytes(opts.cache_disk_size);
  config.tiers.redis_max_record_bytes = parse_bytes(opts.cache_redis_max_record);
  if (config.tiers.disk_bytes > 0) {  // preface's cache directory (--cache-dir) holds the disk tier in kv/
    if (model::cache_dir().empty()) throw Error("--cache-disk-size: no cache directory can be named; give --cache-dir");
    config.tiers.disk_dir = model::cache_dir() + "/kv";
  }
  if (config.tiers.write_through && config.tiers.disk_dir.empty()) {
    throw Error("--cache-write-through needs the disk tier (--cache-disk-size)");
  }
  opts.server.log_requests = !opts.quiet;
  configure_keys(opts);

  // Declared before the server so that the server (destroyed first) stops before the engine, and the event
  // publisher before the engine, which calls it until it is destroyed.
  std::unique_ptr<engine::KvEventPublisher> kv_events = open_kv_event_publisher(opts.kv_events, config.block_size);
  if (kv_events) kv_events->all_blocks_cleared();  // a (re)started replica holds nothing
  std::unique_ptr<model::Model> model;
  std::unique_ptr<Tokenizer> tokenizer;
  std::unique_ptr<engine::Engine> engine;
  server::Server http(opts.server);
  const int port = http.bind();
  http.start();
  std::fprintf(stderr, "preface: listening on http://%s:%d (loading %s)\n", opts.server.host.c_str(), port,
               identity.path.c_str());

  model = model::Model::load(identity.path, opts.max_batch_tokens,
                             opts.no_mmap ? MappedFile::Mode::Copy : MappedFile::Mode::Map);
  std::fprintf(stderr, "preface: model %s\n", model::model_summary(*model).c_str());
  tokenizer = Tokenizer::from_gguf(model->file());
  for (const std::string& w : tokenizer->load_warnings()) std::fprintf(stderr, "preface: warning: %s\n", w.c_str());
  engine = std::make_unique<engine::Engine>(*model, engine::with_eog(config, *tokenizer));
  if (kv_events) engine->add_event_sink(kv_events.get());
  engine->start();
  const engine::EngineDescription kv = engine->describe();
  const auto n_tokens = static_cast<uint64_t>(kv.n_kv_blocks) * static_cast<uint64_t>(kv.block_size);
  std::fprintf(stderr,
               "preface: KV cache (%s): %zu bytes per token, %d blocks of %d tokens = %llu tokens (%s allocated%s); "
               "prefix cache %s; %d threads\n",
               opts.model.kv_type.c_str(), kv.kv_bytes / std::max<uint64_t>(n_tokens, 1), kv.n_kv_blocks,
               kv.block_size, static_cast<unsigned long long>(n_tokens), format_bytes(kv.kv_bytes).c_str(),
               config.kv_cache_bytes ? "" : ", sized from the context and --max-running",
               config.prefix_cache ? "on" : "off", config.n_threads);
  if (!config.tiers.disk_dir.empty()) {
    std::fprintf(stderr, "preface: disk KV cache tier in %s (%s%s)\n", config.tiers.disk_dir.c_str(),
                 format_bytes(config.tiers.disk_bytes).c_str(), config.tiers.write_through ? ", write-through" : "");
  }
  if (!config.tiers.redis_url.empty()) {
    std::fprintf(stderr, "preface: Redis KV cache tier at %s (TTL %d s)\n", config.tiers.redis_url.c_str(),
                 config.tiers.redis_ttl_s);
  }
  identity.chat_template_source = model->file().try_string("tokenizer.chat_template").value_or("");
  http.attach(*engine, *tokenizer, identity);
  const server::ServerContext* ctx = http.context();
  std::fprintf(stderr, "preface: serving model '%s' (context %d tokens, chat template %s)\n", ctx->model_id.c_str(),
               ctx->ctx_len(), ctx->chat_renderer->name().c_str());

  watcher.loaded();
  const int sig = watcher.wait();
  std::fprintf(stderr, "preface: %s received, draining: no new connections, %d requests in flight get up to %g s\n",
               sig == SIGINT ? "SIGINT" : "SIGTERM", http.n_in_flight(), opts.drain_s);
  const int32_t n_cancelled =
      http.drain(std::chrono::milliseconds(static_cast<int64_t>(std::max(opts.drain_s, 0.0) * 1000)));
  engine->stop();
  std::fprintf(stderr, "preface: stopped (%d requests cancelled after the drain; KV blocks in use: %d)\n",
               n_cancelled, engine->counters().n_blocks_in_use);
  if (kv_events) report_kv_events(*kv_events);
}

}  // namespace

void register_serve(CLI::App& app) {
  auto opts = std::make_shared<ServeOptions>();
  CLI::App* cmd = app.add_subcommand("serve", "Serve the OpenAI and Anthropic HTTP APIs with prompt caching");
  add_model_options(*cmd, opts->model);
  server::ServerOptions& s = opts->server;
  cmd->add_option("--host", s.host, "Address to listen on")->capture_default_str();
  cmd->add_option("--port", s.port, "Port to listen on (0: any free port)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  cmd->add_option("--kv-cache-mem", opts->kv_cache_mem,
                  "KV cache budget, e.g. 2GiB or 512MB (default: --max-running sequences of the full context, at most "
                  "25% of available memory and 8 GiB)");
  cmd->add_option("--max-batch-tokens", opts->max_batch_tokens, "Tokens per engine step")
      ->check(CLI::Range(1, 1 << 16))
      ->capture_default_str();
  cmd->add_option("--max-running", opts->max_running, "Sequences decoding at once")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  cmd->add_flag("--no-prefix-cache", opts->no_prefix_cache, "Disable prefix caching (every prompt is computed)");
  cmd->add_option("--chat-template", opts->chat_template,
                  "Chat template overriding the model's: a Jinja file (or a JSON file with a \"chat_template\" or "
                  "\"template\" string), or a built-in family (" +
                      chat::chat_template_names() + ")");
  cmd->add_option("--chat-template-file", opts->chat_template_file, "Jinja chat template file overriding the model's");
  cmd->add_option("--alias", opts->aliases,
                  "Model name accepted by the API; repeatable, the first is the reported one (default: the file name)");
  cmd->add_flag("--strict-model-names", s.strict_model_names,
                "Answer 404 model_not_found to a `model` that is not one of the model's names (default: any name "
                "reaches the one model)");
  cmd->add_option("--max-body-bytes", opts->max_body,
                  "Largest request body; larger gets 413 (a request or header line is limited to " +
                      std::to_string(server::kMaxHeaderLineBytes) + " bytes, fixed by httplib; longer gets 400)")
      ->capture_default_str();
  cmd->add_option("--max-in-flight", s.limits.max_in_flight, "Generation requests at once; more get 503")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  cmd->add_option("--http-threads", s.n_http_threads,
                  "HTTP worker threads = connections served at once; more wait for a thread (0: max-in-flight + 8)")
      ->check(CLI::Range(0, 8192))
      ->capture_default_str();
  cmd->add_option("--max-connections", s.max_connections,
                  "Connections served or waiting for an HTTP thread at once; requests on more get a quick 503 "
                  "(Connection: close)")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  cmd->add_option("--max-stop-strings", s.limits.max_stop_strings, "Stop strings per request")
      ->check(CLI::Range(0, 1024))
      ->capture_default_str();
  cmd->add_option("--max-queued-requests", s.limits.max_in_flight,
                  "Same limit as --max-in-flight: generation requests admitted (running or queued); more get 503 "
                  "with Retry-After")
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--max-messages", s.limits.max_messages, "Chat messages per request; more get 400")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  cmd->add_option("--max-prompt-tokens", s.limits.max_prompt_tokens,
                  "Prompt tokens per request; more get 400 (0: the model's context)")
      ->check(CLI::Range(0, 1 << 30))
      ->capture_default_str();
  cmd->add_option("--max-tokens-limit", s.limits.max_output_tokens,
                  "Largest max_tokens a request may ask for; more get 400 (also caps OpenAI's default)")
      ->check(CLI::Range(1, 1 << 30))
      ->capture_default_str();
  cmd->add_option("--read-timeout", s.read_timeout_s, "Seconds one read of a request may wait before the connection is closed (the whole request: "
                  "--header-timeout)")
      ->check(CLI::Range(1, 3600))
      ->capture_default_str();
  cmd->add_option("--write-timeout", s.write_timeout_s, "Seconds one write may block on a client that does not read")
      ->check(CLI::Range(1, 3600))
      ->capture_default_str();
  cmd->add_option("--keep-alive-timeout", s.keep_alive_timeout_s, "Seconds an idle keep-alive connection is kept")
      ->check(CLI::Range(1, 3600))
      ->capture_default_str();
  cmd->add_option("--header-timeout", s.header_timeout_s,
                  "Seconds a whole request (line, headers and body) may take to arrive from its first byte, plus 1 s "
                  "per 64 KiB received; slower gets 408 and the connection is closed")
      ->check(CLI::Range(1, 3600))
      ->capture_default_str();
  cmd->add_option("--max-connections-per-client", s.max_connections_per_client,
                  "Connections of one client address served at once; more get 429 before their request is read "
                  "(0: half the HTTP threads)")
      ->check(CLI::Range(0, 1 << 20))
      ->capture_default_str();
  cmd->add_option("--drain-seconds", opts->drain_s,
                  "On SIGTERM/SIGINT: stop accepting, let in-flight requests finish for up to this many seconds, "
                  "then cancel the rest (streams get a final error event) and exit 0")
      ->check(CLI::Range(0.0, 86400.0))
      ->capture_default_str();
  cmd->add_option("--metrics-key", s.metrics_key,
                  "Key that shows the per-tenant series on GET /metrics (Authorization: Bearer KEY); the admin key "
                  "does too; without it /metrics shows aggregate series only")
      ->envname("PREFACE_METRICS_KEY");
  cmd->add_option("--metrics-key-file", opts->metrics_key_file, "Read --metrics-key's key from the first line of this file");
  cmd->add_option("--api-key", opts->api_key,
                  "Require this key (Authorization: Bearer KEY or x-api-key); its tenant is 'default'. "
                  "GET /health and /metrics stay open. Prefer PREFACE_API_KEY or --api-key-file: a key on the "
                  "command line is visible to every local user in the process list")
      ->envname("PREFACE_API_KEY");
  cmd->add_option("--api-key-file", opts->api_key_file, "Read --api-key's key from the first line of this file");
  cmd->add_option("--api-keys", opts->api_keys_file,
                  "File of `key tenant` lines (# comments): each tenant gets its own prompt cache");
  cmd->add_option("--admin-key", s.admin_key,
                  "Key allowed to purge a tenant's cache (DELETE /v1/cache). Prefer PREFACE_ADMIN_KEY or "
                  "--admin-key-file: a key on the command line is visible to every local user in the process list")
      ->envname("PREFACE_ADMIN_KEY");
  cmd->add_option("--admin-key-file", opts->admin_key_file, "Read --admin-key's key from the first line of this file");
  cmd->add_option("--pin-budget-per-tenant", opts->pin_budget_per_tenant,
                  "KV blocks one tenant's cache_control breakpoints may pin at once (0: no per-tenant cap; all pins "
                  "together never take more than half the pool)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--cache-ttl", opts->cache_ttl_s,
                  "Seconds after which a cached KV block nobody used (no hit, no release) is dropped; pinned "
                  "blocks (cache_control) are kept (0: never)")
      ->check(CLI::Range(0.0, 1e9))
      ->capture_default_str();
  cmd->add_option("--verify-fraction", opts->verify_fraction,
                  "Share of cache hits whose prompt is recomputed cold while the engine is idle, the first "
                  "generated position's logits compared bit for bit (preface_cache_verify_total; a mismatch is "
                  "logged)")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  cmd->add_option("--cache-disk-size", opts->cache_disk_size,
                  "Turns the disk KV cache tier on, in <--cache-dir>/kv, holding at most this many bytes (e.g. "
                  "50GiB; least recently used blocks removed beyond): evicted KV blocks are written there and "
                  "loaded back on a later hit, also by the next server on the same model file (0: off)")
      ->capture_default_str();
  cmd->add_flag("--cache-write-through", opts->tiers.write_through,
                "Write each KV block to the disk tier as soon as it is computed, not only when evicted (survives a "
                "crash, costs a copy per block)");
  cmd->add_flag("--cache-compress", opts->tiers.compress, "zstd-compress the KV records of the disk and Redis tiers");
  cmd->add_option("--cache-redis", opts->tiers.redis_url,
                  "Shared cache tier on Redis, redis://host:port[/db]: computed KV blocks are published there and "
                  "other replicas on the same model load them (default: none)");
  cmd->add_option("--cache-redis-ttl", opts->tiers.redis_ttl_s, "Seconds a block stays in Redis (0: no expiry)")
      ->check(CLI::Range(0, 1 << 30))
      ->capture_default_str();
  cmd->add_option("--cache-redis-max-record", opts->cache_redis_max_record,
                  "Largest block record stored in Redis; larger ones are not stored")
      ->capture_default_str();
  cmd->add_option("--cache-redis-timeout-ms", opts->tiers.redis_timeout_ms,
                  "Connect and reply timeout for Redis; a slow or unreachable Redis turns into cache misses")
      ->check(CLI::Range(1, 60000))
      ->capture_default_str();
  add_kv_event_options(*cmd, opts->kv_events);
  cmd->add_flag("--quiet", opts->quiet, "No per-request log lines");
  cmd->add_flag("--no-mmap", opts->no_mmap,
                "Read the model into memory instead of mapping it: costs its size in RAM, and the file may then be "
                "replaced or truncated while serving (a mapped file truncated under the server crashes it, SIGBUS)");
  cmd->add_flag("--debug-invariants", s.debug_invariants,
                "Check the KV cache's invariants at every /metrics scrape (preface_kv_invariants_ok; slow: takes "
                "the engine's step lock)");
  cmd->callback([opts] { serve(*opts); });
}

}  // namespace preface::cli
