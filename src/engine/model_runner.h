// One step's model work: turns the scheduler's plan into a batch, runs the backend's forward pass, and samples
// the next token of every sequence whose chunk reached the end of its known tokens (with log-probabilities when
// the request asked). Knows nothing of streams, stop rules or counters (engine.h) nor of blocks beyond the block
// tables it passes on (scheduler.h).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "engine/backend.h"
#include "engine/logprobs.h"
#include "engine/scheduler.h"

namespace preface::engine {

// What the step produced for one chunk of the plan that reached the end of its sequence's tokens.
struct SampledToken {
  size_t chunk = 0;                    // index into the plan
  int32_t token = -1;                  // -1: the request's constraint failed (error says why)
  std::string error;
  bool has_logprob = false;            // the request's n_logprobs >= 0
  TokenLogprob logprob;
  const float* logits = nullptr;       // [n_vocab], valid until the next run()
};

// The logits of a prompt position a request asked for (RequestParams::prompt_logits), not sampled.
struct PromptLogits {
  size_t chunk = 0;                    // index into the plan
  int32_t pos = 0;
  const float* logits = nullptr;       // [n_vocab], valid until the next run()
};

struct StepOutput {
  std::vector<SampledToken> sampled;   // in plan order
  std::vector<PromptLogits> prompt;    // in plan order, positions ascending
};

class ModelRunner {
 public:
  // Sizes the logits buffer for max_running sequences (one sampled row each per step); it grows when a step
  // also asks for prompt positions' logits.
  ModelRunner(Backend& backend, int32_t max_running);

  // Runs the plan's chunks (each seq->tokens[n_computed, n_computed + n_tokens)) in one forward pass. Does not
  // advance the sequences (the scheduler's on_computed does). Throws whatever the backend or sampler throws,
  // except a sequence's constraint failing (a grammar too ambiguous, or allowing no token): that sequence alone
  // gets token -1 and the error. Constraint masks are computed here, on the engine thread.
  StepOutput run(const std::vector<ScheduledChunk>& plan);

 private:
  Backend& backend_;
  model::ForwardBatch batch_;
  std::vector<float> logits_;  // [rows][n_vocab], rows >= max_running
};

}  // namespace preface::engine
