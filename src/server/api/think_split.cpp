#include "server/api/think_split.h"

#include <algorithm>

namespace preface::server {
namespace {

constexpr std::string_view kOpen = "<think>";
constexpr std::string_view kClose = "</think>";

// Length of the longest suffix of `s` that is a proper prefix of `tag` (held back: it may become the tag).
size_t partial_tag(std::string_view s, std::string_view tag) {
  for (size_t k = std::min(tag.size() - 1, s.size()); k > 0; --k) {
    if (s.substr(s.size() - k) == tag.substr(0, k)) return k;
  }
  return 0;
}

}  // namespace

ThinkSplitter::Parts ThinkSplitter::push(std::string_view text) {
  held_.append(text);
  Parts out;
  for (;;) {
    if (state_ == State::Start) {
      const size_t lead = held_.find_first_not_of(" \n\r\t");
      if (lead == std::string::npos) return out;  // whitespace so far: a block may still begin
      const std::string_view rest = std::string_view(held_).substr(lead);
      if (rest.substr(0, kOpen.size()) == kOpen) {
        held_.erase(0, lead + kOpen.size());
        state_ = State::Reasoning;
        continue;
      }
      if (kOpen.substr(0, rest.size()) == rest) return out;  // "<thi": undecided
      state_ = State::Content;
      continue;
    }
    if (state_ == State::Reasoning) {
      const size_t close = held_.find(kClose);
      if (close != std::string::npos) {
        out.reasoning += held_.substr(0, close);
        held_.erase(0, close + kClose.size());
        state_ = State::AfterClose;
        continue;
      }
      const size_t keep = partial_tag(held_, kClose);
      out.reasoning += held_.substr(0, held_.size() - keep);
      held_.erase(0, held_.size() - keep);
      return out;
    }
    if (state_ == State::AfterClose) {
      const size_t lead = held_.find_first_not_of(" \n\r\t");
      if (lead == std::string::npos) {
        held_.clear();
        return out;
      }
      held_.erase(0, lead);
      state_ = State::Content;
      continue;
    }
    out.content += held_;
    held_.clear();
    return out;
  }
}

ThinkSplitter::Parts ThinkSplitter::flush() {
  Parts out;
  if (state_ == State::Reasoning) {
    out.reasoning = std::move(held_);
  } else if (state_ != State::AfterClose) {
    out.content = std::move(held_);
  }
  held_.clear();
  return out;
}

bool template_thinks(std::string_view source) {
  return source.find(kOpen) != std::string_view::npos && source.find(kClose) != std::string_view::npos;
}

bool prompt_opens_think(const Tokenizer& tokenizer, const std::vector<int32_t>& prompt) {
  std::string tail;
  for (size_t i = prompt.size() > 16 ? prompt.size() - 16 : 0; i < prompt.size(); ++i) {
    tail += tokenizer.token_to_bytes(prompt[i]);
  }
  return prompt_opens_think(tail);
}

bool prompt_opens_think(std::string_view tail) {
  const size_t open = tail.rfind(kOpen), close = tail.rfind(kClose);
  return open != std::string_view::npos && (close == std::string_view::npos || close < open);
}

}  // namespace preface::server
