// Fuzz target: JSON Schemas (response_format.json_schema.schema and the like). json_schema_to_gbnf throws only
// GrammarError; the GBNF it writes always parses, except for a grammar that is too large or a $ref cycle that
// consumes nothing (both GrammarError); and the compiled grammar's matcher agrees with the byte-level reference
// along a walk (grammar_walk.h). Input: JSON text (objects nested at most 64 deep, as the HTTP layer allows).
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "grammar/json_schema.h"
#include "grammar_walk.h"
#include "support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace preface;
  const std::string text(reinterpret_cast<const char*>(data), size);
  int depth = 0, max_depth = 0;
  for (const char c : text) {  // the HTTP layer refuses deeper bodies before building them
    depth += (c == '{' || c == '[') ? 1 : (c == '}' || c == ']') ? -1 : 0;
    max_depth = std::max(max_depth, depth);
  }
  if (max_depth > 64) return 0;
  const nlohmann::json schema = nlohmann::json::parse(text, nullptr, false);
  if (schema.is_discarded()) return 0;
  std::string gbnf;
  try {
    gbnf = grammar::json_schema_to_gbnf(schema);
  } catch (const grammar::GrammarError&) {
    return 0;
  }
  grammar::Grammar g;
  try {
    g = grammar::parse_gbnf(gbnf);
  } catch (const grammar::GrammarError& e) {
    const std::string what = e.what();
    fuzz::check(what.find("left recursion") != std::string::npos || what.find("too large") != std::string::npos,
                "the compiled GBNF does not parse: " + what + "\n" + fuzz::escaped(gbnf));
    return 0;
  }
  fuzz::walk_grammar(g, data, size, 32);
  return 0;
}
