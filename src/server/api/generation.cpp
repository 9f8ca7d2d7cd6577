#include "server/api/generation.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace preface::server {

std::string StopMatcher::push(std::string_view text) {
  if (matched()) return {};
  held_.append(text);
  // The earliest occurrence of any stop string wins.
  size_t best_pos = std::string::npos;
  for (size_t i = 0; i < stops_.size(); ++i) {
    const size_t pos = held_.find(stops_[i]);
    if (pos < best_pos) {
      best_pos = pos;
      matched_ = static_cast<int32_t>(i);
    }
  }
  if (best_pos != std::string::npos) {
    std::string out = held_.substr(0, best_pos);
    held_.clear();
    return out;
  }
  // Hold the longest suffix of held_ that is a proper prefix of some stop string.
  size_t n_hold = 0;
  for (const std::string& stop : stops_) {
    for (size_t k = std::min(stop.size() - 1, held_.size()); k > n_hold; --k) {
      if (held_.compare(held_.size() - k, k, stop, 0, k) == 0) {
        n_hold = k;
        break;
      }
    }
  }
  std::string out = held_.substr(0, held_.size() - n_hold);
  held_.erase(0, held_.size() - n_hold);
  return out;
}

std::string StopMatcher::flush() {
  std::string out;
  out.swap(held_);
  return out;
}

const std::string& StopMatcher::matched_stop() const { return stops_.at(static_cast<size_t>(matched_)); }

Generation::Generation(engine::Engine& engine, const Tokenizer& tokenizer, GenerationRequest request)
    : n_prompt_(static_cast<int32_t>(request.params.prompt.size())),
      n_top_logprobs_(request.params.n_logprobs),
      tokenizer_(tokenizer),
      shown_tokens_(std::move(request.shown_tokens)),
      decoder_(tokenizer, request.text_start),
      stops_(std::move(request.stop)),
      reasoning_decoder_(tokenizer, false),
      call_decoder_(tokenizer, false) {
  if (request.harmony) {
    if (const auto ids = HarmonyChannels::find_tokens(tokenizer)) channels_.emplace(tokenizer, *ids);
  }
  if (request.think_tags && !channels_) {
    // The prompt's last tokens say whether the template left a think block open for the reply.
    think_.emplace(prompt_opens_think(tokenizer, request.params.prompt));
  }
  stream_ = engine.submit(std::move(request.params));
}

Generation::~Generation() {
  if (!stream_->finished()) stream_->cancel();
}

void Generation::cancel() {
  cancelled_ = true;
  stream_->cancel();
}

std::optional<GenerationDelta> Generation::next() {
  if (done_) return std::nullopt;
  std::optional<engine::TokenEvent> ev = stream_->next();
  const auto now = std::chrono::steady_clock::now();
  GenerationDelta delta;
  if (!ev) {
    const engine::RequestStats stats = stream_->stats();
    StopKind kind = StopKind::Length;
    if (cancelled_ || stats.finish == engine::FinishReason::Cancelled) {
      kind = StopKind::Cancelled;
    } else if (stats.finish == engine::FinishReason::Stop) {
      kind = StopKind::EndOfGeneration;
    } else if (stats.finish == engine::FinishReason::Error) {
      kind = StopKind::Error;
    }
    delta.text = stops_.push(split_think(decoder_.flush(), delta, true));
    if (stops_.matched()) {
      kind = StopKind::StopString;
    } else {
      delta.text += stops_.flush();
    }
    if (channels_) delta.reasoning += reasoning_decoder_.flush();
    finish(kind);
    if (delta.text.empty() && delta.reasoning.empty()) return std::nullopt;
    return delta;
  }
  if (n_consumed_ > 0) {
    summary_.inter_token_s.push_back(std::chrono::duration<float>(now - last_token_time_).count());
  }
  last_token_time_ = now;
  ++n_consumed_;
  if (ev->n_cached_tokens >= 0) {
    prompt_cached_ = ev->n_cached_tokens;
    prompt_written_ = ev->n_written_tokens;
  }
  summary_.output_tokens.push_back(ev->token);
  if (n_top_logprobs_ >= 0 && ev->has_logprob) delta.logprobs.push_back(std::move(ev->logprob));
  const ReplyRoute route = channels_ ? channels_->route(ev->token) : ReplyRoute::Content;
  if (route == ReplyRoute::Content) {
    const bool shown = std::binary_search(shown_tokens_.begin(), shown_tokens_.end(), ev->token);
    std::string piece = shown ? decoder_.flush() + tokenizer_.piece(ev->token) : decoder_.push(ev->token);
    delta.text = stops_.push(split_think(std::move(piece), delta, false));
  } else if (route == ReplyRoute::Reasoning) {
    delta.reasoning = reasoning_decoder_.push(ev->token);
  }
  if (channels_ && channels_->n_calls() > n_calls_) {  // a call's header ended: its function is known
    n_calls_ = channels_->n_calls();
    call_decoder_.flush();
    delta.calls.push_back({grammar::ToolCallEvent::Kind::CallStart, n_calls_ - 1, channels_->call_name()});
  }
  if (route == ReplyRoute::Call) {
    std::string fragment = call_decoder_.push(ev->token);
    if (!fragment.empty()) {
      delta.calls.push_back({grammar::ToolCallEvent::Kind::Arguments, n_calls_ - 1, std::move(fragment)});
    }
  }
  if (stops_.matched()) {
    stream_->cancel();
    while (stream_->next()) {
    }
    finish(StopKind::StopString);
  }
  return delta;
}

std::string Generation::split_think(std::string text, GenerationDelta& delta, bool last) {
  if (!think_) return text;
  ThinkSplitter::Parts parts = think_->push(text);
  if (last) {
    ThinkSplitter::Parts rest = think_->flush();
    parts.reasoning += rest.reasoning;
    parts.content += rest.content;
  }
  delta.reasoning += parts.reasoning;
  return std::move(parts.content);
}

void Generation::finish(StopKind kind) {
  done_ = true;
  summary_.kind = kind;
  summary_.stats = stream_->stats();
  if (kind == StopKind::StopString) summary_.stop_string = stops_.matched_stop();
  if (kind == StopKind::StopString || kind == StopKind::Cancelled) {
    summary_.n_completion_tokens = n_consumed_;  // tokens generated past the stop are not the client's
  } else {
    // The engine's count includes an end-of-generation token, which is never streamed.
    summary_.n_completion_tokens = std::max(n_consumed_, summary_.stats.n_generated_tokens);
  }
  if (kind == StopKind::Error) summary_.error = summary_.stats.error;
}

}  // namespace preface::server
