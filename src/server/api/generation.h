// One text generation over the engine, shared by every API: submits token ids, reads the request's stream,
// detokenizes incrementally, applies stop strings and computes log-probabilities. Knows nothing of HTTP or JSON.
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/engine.h"
#include "grammar/tool_call_stream.h"
#include "server/api/reply_channels.h"
#include "server/api/think_split.h"
#include "server/observability/generation_summary.h"
#include "tokenizer/tokenizer.h"

namespace preface::server {

// Holds back text that could be the start of a stop string, so a stop string split across tokens is never
// partly released. Stop strings are non-empty.
class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {}
  // Appends `text` and returns what is now safe to release. When a stop string appears, the text before its
  // earliest occurrence is released, the rest is dropped and matched() becomes true; later pushes return "".
  std::string push(std::string_view text);
  // At the end of generation: the held-back text (none once matched).
  std::string flush();
  bool matched() const { return matched_ >= 0; }
  const std::string& matched_stop() const;  // valid when matched()

 private:
  std::vector<std::string> stops_;
  std::string held_;     // unreleased text: a suffix that is a proper prefix of some stop string
  int32_t matched_ = -1;  // index into stops_
};

// One request: the engine's parameters (prompt ids with BOS when wanted, sampling, max tokens, ignore_eos,
// cache salt, n_logprobs: alternatives reported per token or < 0 for none, cache_pins: Anthropic's cache_control
// breakpoints in prompt order) plus what only text generation needs.
struct GenerationRequest {
  engine::RequestParams params;
  std::vector<std::string> stop;      // stop strings, each non-empty
  bool text_start = false;            // the output starts a new text (chat reply): the leading-space rule of
                                      // Tokenizer::decode applies; false continues the prompt (completions)
  bool cache_explain = false;         // "cache_explain": true: the response carries server/api/cache_explain.h
  // The reply's tokens carry harmony channels (server/api/reply_channels.h): reasoning goes to
  // GenerationDelta::reasoning, framing nowhere, the rest to text. Ignored when the vocabulary lacks harmony's
  // control tokens.
  bool harmony = false;
  // The reply writes its reasoning between <think> and </think> (server/api/think_split.h): that text goes to
  // GenerationDelta::reasoning. Ignored with `harmony`.
  bool think_tags = false;
  // Control tokens written into the reply's text as their piece (sorted): the tool-call format's markers
  // (server/api/tool_format_detect.h), which decode to nothing otherwise.
  std::vector<int32_t> shown_tokens;
  // What the request asked for and the server does not do exactly (a schema keyword the grammar cannot enforce:
  // "response_format.json_schema.schema.properties.n: 'multipleOf' is not enforced"). Sent back in the
  // response's `warnings` field and the X-Preface-Warnings header.
  std::vector<std::string> warnings;
};

using TopLogprob = engine::TopLogprob;
using TokenLogprob = engine::TokenLogprob;

// A tool call read from the reply's channels (harmony): the function and its arguments as generated.
struct ChannelCall {
  std::string name;
  std::string arguments;
};

struct GenerationDelta {
  std::string text;                   // newly released UTF-8 text (may be empty)
  std::string reasoning;              // newly released reasoning text (harmony or think_tags; may be empty)
  // Tool calls from the reply's channels (harmony): a call's start (its function) and fragments of its arguments.
  std::vector<grammar::ToolCallEvent> calls;
  std::vector<TokenLogprob> logprobs; // the tokens consumed for this delta, when log-probabilities are wanted
};

inline const char* openai_finish_reason(StopKind kind) { return stop_kind_names(kind).openai; }
inline const char* anthropic_stop_reason(StopKind kind) { return stop_kind_names(kind).anthropic; }

class Generation {
 public:
  // Submits to the engine; throws engine::PromptTooLong or preface::Error when the engine rejects the request.
  Generation(engine::Engine& engine, const Tokenizer& tokenizer, GenerationRequest request);
  // Cancels the request when it has not finished (its blocks are freed at the engine's next step).
  ~Generation();
  Generation(const Generation&) = delete;
  Generation& operator=(const Generation&) = delete;

  // Blocks for the next token and returns what it released; nullopt once finished (then summary() is final).
  std::optional<GenerationDelta> next();
  // Asks the engine to stop; next() then drains and finishes with StopKind::Cancelled.
  void cancel();
  bool done() const { return done_; }
  const GenerationSummary& summary() const { return summary_; }
  int32_t n_prompt_tokens() const { return n_prompt_; }
  const std::shared_ptr<engine::RequestStream>& stream() const { return stream_; }
  // The prompt's tokens read from the cache and written to it, known from the first token on (-1 before).
  int32_t prompt_cached_tokens() const { return prompt_cached_; }
  int32_t prompt_written_tokens() const { return prompt_written_; }

 private:
  void finish(StopKind kind);
  // `text` of the content route split at <think> tags when the reply has them: reasoning to `delta`, the content
  // returned (`last`: the reply ended, nothing is held back).
  std::string split_think(std::string text, GenerationDelta& delta, bool last);

  int32_t n_prompt_;
  int32_t n_top_logprobs_;
  std::shared_ptr<engine::RequestStream> stream_;
  const Tokenizer& tokenizer_;
  std::vector<int32_t> shown_tokens_;  // GenerationRequest::shown_tokens
  StreamDecoder decoder_;
  StopMatcher stops_;                 // over the text (content) only
  std::optional<HarmonyChannels> channels_;  // harmony replies
  std::optional<ThinkSplitter> think_;       // <think> replies
  StreamDecoder reasoning_decoder_;
  StreamDecoder call_decoder_;        // the current channel call's arguments
  int32_t n_calls_ = 0;               // channel calls started
  bool done_ = false;
  bool cancelled_ = false;
  int32_t n_consumed_ = 0;            // tokens read from the stream
  int32_t prompt_cached_ = -1, prompt_written_ = -1;
  std::chrono::steady_clock::time_point last_token_time_;
  GenerationSummary summary_;
};

}  // namespace preface::server
