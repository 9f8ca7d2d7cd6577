#include "cli/session.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>

#include "util/error.h"

namespace preface::cli {
namespace {

int32_t blocks_for(int32_t n_tokens, int32_t block_size) { return (n_tokens + block_size - 1) / block_size; }

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

Session::Session(model::Model& model, ThreadPool& pool, model::KvType kv_type, int32_t block_size,
                 int32_t max_tokens)
    : model_(model),
      pool_(pool),
      capacity_(std::clamp(max_tokens, 1, model.config().ctx_len)),
      storage_(model.config(), kv_type, block_size, blocks_for(capacity_, block_size)),
      last_logits_(static_cast<size_t>(model.config().n_vocab)) {
  block_table_.resize(static_cast<size_t>(storage_.n_blocks()));
  for (size_t i = 0; i < block_table_.size(); ++i) block_table_[i] = static_cast<int32_t>(i);
  batch_.block_tables = {&block_table_};
}

const float* Session::feed(std::span<const int32_t> tokens, std::vector<float>* all_logits) {
  if (tokens.empty()) throw Error("nothing to feed");
  if (tokens.size() > static_cast<size_t>(capacity_ - n_past_)) {
    throw Error(std::to_string(n_past_ + tokens.size()) + " tokens exceed the session capacity of " +
                std::to_string(capacity_) + " (context length " + std::to_string(model_.config().ctx_len) + ")");
  }
  const size_t n_vocab = static_cast<size_t>(model_.config().n_vocab);
  const size_t max_batch = static_cast<size_t>(model_.max_batch_tokens());
  if (all_logits != nullptr) all_logits->assign(tokens.size() * n_vocab, 0.0f);
  for (size_t begin = 0; begin < tokens.size(); begin += max_batch) {
    const size_t end = std::min(tokens.size(), begin + max_batch);
    batch_.clear();
    for (size_t i = begin; i < end; ++i) {
      batch_.add(tokens[i], n_past_ + static_cast<int32_t>(i), 0, all_logits != nullptr || i + 1 == tokens.size());
    }
    float* out = all_logits != nullptr ? all_logits->data() + begin * n_vocab : last_logits_.data();
    model_.forward(batch_, storage_.view(), pool_, out);
  }
  n_past_ += static_cast<int32_t>(tokens.size());
  if (all_logits != nullptr) {
    std::memcpy(last_logits_.data(), all_logits->data() + (tokens.size() - 1) * n_vocab, n_vocab * sizeof(float));
  }
  return last_logits_.data();
}

GenerationStats generate(Session& session, const Tokenizer& tokenizer, engine::Sampler& sampler,
                         std::span<const int32_t> prompt, int32_t n_generate, bool stop_at_eog,
                         const std::function<void(int32_t)>& on_token) {
  GenerationStats stats;
  stats.n_prompt = static_cast<int32_t>(prompt.size());
  std::vector<int32_t> history(prompt.begin(), prompt.end());  // [n_past] prompt + generated, for penalties
  const int32_t n_vocab = static_cast<int32_t>(tokenizer.n_vocab());
  auto t0 = std::chrono::steady_clock::now();
  const float* logits = session.feed(prompt);
  stats.prompt_seconds = seconds_since(t0);

  t0 = std::chrono::steady_clock::now();
  while (stats.n_generated < n_generate) {
    const int32_t id = sampler.sample(logits, n_vocab, history);
    if (stop_at_eog && tokenizer.is_end_of_generation(id)) break;
    history.push_back(id);
    ++stats.n_generated;
    on_token(id);
    if (stats.n_generated == n_generate || session.n_past() == session.capacity()) break;
    logits = session.feed(std::span<const int32_t>(&id, 1));
  }
  stats.generation_seconds = seconds_since(t0);
  return stats;
}

std::vector<int32_t> encode_prompt(const Tokenizer& tokenizer, const std::string& prompt) {
  std::vector<int32_t> tokens = tokenizer.encode(prompt, tokenizer.add_bos_default());
  if (tokens.empty() && tokenizer.bos_id() >= 0) tokens.push_back(tokenizer.bos_id());
  if (tokens.empty()) throw Error("the prompt is empty and the vocabulary has no BOS token to start from");
  return tokens;
}

}  // namespace preface::cli
