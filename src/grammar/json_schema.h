// JSON Schema -> GBNF, for constrained JSON output. Every string the grammar produces is valid JSON that
// validates against the schema; the grammar need not produce every valid instance (see the README's
// "Structured output"): properties come in key order (nlohmann::json's object order), an object with `properties`
// gets no properties beyond them unless they are required, numbers have at most 16 integer and 16 fraction
// digits and an exponent of at most 2 digits (always a finite double), and whitespace between tokens is bounded.
//
// Supported: type (one or a list: object, array, string, number, integer, boolean, null), enum, const,
// properties, required, additionalProperties (false, true or a schema), items, minItems, maxItems, minLength,
// maxLength, pattern (a regex subset: literals, ., classes, \d \w \s, groups, |, * + ? {m,n}, ^ $), format
// (date, time, date-time, uuid), anyOf, oneOf (generated as anyOf), allOf of one schema, $ref to "#" or a JSON
// pointer inside the document ($defs, definitions; recursion allowed), and the annotations (title,
// description, default, examples, $schema, $id, $comment, deprecated, readOnly, writeOnly, strict). Anything
// else throws GrammarError naming the schema path and the keyword.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "grammar/grammar.h"

namespace preface::grammar {

inline constexpr int kMaxSchemaDepth = 64;      // nesting of subschemas
inline constexpr size_t kMaxSchemaRules = 20000;  // rules generated
inline constexpr int64_t kMaxSchemaCount = 10000;  // largest minItems/maxItems/minLength/maxLength honoured

// GBNF text whose `root` matches the JSON texts valid under `schema`. Throws GrammarError (where = the schema
// path, "" for the root, e.g. "properties.x.items").
std::string json_schema_to_gbnf(const nlohmann::json& schema);

// Several schemas in one grammar (tool calls: one schema per tool): rule names[i] matches schema i (each
// schema's $refs resolve inside itself). The text holds the shared primitives and no `root` rule. Throws
// GrammarError with where = "[i]" + the path inside schema i.
std::string json_schemas_gbnf_rules(const std::vector<nlohmann::json>& schemas, const std::vector<std::string>& names);

// GBNF text of any JSON object (OpenAI's response_format json_object).
std::string json_object_gbnf();

}  // namespace preface::grammar
