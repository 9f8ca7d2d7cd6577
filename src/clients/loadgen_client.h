// One streamed OpenAI-compatible completion request, timed: `preface bench serve` sends these to any server that
// speaks /v1/completions with server-sent events (preface, llama.cpp, vLLM, SGLang...).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace preface::cli::loadgen {

struct Target {
  std::string scheme_host_port;  // "http://127.0.0.1:8080", as httplib::Client takes it
  std::string path_prefix;       // prepended to "/v1/...": "" or e.g. "/proxy"
  std::string api_key;           // sent as "Authorization: Bearer" when not empty
};

// Splits a base URL ("http://host:port", optionally with a path, a trailing "/" or "/v1") into a Target.
// Throws preface::Error for a URL that is not http(s)://host[:port][/path].
Target parse_url(const std::string& url, const std::string& api_key);

struct RequestParams {
  std::string model;
  std::string prompt;
  int32_t max_tokens = 16;
  double temperature = 0.0;
  bool ignore_eos = true;  // fixed output lengths, so servers are compared on equal work
  std::string session_id;  // sent as X-Session-Id when not empty (a proxy's session-affinity key)
};

// What one request measured. Times are seconds from just before the request was sent.
struct RequestResult {
  bool ok = false;
  std::string error;              // why !ok: transport error, HTTP status and body, or an error event
  double ttft_s = 0;              // first chunk carrying generated text
  double e2e_s = 0;               // the end of the stream
  std::vector<double> itl_s;      // [n_text_chunks - 1] gaps between consecutive text chunks
  std::string text;               // the generated text, concatenated
  int64_t n_prompt_tokens = 0;    // from the final usage chunk; 0 when the server sent none
  int64_t n_cached_tokens = 0;    // usage.prompt_tokens_details.cached_tokens
  int64_t n_completion_tokens = 0;
  bool has_usage = false;
  // Filled by post_request only:
  int http_status = 0;            // 0 when no response line arrived
  std::string body;               // a non-streamed answer (<= 1 MiB) or a non-2xx body (<= 4096 bytes)
  bool vanished = false;          // the client closed the connection on purpose (vanish_after_chunks)
};

// Sends `p` to target's /v1/completions with stream=true and stream_options.include_usage=true and reads the
// event stream to its end. Never throws for a server-side failure: it is reported in the result.
RequestResult run_request(const Target& target, const RequestParams& p, double timeout_s);

// POSTs `body` (sent as is, so it may be malformed on purpose) as application/json to target's `path` ("/v1/...").
// stream: the 2xx answer is read as server-sent events, OpenAI's (choices[0].text or .delta.content, [DONE]) or
// Anthropic's (content_block_delta text, message_stop), into `text`; else the whole answer is kept in `body`.
// vanish_after_chunks > 0: once that many text chunks arrived the connection is closed mid-stream (a client that
// goes away), and the result has vanished = true and ok = false. Never throws for a server-side failure.
RequestResult post_request(const Target& target, const std::string& path, const std::string& body, bool stream,
                           double timeout_s, int32_t vanish_after_chunks = 0);

// The id of the first model in target's /v1/models; throws preface::Error when the server does not answer.
std::string first_model(const Target& target);

}  // namespace preface::cli::loadgen
