// What the API layers share once the model is loaded: the engine, the tokenizer, the chat template, the model's
// names, limits, metrics, ids and default seeds. One per server; thread-safe.
#pragma once
#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/chat_renderer.h"
#include "chat/chat_template.h"
#include "engine/engine.h"
#include "grammar/grammar_cache.h"
#include "server/api/generation.h"
#include "server/api/request_fingerprint.h"
#include "server/api/response_store.h"
#include "server/api/tenant_namespaces.h"
#include "server/api/tool_format_detect.h"
#include "server/observability/metrics.h"
#include "tokenizer/tokenizer.h"

namespace preface::server {

// The chat module's names the server uses unqualified.
using chat::chat_bos_text;
using chat::chat_eos_text;
using chat::ChatMessage;
using chat::ChatTemplate;
using chat::chat_template_name;
using chat::detect_chat_template;
using chat::encode_chat_prompt;
using chat::render_chat;
using chat::render_chat_tokens;

struct ServerLimits {
  size_t max_body_bytes = 16u << 20;  // larger request bodies get 413
  int32_t max_in_flight = 64;         // generation requests served at once; more get 503 + Retry-After
  int32_t max_stop_strings = 16;
  int32_t max_top_logprobs = 20;
  int32_t retry_after_s = 1;          // the Retry-After of a 503
  int32_t max_messages = 1024;        // chat messages per request; more get 400
  int32_t max_prompt_tokens = 0;      // prompt tokens per request; more get 400 (0: the model's context)
  int32_t max_output_tokens = 32768;  // largest max_tokens accepted; more get 400 (OpenAI's default is capped)
  // Responses API (store: true): entries kept, their bytes, and how long each lives.
  int32_t max_stored_responses = 4096;
  size_t max_stored_response_bytes = 256u << 20;
  int32_t stored_response_ttl_s = 24 * 3600;
};

class ServerContext {
 public:
  // model_id: the name reported by /v1/models and in responses; accepted_names: the model's other names.
  // strict_model_names: only model_id and accepted_names reach the model (else any `model` does).
  ServerContext(engine::Engine& engine, const Tokenizer& tokenizer, ChatTemplate chat_template, std::string model_id,
                std::vector<std::string> accepted_names, bool strict_model_names, ServerLimits limits,
                Metrics& metrics);

  engine::Engine& engine;
  const engine::EngineDescription model;  // the model's and pool's sizes, as of attach
  const Tokenizer& tokenizer;
  const ChatTemplate chat_template;  // the built-in family (what chat_renderer renders unless it is Jinja)
  // What chats render with: the family above until Server::attach installs the model's Jinja template (before
  // the context is published; never changed while requests run).
  std::shared_ptr<const chat::ChatRenderer> chat_renderer;
  const std::string model_id;
  const std::vector<std::string> accepted_names;
  const bool strict_model_names;
  const ServerLimits limits;
  Metrics& metrics;
  ResponseStore responses;  // the Responses API's stored responses, per tenant
  const int64_t created_unix;         // when the model was attached (the `created` of /v1/models)
  TenantNamespaces tenants;           // the cache namespaces each tenant used (for purging a tenant)
  FingerprintStore fingerprints{16u << 20};  // hosted-API cache diagnostics, 16 MiB at most

  int32_t ctx_len() const;
  // With strict_model_names, throws ApiError 404 (code model_not_found, OpenAI's status) when `model` names
  // neither model_id nor an accepted name; otherwise every `model` is accepted. A missing model is accepted.
  void check_model(const std::optional<std::string>& model) const;
  // A fresh response id: prefix + 24 hex digits, unique per server.
  std::string new_id(std::string_view prefix);
  // A fresh tool call id: "call_" + 24 hex digits, or 9 letters and digits where the model's tool-call format
  // wants them (grammar::ToolFormat::short_call_ids).
  std::string new_call_id();
  // A seed for a request that gave none (different for every request).
  uint64_t random_seed();
  static int64_t unix_now();

  // Compiled grammars of structured-output requests, for this model's vocabulary (built on first use: the
  // vocabulary trie is one pass over the vocabulary).
  grammar::GrammarCache& grammars();
  // The model's tool-call format and the control tokens its markers use (found on first use, from chat_renderer).
  const ToolCallSetup& tool_calls() const;
  // The vocabulary's fill-in-the-middle tokens (prefix, suffix, middle) for llama.cpp's /infill, found on first use
  // by their pieces (Qwen-Coder, StarCoder, DeepSeek Coder, CodeLlama); nullopt when it has none.
  const std::optional<std::array<int32_t, 3>>& fim_tokens() const;

