// Reading calls in any row's format (grammar/tool_formats.h): whole replies and streams, over one scanner
// (grammar/tool_call_scanner.h).
#include <algorithm>

#include "grammar/tool_call_scanner.h"
#include "grammar/tool_calls.h"

namespace preface::grammar {
namespace {

using nlohmann::json;
using detail::Got;
using detail::Scanner;
using detail::call_from_json;
using detail::is_space;
using detail::match_marker;
using detail::parse_bounded;
using detail::trim_view;

// The marker that opens a region (trimmed).
std::string_view opening(const ToolFormat& f) {
  return trim_view(!f.section_open.empty() ? f.section_open : f.call_open);
}

}  // namespace

size_t find_call_region(const ToolFormat& f, std::string_view text, size_t* partial) {
  if (partial != nullptr) *partial = std::string_view::npos;
  const std::string_view open = opening(f);
  if (f.leads || open.empty()) {
    const size_t first = text.find_first_not_of(" \t\r\n");
    if (first == std::string_view::npos) {
      if (partial != nullptr) *partial = 0;
      return std::string_view::npos;
    }
    const std::string_view rest = text.substr(first);
    if (!open.empty()) {
      size_t n = 0;
      const Got g = match_marker(rest, open, &n);
      if (g == Got::Yes) return first;
      if (partial != nullptr && g == Got::End) *partial = first;
      return std::string_view::npos;
    }
    return rest[0] == '{' || rest[0] == '[' ? first : std::string_view::npos;
  }
  // The marker's first word finds candidates; the whole marker (its whitespace flexible) confirms one.
  const std::string_view word = open.substr(0, std::min(open.size(), static_cast<size_t>(std::find_if(
                                                                       open.begin(), open.end(), is_space) - open.begin())));
  for (size_t at = text.find(word); at != std::string_view::npos; at = text.find(word, at + 1)) {
    size_t n = 0;
    const Got g = match_marker(text.substr(at), open, &n);
    if (g == Got::Yes) return at;
    if (g == Got::End) {
      if (partial != nullptr) *partial = at;
      return std::string_view::npos;
    }
  }
  if (partial != nullptr) {
    for (size_t n = std::min(text.size(), word.size() - 1); n > 0; --n) {
      if (text.substr(text.size() - n) == word.substr(0, n)) {
        *partial = text.size() - n;
        break;
      }
    }
  }
  return std::string_view::npos;
}

std::optional<ParsedOutput> parse_tool_calls(const ToolFormat& f, std::string_view text,
                                             const std::vector<ToolSpec>& tools) {
  const size_t start = find_call_region(f, text);
  if (start == std::string_view::npos) return std::nullopt;
  const std::string_view region = text.substr(start);
  Scanner::Result r = Scanner(f, region, tools).run();
  // A JSON-object row without markers whose region is one array of calls (Falcon 3's <tool_call>[...]).
  ParsedOutput out;
  out.content = std::string(trim_view(text.substr(0, start)));
  for (size_t i = 0; i < r.calls.size(); ++i) {
    if (!r.calls[i].complete) break;
    out.calls.push_back({r.calls[i].name, std::move(r.args[i])});
  }
  if (r.status == Got::No && !r.bad_in_call) {
    // Something other than a call where the next call or the region's end belongs; one array of calls in a
    // JSON-object row's call (Falcon 3 writes <tool_call>[{...}]</tool_call>) is read as its calls.
    return std::nullopt;
  }
  if (out.calls.empty() && f.syntax == ToolSyntax::JsonObject) {
    std::string_view body = trim_view(region);
    const std::string_view open = trim_view(f.call_open), close = trim_view(f.call_close);
    if (body.substr(0, open.size()) == open && body.size() >= open.size() + close.size() &&
        body.substr(body.size() - close.size()) == close) {
      body = trim_view(body.substr(open.size(), body.size() - open.size() - close.size()));
      const json j = parse_bounded(body);
      if (j.is_array()) {
        for (const json& e : j) {
          auto c = call_from_json(e, f);
          if (!c) return std::nullopt;
          out.calls.push_back(std::move(*c));
        }
      }
    }
  }
  if (out.calls.empty()) return std::nullopt;
  return out;
}

std::vector<ScannedCall> scan_call_region(const ToolFormat& f, std::string_view region,
                                          const std::vector<ToolSpec>& tools) {
  Scanner::Result r = Scanner(f, region, tools).run();
  return std::move(r.calls);
}

}  // namespace preface::grammar
