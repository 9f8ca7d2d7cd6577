#include "kv/tier_queue.h"

#include <chrono>

namespace preface::kv {
namespace {

size_t bytes_of(const TierWrite& w) { return w.payload ? w.payload->size() : 0; }

}  // namespace

TierQueue::TierQueue(size_t max_bytes, std::function<void(const TierWrite&)> write)
    : max_bytes_(max_bytes), write_(std::move(write)), thread_([this] { run(); }) {}

TierQueue::~TierQueue() { stop(); }

bool TierQueue::push(TierWrite item) {
  {
    std::lock_guard lock(mu_);
    const size_t n = bytes_of(item);
    if (stopping_ || (queued_bytes_ + n > max_bytes_ && !queue_.empty())) return false;
    auto shared = std::make_shared<TierWrite>(std::move(item));
    if (shared->payload) pending_[shared->meta.hash] = shared;
    queued_bytes_ += n;
    queue_.push_back(std::move(shared));
  }
  cv_.notify_one();
  return true;
}

std::shared_ptr<const std::vector<uint8_t>> TierQueue::pending(const Digest& hash, RecordMeta* meta) const {
  std::lock_guard lock(mu_);
  const auto it = pending_.find(hash);
  if (it == pending_.end()) return nullptr;
  *meta = it->second->meta;
  return it->second->payload;
}

bool TierQueue::contains(const Digest& hash) const {
  std::lock_guard lock(mu_);
  return pending_.contains(hash);
}

size_t TierQueue::drop_namespace(const Digest& ns) {
  std::unique_lock lock(mu_);
  size_t n_dropped = 0;
  for (auto it = queue_.begin(); it != queue_.end();) {
    const TierWrite& w = **it;
    if (!w.payload || w.meta.ns != ns) {
      ++it;
      continue;
    }
    if (const auto p = pending_.find(w.meta.hash); p != pending_.end() && p->second == *it) pending_.erase(p);
    queued_bytes_ -= bytes_of(w);
    it = queue_.erase(it);
    ++n_dropped;
  }
  if (queue_.empty() && !busy_) idle_cv_.notify_all();
  done_cv_.wait(lock, [&] { return stopping_ || !current_ || !current_->payload || current_->meta.ns != ns; });
  return n_dropped;
}

bool TierQueue::flush(int timeout_ms) {
  std::unique_lock lock(mu_);
  return idle_cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                           [&] { return stopping_ || (queue_.empty() && !busy_); });
}

void TierQueue::stop() {
  {
    std::lock_guard lock(mu_);
    if (stopping_ && !thread_.joinable()) return;
    stopping_ = true;
  }
  cv_.notify_all();
  idle_cv_.notify_all();
  done_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void TierQueue::run() {
  while (true) {
    std::shared_ptr<TierWrite> item;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (stopping_) {
        queue_.clear();
        pending_.clear();
        queued_bytes_ = 0;
        idle_cv_.notify_all();
        return;
      }
      item = std::move(queue_.front());
      queue_.pop_front();
      busy_ = true;
      current_ = item;
    }
    write_(*item);
    {
      std::lock_guard lock(mu_);
      busy_ = false;
      current_.reset();
      queued_bytes_ -= bytes_of(*item);
      if (item->payload) {
        const auto it = pending_.find(item->meta.hash);
        if (it != pending_.end() && it->second == item) pending_.erase(it);
      }
      if (queue_.empty()) idle_cv_.notify_all();
    }
    done_cv_.notify_all();
  }
}

}  // namespace preface::kv
