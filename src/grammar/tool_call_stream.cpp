#include "grammar/tool_call_stream.h"

namespace preface::grammar {

ToolCallStream::ToolCallStream(const ToolFormat& format, bool incremental, std::vector<ToolSpec> tools)
    : format_(format), incremental_(incremental), tools_(std::move(tools)) {}

void ToolCallStream::text_out(std::string_view s, std::vector<ToolCallEvent>& out) const {
  if (s.empty()) return;
  if (!out.empty() && out.back().kind == ToolCallEvent::Kind::Text) {
    out.back().text += s;
  } else {
    out.push_back({ToolCallEvent::Kind::Text, 0, std::string(s)});
  }
}

void ToolCallStream::call_out(const std::string& name, const std::string& arguments, std::vector<ToolCallEvent>& out) {
  out.push_back({ToolCallEvent::Kind::CallStart, n_calls_, name});
  out.push_back({ToolCallEvent::Kind::Arguments, n_calls_, arguments});
  ++n_calls_;
}

std::vector<ToolCallEvent> ToolCallStream::push(std::string_view text) {
  std::vector<ToolCallEvent> out;
  if (text_only_) {
    text_out(text, out);
    return out;
  }
  if (!in_region_) {
    pending_ += text;
    size_t partial = std::string::npos;
    const size_t start = find_call_region(format_, pending_, &partial);
    if (start == std::string::npos) {
      if (format_.leads) {
        if (partial != std::string::npos) return out;  // the first characters do not decide yet
        text_only_ = true;
        text_out(pending_, out);
        pending_.clear();
        return out;
      }
      const size_t held = partial == std::string::npos ? pending_.size() : partial;
      text_out(std::string_view(pending_).substr(0, held), out);
      pending_.erase(0, held);
      return out;
    }
    // Whitespace before a leading call stays with the region.
    const size_t cut = format_.leads ? 0 : start;
    text_out(std::string_view(pending_).substr(0, cut), out);
    region_ = pending_.substr(cut);
    pending_.clear();
    in_region_ = true;
  } else {
    region_ += text;
  }
  if (incremental_) {
    const std::vector<ScannedCall> calls = scan_call_region(format_, region_, tools_);
    for (size_t i = static_cast<size_t>(n_calls_); i < calls.size() && calls[i].complete; ++i) {
      call_out(calls[i].name, calls[i].arguments, out);
    }
  }
  return out;
}

std::vector<ToolCallEvent> ToolCallStream::finish() {
  std::vector<ToolCallEvent> out;
  if (!in_region_) {
    text_out(pending_, out);
    pending_.clear();
    return out;
  }
  if (incremental_) return out;  // complete calls went out as they completed; a cut one never does
  const auto parsed = parse_tool_calls(format_, region_, tools_);
  if (!parsed) {
    text_out(region_, out);
  } else {
    text_out(parsed->content, out);
    for (const ParsedToolCall& c : parsed->calls) {
      call_out(c.name, c.arguments.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), out);
    }
  }
  region_.clear();
  return out;
}

}  // namespace preface::grammar
