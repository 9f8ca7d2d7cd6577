// JSON Schema -> grammar: instances accepted and rejected, unsupported keywords named with their path.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "grammar/grammar.h"
#include "grammar/json_schema.h"
#include "grammar/schema_regex.h"

namespace preface::grammar {
namespace {

using nlohmann::json;

Grammar compile(const json& schema) { return parse_gbnf(json_schema_to_gbnf(schema)); }
bool accepts(const Grammar& g, std::string_view s) { return match_bytes(g, s).accepting; }

TEST(JsonSchema, ObjectWithRequiredAndOptionalProperties) {
  const Grammar g = compile(json::parse(R"({"type":"object","properties":{
      "a":{"type":"integer"},"b":{"type":"string","maxLength":3},"c":{"type":"boolean"}},
      "required":["b"],"additionalProperties":false})"));
  EXPECT_TRUE(accepts(g, R"({"b":"xy"})"));
  EXPECT_TRUE(accepts(g, R"({"a":-12,"b":"","c":true})"));
  EXPECT_TRUE(accepts(g, R"({ "a": 0, "b": "abc" })"));
  EXPECT_TRUE(accepts(g, R"({"b":"x","c":false})"));
  EXPECT_FALSE(accepts(g, R"({"a":1})"));           // b required
  EXPECT_FALSE(accepts(g, R"({"b":"abcd"})"));      // maxLength
  EXPECT_FALSE(accepts(g, R"({"b":"x",})"));        // trailing comma
  EXPECT_FALSE(accepts(g, R"({,"b":"x"})"));
  EXPECT_FALSE(accepts(g, R"({"a":01,"b":"x"})"));  // leading zero
  EXPECT_FALSE(accepts(g, R"({"b":"x","d":1})"));   // no other properties
}

TEST(JsonSchema, ArraysEnumsConstAnyOfAndTypeLists) {
  const Grammar g = compile(json::parse(R"({"type":"array","minItems":1,"maxItems":3,
      "items":{"anyOf":[{"enum":["red","green",3]},{"const":{"k":null}},{"type":["number","null"]}]}})"));
  EXPECT_TRUE(accepts(g, R"(["red"])"));
  EXPECT_TRUE(accepts(g, R"([3, {"k":null}, 1.5e+3])"));
  EXPECT_TRUE(accepts(g, R"([null,"green",-0.25])"));
  EXPECT_FALSE(accepts(g, R"([])"));
  EXPECT_FALSE(accepts(g, R"([1,2,3,4])"));
  EXPECT_FALSE(accepts(g, R"(["blue"])"));
  EXPECT_FALSE(accepts(g, R"([{"k":1}])"));
}

TEST(JsonSchema, RecursiveRefs) {
  const Grammar g = compile(json::parse(R"({"$ref":"#/$defs/node","$defs":{"node":{"type":"object",
      "properties":{"v":{"type":"integer"},"kids":{"type":"array","items":{"$ref":"#/$defs/node"}}},
      "required":["v"],"additionalProperties":false}}})"));
  EXPECT_TRUE(accepts(g, R"({"v":1})"));
  EXPECT_TRUE(accepts(g, R"({"kids":[{"v":2},{"kids":[],"v":3}],"v":1})"));
  EXPECT_FALSE(accepts(g, R"({"kids":[{}],"v":1})"));
}

