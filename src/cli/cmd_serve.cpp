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
#include "cli/serve_options.h"
#include "engine/engine.h"
#include "kv/redis_tier.h"
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
  config.block_size = block_size_of(opts.model);
  config.kv_cache_bytes = opts.kv_cache_mem.empty() ? 0 : parse_bytes(opts.kv_cache_mem);
  config.state_snapshot_bytes = opts.state_cache_mem.empty() ? 0 : parse_bytes(opts.state_cache_mem);
  config.state_snapshot_interval = opts.state_snapshot_interval;
  config.max_batch_tokens = opts.max_batch_tokens;
  config.max_running = opts.max_running;
  config.n_threads = resolve_threads(opts.model.threads);
  config.prefix_cache = !opts.no_prefix_cache;
  config.window_reclaim = opts.kv_window_reclaim == "on";
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
  if (!config.tiers.key_file.empty() && !config.tiers.enabled()) {
    throw Error("--cache-tier-key-file needs a tier (--cache-disk-size or --cache-redis)");
  }
  opts.server.log_requests = !opts.quiet;
  configure_keys(opts);
  std::vector<server::Cidr> proxies;
  for (const std::string& p : opts.trusted_proxies) proxies.push_back(*server::Cidr::parse(p));  // checked by CLI11
  opts.server.trusted_proxies = server::TrustedProxies(std::move(proxies));

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
  config.kv_format = kv_format(opts.model, model->memory());
  tokenizer = Tokenizer::from_gguf(model->file());
  for (const std::string& w : tokenizer->load_warnings()) std::fprintf(stderr, "preface: warning: %s\n", w.c_str());
  engine = std::make_unique<engine::Engine>(*model, engine::with_eog(config, *tokenizer));
  if (kv_events) {
    engine->add_event_sink(kv_events.get());
    engine->set_tier_event_sink(kv_events.get());
  }
  engine->start();
  const engine::EngineDescription kv = engine->describe();
  const auto n_tokens = static_cast<uint64_t>(kv.n_kv_blocks) * static_cast<uint64_t>(kv.block_size);
  const auto bytes_per_token = static_cast<unsigned long long>(
      model->memory().paged_bytes_per_token(kv.kv_format) -
      (kv.n_window_blocks > 0 ? model->memory().windowed_bytes_per_token(kv.kv_format) : 0));
  std::fprintf(stderr,
               "preface: KV cache (%s): %llu bytes per token, %d blocks of %d tokens = %llu tokens (%s allocated%s); "
               "prefix cache %s; %d threads\n",
               kv.kv_format.describe().c_str(), bytes_per_token, kv.n_kv_blocks, kv.block_size,
               static_cast<unsigned long long>(n_tokens), format_bytes(kv.kv_bytes).c_str(),
               config.kv_cache_bytes ? "" : ", sized from the context and --max-running",
               kv.prefix_cache ? "on" : "off",
               config.n_threads);
  const model::MemoryLayout& memory = model->memory();
  for (size_t i = 0; i < memory.groups().size(); ++i) {
    std::fprintf(stderr, "preface: memory group %zu of %zu: %s\n", i + 1, memory.groups().size(),
                 memory.groups()[i].summary(kv.kv_format).c_str());
  }
  if (kv.n_window_blocks > 0) {
    const auto window_tokens = static_cast<unsigned long long>(kv.n_window_blocks) * kv.block_size;
    std::fprintf(stderr,
                 "preface: sliding-window layers: a pool of their own, %d blocks (%llu tokens), %llu bytes per token; "
                 "a sequence holds the last %d positions of them (--kv-window-reclaim)\n",
                 kv.n_window_blocks, window_tokens,
                 static_cast<unsigned long long>(memory.windowed_bytes_per_token(kv.kv_format)), kv.window);
  } else if (memory.can_split_windows()) {
    std::fprintf(stderr, "preface: sliding-window layers keep every position (--kv-window-reclaim off%s)\n",
                 config.tiers.enabled() ? ", or the cache tiers are on" : "");
  }
  if (memory.has_state()) {
    const uint64_t each = memory.state_bytes_per_sequence();
    std::fprintf(stderr, "preface: recurrent-state snapshots: %llu bytes each, %s for them (%llu snapshots); hits "
                 "resume only where one exists: breakpoints, prompt and reply ends, junctions%s%s\n",
                 static_cast<unsigned long long>(each), format_bytes(kv.snapshot_budget_bytes).c_str(),
                 static_cast<unsigned long long>(each > 0 ? kv.snapshot_budget_bytes / each : 0),
                 config.state_snapshot_interval > 0
                     ? (", every " + std::to_string(config.state_snapshot_interval) + " prompt tokens").c_str()
                     : "",
                 config.tiers.enabled() ? "; snapshots also go to the cache tiers" : "");
  }
  if (!config.tiers.disk_dir.empty()) {
    std::fprintf(stderr, "preface: disk KV cache tier in %s (%s%s)\n", config.tiers.disk_dir.c_str(),
                 format_bytes(config.tiers.disk_bytes).c_str(), config.tiers.write_through ? ", write-through" : "");
  }
  if (!config.tiers.redis_url.empty()) {
    std::fprintf(stderr, "preface: Redis KV cache tier at %s (TTL %d s)\n",
                 kv::redact_redis_url(config.tiers.redis_url).c_str(),
                 config.tiers.redis_ttl_s);
  }
  if (config.tiers.enabled()) {
    std::fprintf(stderr, "preface: tier records %s\n",
                 config.tiers.key_file.empty()
                     ? "unsealed: whoever can write to the tiers' storage can plant KV (--cache-tier-key-file)"
                     : "sealed with AES-256-GCM (--cache-tier-key-file): records not sealed under it are rejected");
  }
  identity.chat_template_source = model->file().try_string("tokenizer.chat_template").value_or("");
  identity.chat_template_tool_use = model->file().try_string("tokenizer.chat_template.tool_use").value_or("");
  http.attach(*engine, *tokenizer, identity);
  const server::ServerContext* ctx = http.context();
  std::fprintf(stderr, "preface: serving model '%s' (context %d tokens, chat template %s)\n", ctx->model_id.c_str(),
               ctx->ctx_len(), ctx->chat_renderer->name().c_str());
  if (ctx->chat_renderer->tools_only()) {
    std::fprintf(stderr, "preface: warning: the chat template renders only requests with tools; others get 400\n");
  }
  if (const server::ToolCallSetup& calls = ctx->tool_calls(); calls.format != nullptr) {
    std::fprintf(stderr, "preface: tool calls in the '%.*s' format (%.*s), found by the template's %s\n",
                 static_cast<int>(calls.format->id.size()), calls.format->id.data(),
                 static_cast<int>(calls.format->models.size()), calls.format->models.data(), calls.how.c_str());
  }

  watcher.loaded();
  const int sig = watcher.wait();
  std::fprintf(stderr,
               "preface: %s received, draining: no new connections, /health 503, %d requests in flight get up to "
               "%g s\n",
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
  add_serve_options(*cmd, *opts);
  cmd->callback([opts] { serve(*opts); });
}

}  // namespace preface::cli