  // Tokenizes a chat for generation; a role order or role the template rejects, or any template error,
  // becomes ApiError 400 (a Jinja template's raise_exception message verbatim). kwargs: chat_template_kwargs.
  std::vector<int32_t> chat_prompt(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                                   const nlohmann::ordered_json& kwargs = nullptr) const;
  // Request JSON (messages with tool calls and tool messages, tools: chat::ChatRenderer::render_json) tokenized
  // for generation, errors as chat_prompt's.
  std::vector<int32_t> chat_prompt_json(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                                        bool add_generation_prompt, const nlohmann::ordered_json& kwargs = nullptr) const;
  chat::RenderedChat render_chat_json(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                                      bool add_generation_prompt, const nlohmann::ordered_json& kwargs = nullptr) const;
  // The render itself (text + content spans), errors as chat_prompt's.
  chat::RenderedChat render_chat(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                                 const nlohmann::ordered_json& kwargs = nullptr) const;

 private:
  std::mutex mu_;
  std::mt19937_64 rng_;               // ids and default seeds (not security relevant)
  uint64_t id_salt_;                  // random per server, so ids differ across restarts
  std::atomic<uint64_t> next_id_{1};
  std::once_flag grammars_once_;
  std::unique_ptr<grammar::GrammarCache> grammars_;
  mutable std::once_flag tool_calls_once_;
  mutable ToolCallSetup tool_calls_;
  mutable std::once_flag fim_once_;
  mutable std::optional<std::array<int32_t, 3>> fim_;
};

// The template variables a request renders with: its own (chat_template_kwargs and the like), and
// enable_thinking = true unless it set it, as llama.cpp's server sends it (templates that test it render as there).
nlohmann::ordered_json template_kwargs_with_defaults(const nlohmann::ordered_json& kwargs);

// Turns one generation into an API's wire format: a JSON body, or Server-Sent Events. One object per request.
class ResponseFormat {
 public:
  virtual ~ResponseFormat() = default;
  // SSE text sent before the first token (may be empty).
  virtual std::string stream_start(int32_t n_prompt_tokens) = 0;
  // Whether stream_start waits for the first token, so that it can report the prompt's cache counts (given by
  // set_prompt_cache just before it; -1 when the generation ended without a token).
  virtual bool start_after_first_token() const { return false; }
  virtual void set_prompt_cache(int32_t /*n_cached*/, int32_t /*n_written*/) {}
  // SSE text for one delta ("" sends nothing).
  virtual std::string stream_delta(const GenerationDelta& delta) = 0;
  // SSE text that ends the stream (including the API's terminator, or an error event).
  virtual std::string stream_end(const GenerationSummary& summary) = 0;
  // The non-streaming body: the content text, the reasoning text and tool calls read from the reply's channels
  // (harmony replies; else empty), the tokens' log-probabilities.
  virtual nlohmann::json full_response(const std::string& text, const std::string& reasoning,
                                       const std::vector<ChannelCall>& calls, const std::vector<TokenLogprob>& logprobs,
                                       const GenerationSummary& summary) = 0;
  // The response's id ("msg_...", "chatcmpl-...", "cmpl-..."), fixed at construction.
  virtual const std::string& id() const = 0;
  // The Content-Type of the stream stream_start/delta/end write.
  virtual const char* stream_content_type() const { return "text/event-stream"; }

  // A top-level field for the response object (cache_explain, diagnostics): added to the full body, and on streams
  // to Anthropic's message_start message or OpenAI's final chunk (the one with the finish_reason).
  void add_field(const std::string& key, nlohmann::json value) { extra_fields_[key] = std::move(value); }

 protected:
  void merge_extra_fields(nlohmann::json& target) const {
    for (const auto& [key, value] : extra_fields_.items()) target[key] = value;
  }

 private:
  nlohmann::json extra_fields_ = nlohmann::json::object();
};

// preface's extension of both APIs' usage: the prefill a request skipped thanks to the prefix cache,
// {"tokens": n_cached_tokens, "flops": 2 x n_params x tokens, "seconds": tokens at the engine's measured prefill
// rate (engine::EngineCounters::prefill_tokens_per_s; 0 before the first measured prefill step)}.
nlohmann::json cache_savings_json(const engine::RequestStats& stats);

// "data: <json>\n\n"
std::string sse_data(const nlohmann::json& j);
// "event: <name>\ndata: <json>\n\n"
std::string sse_event(const std::string& name, const nlohmann::json& j);

// The text of a token for logprob reports: its raw bytes (possibly a partial UTF-8 character).
std::string token_text(const Tokenizer& tok, int32_t id);
bool is_valid_utf8(std::string_view s);
// The bytes of a string as a JSON array of integers (OpenAI's `bytes`).
nlohmann::json byte_array(const std::string& s);

}  // namespace preface::server
