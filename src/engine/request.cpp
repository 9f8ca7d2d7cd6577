#include "engine/request.h"

namespace preface::engine {

std::optional<TokenEvent> RequestStream::next() {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return !events_.empty() || finished_; });
  if (events_.empty()) return std::nullopt;
  TokenEvent ev = std::move(events_.front());
  events_.pop_front();
  return ev;
}

void RequestStream::cancel() {
  std::lock_guard lock(mu_);
  cancel_ = true;
}

bool RequestStream::cancel_requested() const {
  std::lock_guard lock(mu_);
  return cancel_;
}

bool RequestStream::finished() const {
  std::lock_guard lock(mu_);
  return finished_;
}

RequestStats RequestStream::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

void RequestStream::push(TokenEvent ev) {
  {
    std::lock_guard lock(mu_);
    events_.push_back(std::move(ev));
  }
  cv_.notify_all();
}

void RequestStream::add_prompt_logits(const float* row, size_t n_vocab) {
  std::lock_guard lock(mu_);
  prompt_logits_.insert(prompt_logits_.end(), row, row + n_vocab);
}

std::vector<float> RequestStream::prompt_logits() const {
  std::lock_guard lock(mu_);
  return prompt_logits_;
}

void RequestStream::finish(const RequestStats& stats) {
  {
    std::lock_guard lock(mu_);
    stats_ = stats;
    finished_ = true;
  }
  cv_.notify_all();
}

}  // namespace preface::engine
