// A Jinja interpreter for chat templates (tokenizer.chat_template). No C++ Jinja library is packaged in
// Debian, so preface carries this one: parse once (Template::parse), render many times, from any thread.
//
// Language (jinja2 3.1 semantics, configured as Hugging Face transformers does: trim_blocks, lstrip_blocks,
// loopcontrols, no autoescape, keep_trailing_newline off):
//   statements   if/elif/else; for (tuple targets, `if` filter, else, loop.index/index0/revindex/revindex0/
//                first/last/length/previtem/nextitem/cycle()); set (tuple, namespace attribute, block set);
//                macro (defaults, `caller`); call; filter blocks; break/continue; generation (renders its body);
//                raw; comments; whitespace control `-` and `+`.
//   expressions  literals, lists, dicts, tuples (as lists), . and [] (slices with steps, negative indices),
//                calls with keyword arguments, + - * / // % ** ~, comparisons (chained), in / not in, and/or/not,
//                `x if c else y`, filters (filters.cpp) and tests (tests.cpp).
//   globals      range, dict, namespace, raise_exception(msg) (a JinjaError of kind Raised whose what() is msg),
//                strftime_now(fmt) (RenderConfig::clock; the local time by default).
//   methods      str: strip/lstrip/rstrip(chars), split/rsplit, splitlines, startswith/endswith (str or list),
//                replace, upper/lower/title/capitalize, find/rfind/index/count, join, format (positional {}),
//                isdigit/isalpha/isspace...; dict: items/keys/values/get; list: append/extend/pop/insert/index/count.
// Not supported (syntax errors naming the tag): extends/block/include/import/from/with/do/autoescape/trans,
// *args/**kwargs, recursive loops, and the sandbox's refusal of list.append (jinja2's immutable sandbox raises
// SecurityError there; preface allows it so that namespace-held lists work as templates expect).
//
// Limits (RenderConfig): output bytes, total loop iterations and macro call depth, each a JinjaError of kind
// Limit with a message naming the cap; parsing caps nesting at 128 levels.
#pragma once
#include <cstddef>
#include <cstdint>
#include <ctime>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "chat/jinja/value.h"

namespace preface::chat::jinja {

struct Node;

struct RenderConfig {
  size_t max_output_bytes = 8u << 20;
  int64_t max_loop_iterations = 1'000'000;  // all loops of one render together
  int max_call_depth = 64;                  // nested macro calls
  // The moment strftime_now formats (broken-down local time). Empty: the real clock.
  std::function<std::tm()> clock;
};

class Template {
 public:
  struct Options {
    bool trim_blocks = true;
    bool lstrip_blocks = true;
  };
  // Throws JinjaError(Syntax) naming the line.
  static Template parse(std::string_view source, const Options& options);
  static Template parse(std::string_view source) { return parse(source, Options{}); }

  // Renders with `vars` as the template's variables (besides the globals). Throws JinjaError.
  Str render(const Dict& vars, const RenderConfig& config = {}) const;

 private:
  std::shared_ptr<const std::vector<std::unique_ptr<Node>>> body_;
};

// Python's json.dumps(value, ensure_ascii, indent (<0: none), separators (default per indent), sort_keys).
// Throws JinjaError(Type) for Undefined, callables and namespaces, as json.dumps would.
std::string to_json(const Value& v, int indent = -1, bool ensure_ascii = false, bool sort_keys = false,
                    std::string_view item_sep = {}, std::string_view key_sep = {});

}  // namespace preface::chat::jinja
