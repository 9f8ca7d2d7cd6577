#include "grammar/tool_call_stream.h"

#include <algorithm>

#include <nlohmann/json.hpp>

namespace preface::grammar {
namespace {

constexpr std::string_view kHermesOpen = "<tool_call>";
constexpr std::string_view kLlamaTag = "<|python_tag|>";
constexpr std::string_view kMistralTag = "[TOOL_CALLS]";

// The length of the longest suffix of `s` that is a proper prefix of `marker` (text that may still become it).
size_t partial_marker(std::string_view s, std::string_view marker) {
  for (size_t n = std::min(s.size(), marker.size() - 1); n > 0; --n) {
    if (s.substr(s.size() - n) == marker.substr(0, n)) return n;
  }
  return 0;
}

ToolCallEvent event(ToolCallEvent::Kind kind, int32_t index, std::string text) {
  return ToolCallEvent{kind, index, std::move(text)};
}

}  // namespace

ToolCallStream::ToolCallStream(ToolCallFormat format, bool incremental)
    : format_(format), incremental_(incremental), mode_(format == ToolCallFormat::Hermes ? Mode::Text : Mode::Undecided) {}

void ToolCallStream::text_out(std::string_view s, std::vector<ToolCallEvent>& out) const {
  if (s.empty()) return;
  if (!out.empty() && out.back().kind == ToolCallEvent::Kind::Text) {
    out.back().text += s;
  } else {
    out.push_back(event(ToolCallEvent::Kind::Text, 0, std::string(s)));
  }
}

// Llama3 / Mistral: the first non-space character says whether the output is a call region.
void ToolCallStream::decide(std::vector<ToolCallEvent>& out) {
  const size_t first = pending_.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) return;
  const std::string_view s = std::string_view(pending_).substr(first);
  const std::string_view tag = format_ == ToolCallFormat::Llama3 ? kLlamaTag : kMistralTag;
  const char open = format_ == ToolCallFormat::Llama3 ? '{' : '[';
  if (s.size() < tag.size() && tag.substr(0, s.size()) == s && s[0] != open) return;  // may still become the tag
  if (s[0] == open || s.substr(0, tag.size()) == tag) {
    mode_ = Mode::Calls;
    region_ = std::move(pending_);
    pending_.clear();
    if (incremental_) scan(region_, out);
    return;
  }
  mode_ = Mode::Text;
  text_out(pending_, out);
  pending_.clear();
}

std::vector<ToolCallEvent> ToolCallStream::push(std::string_view text) {
  std::vector<ToolCallEvent> out;
  if (mode_ == Mode::Calls) {
    region_ += text;
    if (incremental_) scan(text, out);
    return out;
  }
  pending_ += text;
  if (mode_ == Mode::Undecided) {
    decide(out);
    return out;
  }
  if (format_ != ToolCallFormat::Hermes) {
    text_out(pending_, out);
    pending_.clear();
    return out;
  }
  const size_t at = pending_.find(kHermesOpen);
  if (at != std::string::npos) {
    text_out(std::string_view(pending_).substr(0, at), out);
    mode_ = Mode::Calls;
    region_ = pending_.substr(at);
    pending_.clear();
    if (incremental_) scan(region_, out);
    return out;
  }
  const size_t keep = partial_marker(pending_, kHermesOpen);
  text_out(std::string_view(pending_).substr(0, pending_.size() - keep), out);
  pending_.erase(0, pending_.size() - keep);
  return out;
}

std::vector<ToolCallEvent> ToolCallStream::finish() {
  std::vector<ToolCallEvent> out;
  if (mode_ != Mode::Calls) {
    text_out(pending_, out);
    pending_.clear();
    return out;
  }
  if (incremental_) {
    if (n_calls_ == 0) text_out(region_, out);  // cut short before any call was named
    return out;
  }
  const std::optional<ParsedOutput> parsed = parse_tool_calls(format_, region_);
  if (!parsed || parsed->calls.empty()) {
    text_out(region_, out);
    return out;
  }
  text_out(parsed->content, out);
  for (const ParsedToolCall& c : parsed->calls) {
    out.push_back(event(ToolCallEvent::Kind::CallStart, n_calls_, c.name));
    out.push_back(event(ToolCallEvent::Kind::Arguments, n_calls_, c.arguments.dump()));
    ++n_calls_;
  }
  return out;
}

// Reads the region byte by byte: depth 0 is the wrapper (tags, '[', separators), depth 1 a call object whose
// "name" string announces the call, and the object value of its "arguments" / "parameters" key is released as it
// comes. Any other object value inside a call is skipped.
void ToolCallStream::scan(std::string_view bytes, std::vector<ToolCallEvent>& out) {
  auto flush_args = [&] {
    if (!call_started_ || args_.size() <= args_released_) return;
    out.push_back(event(ToolCallEvent::Kind::Arguments, n_calls_ - 1, args_.substr(args_released_)));
    args_released_ = args_.size();
  };
  for (const char c : bytes) {
    if (depth_ >= 2) {
      if (in_args_) args_ += c;
      if (in_string_) {
        if (escape_) {
          escape_ = false;
        } else if (c == '\\') {
          escape_ = true;
        } else if (c == '"') {
          in_string_ = false;
        }
      } else if (c == '"') {
        in_string_ = true;
      } else if (c == '{' || c == '[') {
        ++depth_;
      } else if (c == '}' || c == ']') {
        if (--depth_ == 1) in_args_ = false;
      }
      continue;
    }
    if (depth_ == 1) {
      if (in_string_) {
        if (escape_) {
          escape_ = false;
          string_ += c;
        } else if (c == '\\') {
          escape_ = true;
          string_ += c;
        } else if (c == '"') {
          in_string_ = false;
          const nlohmann::json s = nlohmann::json::parse("\"" + string_ + "\"", nullptr, false);
          const std::string value = s.is_string() ? s.get<std::string>() : string_;
          if (expect_key_) {
            key_ = value;
          } else if (key_ == "name" && !call_started_) {
            call_started_ = true;
            out.push_back(event(ToolCallEvent::Kind::CallStart, n_calls_++, value));
          }
        } else {
          string_ += c;
        }
      } else if (c == '"') {
        in_string_ = true;
        string_.clear();
      } else if (c == ':') {
        expect_key_ = false;
      } else if (c == ',') {
        expect_key_ = true;
      } else if (c == '{' || c == '[') {
        depth_ = 2;
        in_args_ = c == '{' && !expect_key_ && (key_ == "arguments" || key_ == "parameters");
        if (in_args_) {
          args_.clear();
          args_.push_back('{');
        }
      } else if (c == '}') {
        depth_ = 0;
        flush_args();
      }
      continue;
    }
    if (c == '{') {  // a call object opens
      depth_ = 1;
      expect_key_ = true;
      key_.clear();
      args_.clear();
      args_released_ = 0;
      call_started_ = false;
    }
  }
  flush_args();
}

}  // namespace preface::grammar
