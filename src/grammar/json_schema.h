// JSON Schema -> GBNF, for constrained JSON output. Every string the grammar produces is valid JSON; it validates
// against the schema unless the compile reports a keyword as loosened (below). The grammar need not produce every
// valid instance (see the README's "Structured output"): properties come in key order (nlohmann::json's object
// order), an object with `properties` gets no properties beyond them unless they are required, numbers have at
// most 16 integer and 16 fraction digits and an exponent of at most 2 digits (always a finite double; bounded
// numbers have no exponent: grammar/number_range.h), and whitespace between tokens is bounded.
//
// Enforced: type (one or a list: object, array, string, number, integer, boolean, null), nullable (OpenAPI),
// enum, const, properties, required, additionalProperties (false, true or a schema), items, prefixItems,
// minItems, maxItems, minLength, maxLength, minimum, maximum, exclusiveMinimum, exclusiveMaximum (numbers or
// draft-4 booleans), pattern (a regex subset: literals, ., classes, \d \w \s, groups, |, * + ? {m,n}, ^ $),
// format (grammar/schema_formats.h), anyOf, oneOf (generated as anyOf), allOf (merged into one schema when the
// parts do not conflict), $ref to "#" or a JSON pointer inside the document ($defs, definitions; recursion
// allowed). Annotations and unknown keywords are ignored, as validators do.
//
// Loosened, never refused: a validation keyword the grammar cannot enforce (multipleOf, uniqueItems, not,
// patternProperties, if/then/else, ...; a pattern outside the regex subset; an unknown string format; length
// beside a pattern or format; keywords beside $ref or anyOf; counts above kMaxSchemaCount) is dropped, the
// nearest looser grammar is generated, and the compile names it in SchemaGrammar::loosened. GrammarError is
// thrown only for a schema that is malformed (a keyword of the wrong type, a bad $ref), unsatisfiable (maxItems
// below minItems, `false`), or too large or deep.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "grammar/grammar.h"

namespace preface::grammar {

inline constexpr int kMaxSchemaDepth = 64;      // nesting of subschemas
inline constexpr size_t kMaxSchemaRules = 20000;  // rules generated
inline constexpr int64_t kMaxSchemaCount = 10000;  // largest minItems/maxItems/minLength/maxLength honoured

// A keyword the grammar does not enforce.
struct Loosened {
  std::string path;  // in the schema ("" for the root, "properties.x.pattern", ...)
  std::string what;  // e.g. "'multipleOf' is not enforced"
  // "<prefix>.<path>: <what>" ("<prefix>: <what>" at the root; no leading dot without a prefix).
  std::string text(const std::string& prefix = "") const;
};

struct SchemaGrammar {
  std::string gbnf;                // `root` matches the JSON texts the grammar produces
  std::vector<Loosened> loosened;  // in the order met
};

// Throws GrammarError (where = the schema path, "" for the root, e.g. "properties.x.items").
SchemaGrammar compile_json_schema(const nlohmann::json& schema);
inline std::string json_schema_to_gbnf(const nlohmann::json& schema) { return compile_json_schema(schema).gbnf; }

// Several schemas in one grammar (tool calls: one schema per tool): rule names[i] matches schema i (each
// schema's $refs resolve inside itself). The text holds the shared primitives and no `root` rule. Throws
// GrammarError with where = "[i]" + the path inside schema i; loosened keywords are appended to `loosened` (when
// given) with the path "[i]" + the path inside schema i.
std::string json_schemas_gbnf_rules(const std::vector<nlohmann::json>& schemas, const std::vector<std::string>& names,
                                    std::vector<Loosened>* loosened = nullptr);

// GBNF text of any JSON object (OpenAI's response_format json_object).
std::string json_object_gbnf();

}  // namespace preface::grammar
