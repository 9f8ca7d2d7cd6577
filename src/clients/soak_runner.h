// `preface soak`'s driver: measures the server's tokens per word, computes one reference answer per well-formed
// prompt alone, then runs N client threads over Workload::make for a fixed time, classifying every answer, while
// a monitor scrapes /metrics for the KV invariants gauge; at the end it waits for the server's blocks in use to
// drain to 0. Only talks HTTP, so it can soak a server in another process.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "clients/loadgen_client.h"
#include "clients/soak_workload.h"

namespace preface::cli::soak {

// What one request came to.
enum class Outcome {
  kOk,                // a well-formed request answered 200 with the reference text
  kExpected4xx,       // a malformed or over-limit request got the status it should (400 or 413)
  kVanished,          // the client closed mid-stream on purpose; the text so far was a prefix of the reference
  kMismatch,          // 200 with other text than the reference (or an unreadable 200 body)
  kUnexpectedStatus,  // any other HTTP status, or an error event inside a stream
  kTransportError,    // no HTTP answer: connection refused or reset, timeout
};
inline constexpr int kNumOutcomes = 6;
const char* outcome_name(Outcome o);  // "ok", "expected_4xx", "vanished", "mismatch", ...

struct Options {
  loadgen::Target target;
  int32_t n_clients = 8;
  double seconds = 60;
  double timeout_s = 120;   // per request
  Spec spec;                // seed and limits; prompt lengths are derived from the server (see run)
  bool server_checks = true;  // scrape /metrics (preface only): invariants during the run, blocks in use after it
};

struct Report {
  std::array<int64_t, kNumOutcomes> n{};  // [outcome] requests, reference phase included
  int64_t n_references = 0;               // distinct well-formed keys with a reference answer
  double seconds = 0;                     // the concurrent phase
  double tokens_per_word = 0;             // measured with /tokenize
  int32_t long_prompt_tokens = 0, over_prompt_tokens = 0;  // targets the long and over-limit prompts were sized to
  int64_t kv_blocks_in_use = -1;          // at the end, after draining; -1: not read
  int64_t n_evictions = -1, n_preemptions = -1;  // the server's counters at the end (since it started)
  int64_t n_scrapes = 0, n_invariant_failures = 0;  // /metrics scrapes during and after the run
  bool metrics_ok = true;                 // every scrape answered and had the gauges
  std::vector<std::string> examples;      // the first few failures, one line each

  int64_t n_requests() const;
  int64_t n_failures() const;  // mismatch + unexpected_status + transport_error
  bool passed(bool server_checks) const;
  std::string summary() const;  // one line of key=value pairs
};

// Runs the whole soak. Throws preface::Error when the server cannot be reached at the start.
Report run(const Options& options);

// Classifies `result` of request `r` against `reference` (null: none yet). Sets *why for the failures.
Outcome classify(const Request& r, const loadgen::RequestResult& result, const std::string* reference,
                 std::string* why);

// The generated text of a non-streamed 200 body of `path`; false when the body is not one.
bool response_text(const std::string& path, const std::string& body, std::string* text);

}  // namespace preface::cli::soak
