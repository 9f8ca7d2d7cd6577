// One sequence on a model with its own KV storage (the sequence takes blocks 0, 1, 2, ... in order): feeding
// prompt chunks and generated tokens, and the sample-and-feed generation loop shared by `run` and `eval`.
#pragma once
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "engine/sampler.h"
#include "kv/kv_storage.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"
#include "util/thread_pool.h"

namespace preface::cli {

class Session {
 public:
  // Room for max_tokens positions (capped at the model's context length). Throws preface::Error when kv_type
  // cannot store the model's heads (q8_0 needs head_dim % 32 == 0; see model::check_kv_type_fits).
  Session(model::Model& model, ThreadPool& pool, model::KvType kv_type, int32_t block_size, int32_t max_tokens);

  // Runs `tokens` at positions n_past().. in batches of at most the model's max_batch_tokens. Returns the last
  // token's logits [n_vocab] (valid until the next call). all_logits, when given, receives [n][n_vocab], the
  // logits of every token fed. Throws preface::Error when the tokens do not fit in capacity().
  const float* feed(std::span<const int32_t> tokens, std::vector<float>* all_logits = nullptr);

  int32_t n_past() const { return n_past_; }
  int32_t capacity() const { return capacity_; }

 private:
  model::Model& model_;
  ThreadPool& pool_;
  int32_t capacity_;
  kv::KvStorage storage_;
  std::vector<int32_t> block_table_;  // [n_blocks] = 0, 1, 2, ...
  model::ForwardBatch batch_;
  std::vector<float> last_logits_;    // [n_vocab]
  int32_t n_past_ = 0;
};

struct GenerationStats {
  int32_t n_prompt = 0;
  int32_t n_generated = 0;
  double prompt_seconds = 0.0;
  double generation_seconds = 0.0;
};

// Feeds `prompt` (non-empty), then samples up to n_generate tokens, feeding each back, until an
// end-of-generation token (not passed on, when stop_at_eog) or the session is full. on_token(id) is called
// for every generated token as soon as it is chosen.
GenerationStats generate(Session& session, const Tokenizer& tokenizer, engine::Sampler& sampler,
                         std::span<const int32_t> prompt, int32_t n_generate, bool stop_at_eog,
                         const std::function<void(int32_t)>& on_token);

// The prompt's token ids with BOS per the vocabulary; an empty prompt becomes BOS alone. Throws preface::Error
// when that leaves no token at all.
std::vector<int32_t> encode_prompt(const Tokenizer& tokenizer, const std::string& prompt);

}  // namespace preface::cli
