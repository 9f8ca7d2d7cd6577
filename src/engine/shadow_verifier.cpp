#include "engine/shadow_verifier.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

namespace preface::engine {

void ShadowVerifier::note_hit(uint64_t request_id, std::span<const int32_t> prompt, const std::string& salt,
                              int32_t n_cached, std::span<const float> logits) {
  if (n_cached <= 0 || fraction_ <= 0) return;
  const double f = std::min(fraction_, 1.0);
  const uint64_t k = ++n_hits_seen_;
  if (std::floor(static_cast<double>(k) * f) <= std::floor(static_cast<double>(k - 1) * f)) return;
  if (static_cast<int32_t>(pending_.size()) >= max_pending_) {
    ++n_dropped_;
    return;
  }
  Verification v;
  v.request_id = request_id;
  v.prompt.assign(prompt.begin(), prompt.end());
  v.salt = salt;
  v.n_cached = n_cached;
  v.hit_logits.assign(logits.begin(), logits.end());
  pending_.push_back(std::move(v));
}

const ShadowVerifier::Verification& ShadowVerifier::start(uint64_t shadow_id) {
  active_ = std::move(pending_.front());
  pending_.pop_front();
  shadow_id_ = shadow_id;
  done_ = false;
  return *active_;
}

void ShadowVerifier::check(const float* logits) {
  done_ = true;
  const Verification& v = *active_;
  const size_t n = v.hit_logits.size();
  if (std::memcmp(v.hit_logits.data(), logits, n * sizeof(float)) == 0) {
    ++n_match_;
    return;
  }
  ++n_mismatch_;
  size_t first = n, n_diff = 0;
  for (size_t i = 0; i < n; ++i) {
    if (std::memcmp(&v.hit_logits[i], &logits[i], sizeof(float)) != 0) {
      if (first == n) first = i;
      ++n_diff;
    }
  }
  std::fprintf(stderr,
               "preface: cache verification MISMATCH: request %llu (%d of %zu prompt tokens from the cache): "
               "logit[%zu] hit=%.9g cold=%.9g (%zu of %zu logits differ)\n",
               static_cast<unsigned long long>(v.request_id), v.n_cached, v.prompt.size(), first,
               static_cast<double>(v.hit_logits[first]), static_cast<double>(logits[first]), n_diff, n);
}

void ShadowVerifier::on_finish(bool requeue) {
  if (!done_) {
    if (requeue) {
      pending_.push_front(std::move(*active_));  // yielded to live work: again later
    } else {
      ++n_dropped_;  // failed, or the engine is stopping
    }
  }
  active_.reset();
}

}  // namespace preface::engine
