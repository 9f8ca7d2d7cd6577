#include "server/api/reply_channels.h"

#include <string_view>
#include <vector>

namespace preface::server {
namespace {

// The id of `text` when it is one token of the vocabulary (a control token), else -1.
int32_t single_token(const Tokenizer& tokenizer, std::string_view text) {
  const std::vector<int32_t> ids = tokenizer.encode(text, false, true);
  return ids.size() == 1 ? ids[0] : -1;
}

// The channel a header names: its first word ("analysis", "final", "commentary").
ReplyRoute route_of_header(std::string_view header) {
  const size_t begin = header.find_first_not_of(" \t\n");
  if (begin == std::string_view::npos) return ReplyRoute::Content;
  const size_t end = header.find_first_of(" \t\n<", begin);
  const std::string_view name = header.substr(begin, end == std::string_view::npos ? end : end - begin);
  return name == "analysis" ? ReplyRoute::Reasoning : ReplyRoute::Content;
}

// The recipient named by " to=NAME" in `text` ("functions." dropped), or "" when none is.
std::string recipient_of(std::string_view text) {
  const size_t at = text.find("to=");
  if (at == std::string_view::npos) return {};
  const size_t begin = at + 3;
  const size_t end = text.find_first_of(" \t\n<", begin);
  std::string_view name = text.substr(begin, end == std::string_view::npos ? end : end - begin);
  if (name.substr(0, 10) == "functions.") name.remove_prefix(10);
  return std::string(name);
}

}  // namespace

std::optional<HarmonyTokens> HarmonyChannels::find_tokens(const Tokenizer& tokenizer) {
  HarmonyTokens t;
  t.start = single_token(tokenizer, "<|start|>");
  t.end = single_token(tokenizer, "<|end|>");
  t.message = single_token(tokenizer, "<|message|>");
  t.channel = single_token(tokenizer, "<|channel|>");
  t.constrain = single_token(tokenizer, "<|constrain|>");
  t.call = single_token(tokenizer, "<|call|>");
  t.ret = single_token(tokenizer, "<|return|>");
  if (t.start < 0 || t.end < 0 || t.message < 0 || t.channel < 0) return std::nullopt;
  return t;
}

ReplyRoute HarmonyChannels::route(int32_t token) {
  if (token == ids_.channel) {
    if (state_ != State::Role) role_.clear();
    state_ = State::Header;
    header_.clear();
    return ReplyRoute::Framing;
  }
  switch (state_) {
    case State::Header:
      if (token == ids_.message) {
        body_ = route_of_header(header_);
        std::string recipient = recipient_of(header_);
        if (recipient.empty()) recipient = recipient_of(role_);
        if (!recipient.empty()) {
          body_ = ReplyRoute::Call;
          call_name_ = std::move(recipient);
          ++n_calls_;
        }
        role_.clear();
        state_ = State::Body;
      } else if (header_.size() < 256) {  // <|constrain|> separates the recipient from the content type
        header_ += token == ids_.constrain ? std::string(" ") : tokenizer_.token_to_bytes(token);
      }
      return ReplyRoute::Framing;
    case State::Body:
      if (token == ids_.end || token == ids_.call || token == ids_.ret || token == ids_.start) {
        state_ = State::Role;
        role_.clear();
        return ReplyRoute::Framing;
      }
      if (token == ids_.message || token == ids_.constrain) return ReplyRoute::Framing;
      return body_;
    case State::Role:  // role names and recipients before the next <|channel|>
      if (token != ids_.start && role_.size() < 256) role_ += tokenizer_.token_to_bytes(token);
      return ReplyRoute::Framing;
  }
  return ReplyRoute::Framing;
}

bool template_is_harmony(std::string_view template_source) {
  return template_source.find("<|channel|>") != std::string_view::npos;
}

}  // namespace preface::server
