// How one generation ended and what it cost: the record the APIs answer from (usage, finish reasons) and the
// observers count (metrics, per-tenant cache statistics). Below server/api and server/http, so both read it.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "engine/engine.h"

namespace preface::server {

enum class StopKind { EndOfGeneration, StopString, Length, Cancelled, Error };

// The one table of how a generation ended, in every vocabulary: metrics and log label, OpenAI finish_reason,
// Anthropic stop_reason.
struct StopKindNames {
  const char* label;                  // "eos" | "stop_string" | "length" | "cancelled" | "error"
  const char* openai;                 // "stop" | "length"
  const char* anthropic;              // "end_turn" | "stop_sequence" | "max_tokens"
};
const StopKindNames& stop_kind_names(StopKind kind);

struct GenerationSummary {
  StopKind kind = StopKind::Length;
  std::string stop_string;            // the stop string that ended it (kind == StopString)
  std::string error;                  // kind == Error
  engine::RequestStats stats;         // the engine's record (prompt / cached / written tokens, timings)
  int32_t n_completion_tokens = 0;    // tokens generated up to the stop (an end-of-generation token counts)
  std::vector<int32_t> output_tokens; // the tokens read from the engine, in order (never the stop token:
                                      // stats.stop_token)
  std::vector<float> inter_token_s;   // [n_tokens - 1] gaps between consecutive tokens reaching the server
};

}  // namespace preface::server
