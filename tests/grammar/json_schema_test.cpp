// JSON Schema -> grammar: instances accepted and rejected, invalid schemas and loosened keywords named with their
// path.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "grammar/grammar.h"
#include "grammar/json_schema.h"
#include "grammar/schema_formats.h"
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

TEST(JsonSchema, InvalidSchemasAreNamedWithTheirPath) {
  EXPECT_EQ(error_of(R"({"type":"strng"})"), "type: unknown type 'strng'");
  EXPECT_EQ(error_of(R"({"$ref":"#/$defs/missing"})"), "$ref: '#/$defs/missing' does not resolve inside the schema");
  EXPECT_EQ(error_of(R"({"type":"array","items":{"type":"string"},"minItems":3,"maxItems":2})"),
            "maxItems is below minItems (or the items allowed): no array satisfies it");
  EXPECT_EQ(error_of(R"({"type":"array","prefixItems":[{}],"items":false,"minItems":2})"),
            "maxItems is below minItems (or the items allowed): no array satisfies it");
  EXPECT_EQ(error_of(R"({"type":"integer","minimum":3,"exclusiveMaximum":3})"), "no integer satisfies the bounds");
  EXPECT_EQ(error_of(R"({"type":"integer","minimum":"3"})"), "minimum: must be a number");
  EXPECT_EQ(error_of(R"({"type":"number","minimum":0.2,"maximum":0.3})"),
            "no number this grammar writes satisfies the bounds");
  EXPECT_NE(error_of(R"({"$ref":"#"})").find("left recursion"), std::string::npos);
  EXPECT_EQ(error_of("false"), "the schema 'false' matches nothing");
  EXPECT_EQ(error_of(R"({"allOf":[{"type":"string"},false]})"), "allOf[1]: the schema 'false' matches nothing");
  std::string deep = "{}";
  for (int i = 0; i < 80; ++i) deep = R"({"type":"array","items":)" + deep + "}";
  EXPECT_NE(error_of(deep).find("nested deeper than"), std::string::npos);
}

std::vector<std::string> loosened_of(const std::string& schema) {
  std::vector<std::string> out;
  for (const Loosened& l : compile_json_schema(json::parse(schema)).loosened) out.push_back(l.text());
  return out;
}

// A keyword the grammar cannot enforce is dropped (the grammar is looser) and named, never an error.
TEST(JsonSchema, UnenforceableKeywordsAreLoosenedAndNamed) {
  using V = std::vector<std::string>;
  EXPECT_EQ(loosened_of(R"({"type":"object","properties":{"x":{"type":"object","patternProperties":{}}}})"),
            V{"properties.x: 'patternProperties' is not enforced"});
  EXPECT_EQ(loosened_of(R"({"type":"string","format":"color"})"),
            V{std::string("format: 'color' is not enforced (known: ") + known_string_formats() + ")"});
  const V lookaround = loosened_of(R"j({"type":"string","pattern":"(?=x)a","format":"email","maxLength":9})j");
  ASSERT_EQ(lookaround.size(), 2u);
  EXPECT_EQ(lookaround[0].rfind("pattern: not enforced (pattern: lookaround", 0), 0u) << lookaround[0];
  EXPECT_EQ(lookaround[1], "'minLength'/'maxLength' beside 'format' are not enforced");
  EXPECT_EQ(loosened_of(R"({"type":"array","uniqueItems":true,"maxItems":20000,"items":{"not":{"const":1}}})"),
            (V{"'uniqueItems' is not enforced", "items: 'not' is not enforced",
               "'maxItems' above 10000 is not enforced"}));
  EXPECT_EQ(loosened_of(R"({"$ref":"#/$defs/a","type":"string","$defs":{"a":{"type":"string"}}})"),
            V{"'type' beside '$ref' is not enforced"});
  EXPECT_EQ(loosened_of(R"({"type":"integer","minimum":0,"maximum":9,"multipleOf":3})"),
            V{"'multipleOf' is not enforced"});
  EXPECT_TRUE(loosened_of(R"({"type":"integer","minimum":0,"x-vendor":1,"example":2})").empty());  // annotations
  // Dropped keywords leave the nearest looser grammar: here any email, the pattern aside.
  const Grammar g = compile(json::parse(R"j({"type":"string","pattern":"(?=x)a","format":"email"})j"));
  EXPECT_TRUE(accepts(g, R"("a.b@example.com")"));
  EXPECT_FALSE(accepts(g, R"("a")"));
}

// Integer bounds are exact: every integer in a window is accepted exactly when it is inside the bounds.
TEST(JsonSchema, IntegerBoundsAreExact) {
  const std::vector<std::pair<const char*, std::pair<int64_t, int64_t>>> cases = {
      {R"({"type":"integer","minimum":0})", {0, INT64_MAX}},
      {R"({"type":"integer","exclusiveMinimum":0})", {1, INT64_MAX}},
      {R"({"type":"integer","minimum":-37,"maximum":250})", {-37, 250}},
      {R"({"type":"integer","minimum":-1000,"exclusiveMaximum":-9})", {-1000, -10}},
      {R"({"type":"integer","minimum":1.5,"maximum":99.5})", {2, 99}},
      {R"({"type":"integer","minimum":7,"maximum":7})", {7, 7}},
      {R"({"type":"integer","minimum":5,"exclusiveMinimum":true,"maximum":1200})", {6, 1200}},  // draft 4
      {R"({"type":"integer","exclusiveMinimum":10,"minimum":3,"maximum":1099})", {11, 1099}},  // the tighter
  };
  for (const auto& [schema, range] : cases) {
    const Grammar g = compile(json::parse(schema));
    for (int64_t n = -1300; n <= 1300; ++n) {
      EXPECT_EQ(accepts(g, std::to_string(n)), n >= range.first && n <= range.second) << schema << " " << n;
    }
    EXPECT_FALSE(accepts(g, "-0")) << schema;
    EXPECT_FALSE(accepts(g, "007")) << schema;
    EXPECT_FALSE(accepts(g, "7.5")) << schema;
  }
  // zod's .int(): the safe-integer range, 16 digits.
  const Grammar safe = compile(json::parse(R"({"type":"integer","minimum":-9007199254740991,
      "maximum":9007199254740991})"));
  EXPECT_TRUE(accepts(safe, "9007199254740991"));
  EXPECT_TRUE(accepts(safe, "-9007199254740991"));
  EXPECT_TRUE(accepts(safe, "8999999999999999"));
  EXPECT_FALSE(accepts(safe, "9007199254740992"));
  EXPECT_FALSE(accepts(safe, "-9007199254740992"));
  EXPECT_FALSE(accepts(safe, "9100000000000000"));
}

// Number bounds: what is accepted is inside them; integers inside them and decimals whose (n, n+1) is inside are
// accepted.
TEST(JsonSchema, NumberBoundsAreSound) {
  struct Case {
    const char* schema;
    double lo, hi;
    bool lo_excl, hi_excl;
  };
  const Case cases[] = {
      {R"({"type":"number","exclusiveMinimum":0})", 0, 1e30, true, false},
      {R"({"type":"number","minimum":0,"maximum":1})", 0, 1, false, false},
      {R"({"type":"number","minimum":-2.5,"exclusiveMaximum":3})", -2.5, 3, false, true},
      {R"({"type":"number","exclusiveMinimum":-10,"maximum":-4})", -10, -4, true, false},
  };
  std::vector<std::string> texts;
  for (int i = -12; i <= 12; ++i) {
    texts.push_back(std::to_string(i));
    for (const char* f : {".5", ".25", ".0", ".001", ".9999"}) texts.push_back(std::to_string(i) + f);
  }
  for (const char* t : {"-0.5", "-0.25", "-0", "1e2", "0.50"}) texts.emplace_back(t);
  for (const Case& c : cases) {
    const Grammar g = compile(json::parse(c.schema));
    for (const std::string& t : texts) {
      const double v = std::stod(t);
      const bool inside = (c.lo_excl ? v > c.lo : v >= c.lo) && (c.hi_excl ? v < c.hi : v <= c.hi);
      if (accepts(g, t)) {
        EXPECT_TRUE(inside) << c.schema << " accepts " << t;
      }
    }
    EXPECT_FALSE(accepts(g, "1e2")) << c.schema;  // bounded numbers are written without an exponent
  }
  const Grammar positive = compile(json::parse(cases[0].schema));
  for (const char* t : {"1", "0.5", "0.001", "12.75", "3"}) EXPECT_TRUE(accepts(positive, t)) << t;
  for (const char* t : {"0", "-1", "0.0", "-0.5"}) EXPECT_FALSE(accepts(positive, t)) << t;
  const Grammar unit = compile(json::parse(cases[1].schema));
  for (const char* t : {"0", "1", "0.5", "0.125"}) EXPECT_TRUE(accepts(unit, t)) << t;
  const Grammar neg = compile(json::parse(cases[3].schema));
  for (const char* t : {"-9", "-4", "-5.5", "-9.75"}) EXPECT_TRUE(accepts(neg, t)) << t;
}

TEST(JsonSchema, StringFormats) {
  const std::vector<std::tuple<const char*, std::vector<const char*>, std::vector<const char*>>> cases = {
      {"email", {"a@b.co", "first.last+tag@mail.example.org", "x_y-z@a-b.io"},
       {"a@b", "@b.co", ".a@b.co", "a..b@c.de", "a@b.c", "a b@c.de"}},
      {"uri", {"https://example.com", "http://a.b:8080/p/q?x=1&y=%20#top", "https://h/"},
       {"example.com", "ftp://x.y", "https://", "https://a b", "https://x/%zz"}},
      {"hostname", {"localhost", "a-b.example.com", "x1.y2"}, {"-a.com", "a-.com", "a..b", "a_b.com"}},
      {"ipv4", {"0.0.0.0", "192.168.1.255", "10.0.0.1"}, {"256.1.1.1", "1.2.3", "01.2.3.4", "1.2.3.4.5"}},
      {"ipv6", {"2001:db8:0:0:0:0:2:1", "fe80:0:0:0:0:0:0:1"}, {"2001:db8::1", "1:2:3:4:5:6:7", "g:0:0:0:0:0:0:1"}},
      {"date-time", {"2024-02-29T23:59:01.5Z", "2024-01-01T00:00:00+05:30"}, {"2024-13-01T00:00:00Z", "2024-01-01"}},
  };
  for (const auto& [format, good, bad] : cases) {
    const Grammar g = compile(json{{"type", "string"}, {"format", format}});
    for (const char* s : good) EXPECT_TRUE(accepts(g, json(s).dump())) << format << " " << s;
    for (const char* s : bad) EXPECT_FALSE(accepts(g, json(s).dump())) << format << " " << s;
  }
  // A pattern beside a format wins when it compiles (zod writes both): here only "Z" offsets.
  const Grammar zulu = compile(json::parse(R"({"type":"string","format":"date-time",
      "pattern":"^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(?:\\.\\d+)?Z$"})"));
  EXPECT_TRUE(accepts(zulu, R"("2024-01-01T00:00:00.123Z")"));
  EXPECT_FALSE(accepts(zulu, R"("2024-01-01T00:00:00+05:30")"));
}

TEST(JsonSchema, TuplesIntersectionsAndNullable) {
  const Grammar tuple = compile(json::parse(R"({"type":"array","prefixItems":[{"type":"string"},{"type":"integer"}],
      "items":{"type":"boolean"},"minItems":1,"maxItems":4})"));
  for (const char* t : {R"(["a"])", R"(["a",1])", R"(["a",1,true])", R"(["a", 1, true, false])"}) {
    EXPECT_TRUE(accepts(tuple, t)) << t;
  }
  for (const char* t : {"[]", "[1]", R"(["a","b"])", R"(["a",1,2])", R"(["a",1,true,true,true])"}) {
    EXPECT_FALSE(accepts(tuple, t)) << t;
  }
  const Grammar exact = compile(json::parse(R"({"type":"array","prefixItems":[{"const":1},{"const":2}],
      "items":false,"minItems":2})"));
  EXPECT_TRUE(accepts(exact, "[1,2]"));
  EXPECT_FALSE(accepts(exact, "[1]"));
  EXPECT_FALSE(accepts(exact, "[1,2,3]"));
  const json both = json::parse(R"({"allOf":[
      {"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]},
      {"type":"object","properties":{"b":{"type":"string"}},"required":["b"]}]})");
  EXPECT_TRUE(compile_json_schema(both).loosened.empty());
  const Grammar merged = compile(both);
  EXPECT_TRUE(accepts(merged, R"({"a":1,"b":"x"})"));
  EXPECT_FALSE(accepts(merged, R"({"a":1})"));
  EXPECT_FALSE(accepts(merged, R"({"b":"x"})"));
  const Grammar nullable = compile(json::parse(R"({"type":"integer","nullable":true,"minimum":1})"));
  EXPECT_TRUE(accepts(nullable, "null"));
  EXPECT_TRUE(accepts(nullable, "5"));
  EXPECT_FALSE(accepts(nullable, "0"));
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
  for (const size_t depth : {kMaxPatternNesting + 1, size_t{30000}}) {  // loosened to any string
    const std::vector<std::string> notes = loosened_of(pattern(depth).dump());
    ASSERT_EQ(notes.size(), 1u) << depth;
    EXPECT_NE(notes[0].find("nested deeper than " + std::to_string(kMaxPatternNesting)), std::string::npos) << depth;
  }
}

}  // namespace
}  // namespace preface::grammar
