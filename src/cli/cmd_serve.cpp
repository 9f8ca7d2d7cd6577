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
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "cli/commands.h"
#include "cli/options.h"
#include "engine/engine.h"
#include "kv/capacity.h"
#include "model/fingerprint.h"
#include "model/model.h"
#include "server/http/auth.h"
#include "server/http/server.h"
#include "util/error.h"

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
  std::string chat_template;       // empty: detect from the GGUF
  std::vector<std::string> aliases;
  bool quiet = false;
  bool no_mmap = false;  // --no-mmap: read the model into memory
  std::string api_key;             // --api-key (or $PREFACE_API_KEY): one key, tenant "default"
  std::string api_key_file;        // --api-key-file: the key on the file's first line
  std::string api_keys_file;       // --api-keys: `key tenant` lines
  double cache_ttl_s = 0;          // 0: no expiry
  int32_t pin_budget_per_tenant = 0;  // blocks; 0: only the half-pool cap
  engine::TierConfig tiers;          // --cache-dir, --cache-redis (engine/kv_tiers.h)
  std::string cache_disk_size = "0";   // parse_bytes syntax; > 0 turns the disk tier on, in <cache dir>/kv
  std::string cache_redis_max_record = "4MiB";
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
// loading is over, wait() returns it for an orderly shutdown.
class SignalWatcher {
 public:
  explicit SignalWatcher(const sigset_t& signals) : signals_(signals), thread_([this] { run(); }) {}
  ~SignalWatcher() {
    {
      std::lock_guard lock(mu_);
      if (sig_ == 0) leaving_ = true;
    }
    if (thread_.joinable()) {
      if (leaving_) pthread_kill(thread_.native_handle(), SIGTERM);  // wakes its sigwait
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
    int sig = 0;
    sigwait(&signals_, &sig);
    std::lock_guard lock(mu_);
    if (leaving_) return;
    if (loading_) {
      std::fprintf(stderr, "preface: %s received while loading the model; exiting\n",
                   sig == SIGINT ? "SIGINT" : "SIGTERM");
      std::_Exit(128 + sig);
    }
    sig_ = sig;
    cv_.notify_all();
  }

  sigset_t signals_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool loading_ = true;
  bool leaving_ = false;
  int sig_ = 0;
  std::thread thread_;  // last: starts once the members above exist
};

// --api-key / $PREFACE_API_KEY / --api-key-file name one key of tenant "default", beside the --api-keys file.
void configure_keys(ServeOptions& opts) {
  if (!opts.api_key_file.empty()) {
    if (!opts.api_key.empty()) throw Error("give the key with --api-key (or PREFACE_API_KEY) or --api-key-file, not both");
    std::ifstream in(opts.api_key_file);
    if (!in) throw Error("cannot read --api-key-file " + opts.api_key_file);
    std::getline(in, opts.api_key);
    while (!opts.api_key.empty() && std::isspace(static_cast<unsigned char>(opts.api_key.back()))) opts.api_key.pop_back();
    if (opts.api_key.empty()) throw Error("--api-key-file " + opts.api_key_file + " holds no key on its first line");
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

void serve(ServeOptions& opts) {
  const sigset_t signals = shutdown_signals();
  if (pthread_sigmask(SIG_BLOCK, &signals, nullptr) != 0) throw Error("cannot block SIGINT/SIGTERM");
  SignalWatcher watcher(signals);

  server::ModelIdentity identity;
  identity.path = resolve_model_path(opts.model.model_path);
  identity.aliases = opts.aliases;
  if (!opts.chat_template.empty()) {
    identity.chat_template = chat::chat_template_from_name(opts.chat_template);
    if (!identity.chat_template) {
      throw Error("unknown chat template '" + opts.chat_template + "' (expected one of " +
                  chat::chat_template_names() + ")");
    }
  }
  engine::EngineConfig config;
  config.kv_type = parse_kv_type(opts.model.kv_type);
  config.block_size = opts.model.block_size;
  config.kv_cache_bytes = opts.kv_cache_mem.empty() ? 0 : kv::parse_bytes(opts.kv_cache_mem);
  config.max_batch_tokens = opts.max_batch_tokens;
  config.max_running = opts.max_running;
  config.n_threads = resolve_threads(opts.model.threads);
  config.prefix_cache = !opts.no_prefix_cache;
  opts.server.limits.max_body_bytes = kv::parse_bytes(opts.max_body);
  config.cache_ttl = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(opts.cache_ttl_s));
  config.max_pinned_blocks_per_group = opts.pin_budget_per_tenant;
  config.tiers = opts.tiers;
  config.tiers.disk_bytes = kv::parse_bytes(opts.cache_disk_size);
  config.tiers.redis_max_record_bytes = kv::parse_bytes(opts.cache_redis_max_record);
  if (config.tiers.disk_bytes > 0) {  // preface's cache directory (--cache-dir) holds the disk tier in kv/
    if (model::cache_dir().empty()) throw Error("--cache-disk-size: no cache directory can be named; give --cache-dir");
    config.tiers.disk_dir = model::cache_dir() + "/kv";
  }
  if (config.tiers.write_through && config.tiers.disk_dir.empty()) {
    throw Error("--cache-write-through needs the disk tier (--cache-disk-size)");
  }
  opts.server.log_requests = !opts.quiet;
  configure_keys(opts);

  // Declared before the server so that the server (destroyed first) stops before the engine.
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
  engine->start();
  const engine::EngineDescription kv = engine->describe();
  const auto n_tokens = static_cast<uint64_t>(kv.n_kv_blocks) * static_cast<uint64_t>(kv.block_size);
  std::fprintf(stderr,
               "preface: KV cache (%s): %zu bytes per token, %d blocks of %d tokens = %llu tokens (%s allocated%s); "
               "prefix cache %s; %d threads\n",
               opts.model.kv_type.c_str(), kv.kv_bytes / std::max<uint64_t>(n_tokens, 1), kv.n_kv_blocks,
               kv.block_size, static_cast<unsigned long long>(n_tokens), kv::format_bytes(kv.kv_bytes).c_str(),
               config.kv_cache_bytes ? "" : ", sized from the context and --max-running",
               config.prefix_cache ? "on" : "off", config.n_threads);
  if (!config.tiers.disk_dir.empty()) {
    std::fprintf(stderr, "preface: disk KV cache tier in %s (%s%s)\n", config.tiers.disk_dir.c_str(),
                 kv::format_bytes(config.tiers.disk_bytes).c_str(), config.tiers.write_through ? ", write-through" : "");
  }
  if (!config.tiers.redis_url.empty()) {
    std::fprintf(stderr, "preface: Redis KV cache tier at %s (TTL %d s)\n", config.tiers.redis_url.c_str(),
                 config.tiers.redis_ttl_s);
  }
  identity.chat_template_source = model->file().try_string("tokenizer.chat_template").value_or("");
  http.attach(*engine, *tokenizer, identity);
  const server::ServerContext* ctx = http.context();
  std::fprintf(stderr, "preface: serving model '%s' (context %d tokens, chat template %s)\n", ctx->model_id.c_str(),
               ctx->ctx_len(), chat::chat_template_name(ctx->chat_template));

  watcher.loaded();
  const int sig = watcher.wait();
  std::fprintf(stderr, "preface: %s received, shutting down (%d requests in flight)\n",
               sig == SIGINT ? "SIGINT" : "SIGTERM", http.n_in_flight());
  http.stop();
  engine->stop();
  std::fprintf(stderr, "preface: stopped\n");
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
                  "Chat template family, overriding the model's (" + chat::chat_template_names() + ")");
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
  cmd->add_option("--read-timeout", s.read_timeout_s, "Seconds to read a request before the connection is closed")
      ->check(CLI::Range(1, 3600))
      ->capture_default_str();
  cmd->add_option("--write-timeout", s.write_timeout_s, "Seconds one write may block on a client that does not read")
      ->check(CLI::Range(1, 3600))
      ->capture_default_str();
  cmd->add_option("--keep-alive-timeout", s.keep_alive_timeout_s, "Seconds an idle keep-alive connection is kept")
      ->check(CLI::Range(1, 3600))
      ->capture_default_str();
  cmd->add_option("--api-key", opts->api_key,
                  "Require this key (Authorization: Bearer KEY or x-api-key); its tenant is 'default'. "
                  "GET /health and /metrics stay open. Prefer PREFACE_API_KEY or --api-key-file: a key on the "
                  "command line is visible to every local user in the process list")
      ->envname("PREFACE_API_KEY");
  cmd->add_option("--api-key-file", opts->api_key_file, "Read --api-key's key from the first line of this file");
  cmd->add_option("--api-keys", opts->api_keys_file,
                  "File of `key tenant` lines (# comments): each tenant gets its own prompt cache");
  cmd->add_option("--admin-key", s.admin_key, "Key allowed to purge a tenant's cache (DELETE /v1/cache)");
  cmd->add_option("--pin-budget-per-tenant", opts->pin_budget_per_tenant,
                  "KV blocks one tenant's cache_control breakpoints may pin at once (0: no per-tenant cap; all pins "
                  "together never take more than half the pool)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--cache-ttl", opts->cache_ttl_s,
                  "Seconds after which a cached KV block nobody used (no hit, no release) is dropped; pinned "
                  "blocks (cache_control) are kept (0: never)")
      ->check(CLI::Range(0.0, 1e9))
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
