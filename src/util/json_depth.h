// A linear pre-scan of JSON text for its nesting depth, so that a parser without a depth limit (nlohmann's, or
// one whose depth callback costs more than linear time) only ever sees text whose values can be copied, compared,
// dumped and destroyed without overflowing the stack (those operations recurse once per level).
#pragma once
#include <cstddef>
#include <string_view>

namespace preface {

// The deepest nesting of objects and arrays in `text` (a top-level object is depth 1), counting brackets outside
// string literals; stops scanning, and returns a value above `limit`, as soon as the depth passes `limit`. Valid
// JSON gets its exact depth; for malformed text the result is only a bound for the parser that rejects it.
// One pass, no allocation.
size_t json_nesting_depth(std::string_view text, size_t limit);

// json_nesting_depth(text, max_depth) <= max_depth.
inline bool json_depth_within(std::string_view text, size_t max_depth) {
  return json_nesting_depth(text, max_depth) <= max_depth;
}

}  // namespace preface