TEST(JsonSchema, StringsPatternsAndFormats) {
  const Grammar p = compile(json::parse(R"({"type":"string","pattern":"^[A-Z]{2}-\\d{3}(x|yz)?$"})"));
  EXPECT_TRUE(accepts(p, R"("AB-123")"));
  EXPECT_TRUE(accepts(p, R"("QQ-000yz")"));
  EXPECT_FALSE(accepts(p, R"("Ab-123")"));
  EXPECT_FALSE(accepts(p, R"("AB-12")"));
  const Grammar unanchored = compile(json::parse(R"({"type":"string","pattern":"ab"})"));
  EXPECT_TRUE(accepts(unanchored, R"("xxabyy")"));
  EXPECT_FALSE(accepts(unanchored, R"("xxayy")"));
  const Grammar quote = compile(json::parse(R"({"type":"string","pattern":"^[\"a]$"})"));
  EXPECT_TRUE(accepts(quote, R"("\"")"));
  EXPECT_TRUE(accepts(quote, R"("a")"));
  EXPECT_FALSE(accepts(quote, "\"\"\""));
  const Grammar date = compile(json::parse(R"({"type":"string","format":"date-time"})"));
  EXPECT_TRUE(accepts(date, R"("2024-02-29T23:59:01.5Z")"));
  EXPECT_FALSE(accepts(date, R"("2024-13-01T00:00:00Z")"));
  const Grammar any = compile(json::parse(R"({})"));
  EXPECT_TRUE(accepts(any, R"({"x":[1,"y",{"z":null}]})"));
  EXPECT_TRUE(accepts(any, "\"caf\xC3\xA9 \\u00e9\""));
  EXPECT_FALSE(accepts(any, "\"a\x01\""));  // raw control character
}

TEST(JsonSchema, JsonObjectGrammar) {
  const Grammar g = parse_gbnf(json_object_gbnf());
  EXPECT_TRUE(accepts(g, R"({"a": [1, 2.5, true, null, {"b": "c"}]})"));
  EXPECT_FALSE(accepts(g, R"([1])"));
  EXPECT_FALSE(accepts(g, R"({"a" 1})"));
}

std::string error_of(const std::string& schema) {
  try {
    compile(json::parse(schema));
  } catch (const GrammarError& e) {
    return e.what();
  }
  return "(accepted)";
}

TEST(JsonSchema, UnsupportedAndInvalidAreNamedWithTheirPath) {
  EXPECT_EQ(error_of(R"({"type":"object","properties":{"x":{"type":"object","patternProperties":{}}}})"),
            "properties.x: unsupported keyword 'patternProperties'");
  EXPECT_EQ(error_of(R"({"type":"integer","minimum":0})"), "unsupported keyword 'minimum'");
  EXPECT_EQ(error_of(R"({"type":"strng"})"), "type: unknown type 'strng'");
  EXPECT_EQ(error_of(R"({"$ref":"#/$defs/missing"})"), "$ref: '#/$defs/missing' does not resolve inside the schema");
  EXPECT_EQ(error_of(R"({"type":"string","format":"email"})"),
            "format: unsupported format 'email' (supported: date, time, date-time, uuid)");
  EXPECT_NE(error_of(R"j({"type":"string","pattern":"(?=x)"})j").find("pattern: pattern: lookaround"),
            std::string::npos);
  EXPECT_EQ(error_of(R"({"type":"array","items":{"type":"string"},"minItems":3,"maxItems":2})"),
            "maxItems is below minItems: no array satisfies the schema");
  EXPECT_NE(error_of(R"({"$ref":"#"})").find("left recursion"), std::string::npos);
  EXPECT_EQ(error_of("false"), "the schema 'false' matches nothing");
  std::string deep = "{}";
  for (int i = 0; i < 80; ++i) deep = R"({"type":"array","items":)" + deep + "}";
  EXPECT_NE(error_of(deep).find("nested deeper than"), std::string::npos);
}

// The pattern compiler recurses once per group: 30,000 nested groups once overflowed the stack (issue 41). The
// deepest accepted pattern compiles to GBNF that parse_gbnf() accepts.
TEST(JsonSchema, PatternGroupNestingIsBounded) {
  auto pattern = [](size_t depth) {
    std::string p = "^";  // appended: GCC 12's -Wrestrict misfires on "literal" + std::string&&
    p.append(depth, '(').append("a").append(depth, ')').append("+$");
    return json{{"type", "string"}, {"pattern", p}};
  };
  const Grammar at_limit = compile(pattern(kMaxPatternNesting));
  EXPECT_TRUE(accepts(at_limit, "\"aa\""));
  EXPECT_FALSE(accepts(at_limit, "\"ab\""));
  for (const size_t depth : {kMaxPatternNesting + 1, size_t{30000}}) {
    EXPECT_NE(error_of(pattern(depth).dump()).find("nested deeper than " + std::to_string(kMaxPatternNesting)),
              std::string::npos)
        << depth;
  }
}

}  // namespace
}  // namespace preface::grammar
