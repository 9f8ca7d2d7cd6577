// Unit tests of the Jinja interpreter (src/chat/jinja): whitespace control, statements, expressions with
// Python semantics, filters, tests, methods, Undefined, errors and limits. Expected strings are what jinja2 3.1
// renders with trim_blocks and lstrip_blocks (Hugging Face's settings).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "chat/chat_jinja.h"
#include "chat/jinja/jinja.h"

namespace preface::chat::jinja {
namespace {

std::string render(std::string_view src, const nlohmann::ordered_json& vars = nlohmann::ordered_json::object(),
                   const RenderConfig& config = {}) {
  Dict d;
  for (const auto& [k, v] : vars.items()) d.set(k, json_to_value(v, false));
  return Template::parse(src).render(d, config).text;
}

ErrorKind error_of(std::string_view src, const nlohmann::ordered_json& vars = nlohmann::ordered_json::object(),
                   const RenderConfig& config = {}) {
  try {
    render(src, vars, config);
  } catch (const JinjaError& e) {
    return e.kind();
  }
  ADD_FAILURE() << "no error for: " << src;
  return ErrorKind::Unsupported;
}

TEST(JinjaWhitespace, TrimAndLstripBlocksAndMinus) {
  EXPECT_EQ(render("a\n{% if true %}\nb\n{% endif %}\nc"), "a\nb\nc");
  EXPECT_EQ(render("  {% if true %}x{% endif %}"), "x");                 // lstrip_blocks
  EXPECT_EQ(render("  {%+ if true %}x{% endif %}"), "  x");              // + keeps it
  EXPECT_EQ(render("a  {{- 'b' -}}  c"), "abc");
  EXPECT_EQ(render("a\n{#- comment -#}\nb"), "ab");
  EXPECT_EQ(render("a\n{# c #}\nb"), "a\nb");                            // trim_blocks after a comment
  EXPECT_EQ(render("x\n"), "x");                                          // one trailing newline dropped
  EXPECT_EQ(render("x\n\n"), "x\n");
  EXPECT_EQ(render("a\r\nb"), "a\nb");
  EXPECT_EQ(render("{% raw %}{{ x }}{% endraw %}"), "{{ x }}");
  EXPECT_EQ(render("{{ 'a\\\nb' }}"), "ab");                              // backslash-newline in a literal
  EXPECT_EQ(render("{{ '\\u00e9\\n\\t' }}"), "\xC3\xA9\n\t");
}

TEST(JinjaStatements, IfForSetMacroCall) {
  EXPECT_EQ(render("{% if x == 1 %}a{% elif x == 2 %}b{% else %}c{% endif %}", {{"x", 2}}), "b");
  EXPECT_EQ(render("{% for i in [1,2,3] %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}"
                   "{{ loop.first }}{{ loop.last }}{{ loop.length }};{% endfor %}"),
            "103TrueFalse3;212FalseFalse3;321FalseTrue3;");
  EXPECT_EQ(render("{% for i in [] %}x{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(render("{% for i in range(10) if i is odd %}{{ i }}{% endfor %}"), "13579");
  EXPECT_EQ(render("{% for i in range(5) %}{% if i == 3 %}{% break %}{% endif %}{% if i == 1 %}{% continue %}"
                   "{% endif %}{{ i }}{% endfor %}"),
            "02");
  EXPECT_EQ(render("{% for k, v in d.items() %}{{ k }}={{ v }},{% endfor %}", {{"d", {{"b", 1}, {"a", 2}}}}),
            "b=1,a=2,");
  EXPECT_EQ(render("{% for k in d %}{{ k }}{% endfor %}", {{"d", {{"z", 1}, {"y", 2}}}}), "zy");
  EXPECT_EQ(render("{% for x in ['a','b'] %}{{ loop.cycle('o','e') }}{{ loop.previtem }}{% endfor %}"), "oea");
  // set inside a loop stays in the loop; a namespace carries state out
  EXPECT_EQ(render("{% set x = 1 %}{% for i in [1] %}{% set x = 2 %}{% endfor %}{{ x }}"), "1");
  EXPECT_EQ(render("{% set ns = namespace(n=0) %}{% for i in [1,2] %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}"),
            "3");
  EXPECT_EQ(render("{% set a, b = [1, 2] %}{{ b }}{{ a }}"), "21");
  EXPECT_EQ(render("{% set t %}x{{ 1 + 1 }}{% endset %}[{{ t }}]"), "[x2]");
  EXPECT_EQ(render("{% set t | upper %}abc{% endset %}{{ t }}"), "ABC");
  EXPECT_EQ(render("{% macro m(a, b='d') %}{{ a }}-{{ b }}{% endmacro %}{{ m(1) }} {{ m(1, b=2) }}"), "1-d 1-2");
  EXPECT_EQ(render("{% macro w() %}<{{ caller() }}>{% endmacro %}{% call w() %}in{% endcall %}"), "<in>");
  EXPECT_EQ(render("{% filter upper %}ab{% endfilter %}"), "AB");
  EXPECT_EQ(render("{% generation %}g{% endgeneration %}"), "g");
}

TEST(JinjaExpressions, PythonSemantics) {
  EXPECT_EQ(render("{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }} {{ 4 / 2 }}"),
            "3 -4 1 2 3.5 1024 2.0");
  EXPECT_EQ(render("{{ 1 + 2.5 }} {{ 0.1 + 0.2 }} {{ 1e20 }} {{ 1e-7 }} {{ 3.0 }}"),
            "3.5 0.30000000000000004 1e+20 1e-07 3.0");
  EXPECT_EQ(render("{{ 'ab' ~ 1 ~ none }} {{ 'a' + 'b' }} {{ [1] + [2] }} {{ 'x' * 3 }}"), "ab1None ab [1, 2] xxx");
  EXPECT_EQ(render("{{ 'abcdef'[1:] }} {{ 'abcdef'[::-1] }} {{ 'abcdef'[-3:] }} {{ [1,2,3,4][::2] }}"),
            "bcdef fedcba def [1, 3]");
  EXPECT_EQ(render("{{ 'b' in 'abc' }} {{ 2 not in [1,3] }} {{ 'k' in {'k': 1} }} {{ 1 < 2 < 3 }}"),
            "True True True True");
  EXPECT_EQ(render("{{ 'y' if x else 'n' }} {{ x and 'a' or 'b' }} {{ not x }}", {{"x", false}}), "n b True");
  EXPECT_EQ(render("{{ [1, 'a', none, true, {'k': [2.5]}] }}"), "[1, 'a', None, True, {'k': [2.5]}]");
  EXPECT_EQ(render("{{ \"it's\" | string }}|{{ [\"it's\"] }}"), "it's|[\"it's\"]");
  EXPECT_EQ(render("{{ 'é'[0] }}{{ 'aé'|length }}"), "é2");  // code points, not bytes
  EXPECT_EQ(render("{{ m.a.b }}", {{"m", {{"a", {{"b", 5}}}}}}), "5");
  EXPECT_EQ(render("{{ m['a'] }}{{ l[-1] }}", {{"m", {{"a", 1}}}, {"l", {1, 2}}}), "12");
}

TEST(JinjaFilters, Common) {
  EXPECT_EQ(render("{{ '  a \u3000'|trim }}|{{ 'xxaxx'|trim('x') }}"), "a|a");
  EXPECT_EQ(render("{{ x|tojson }}", {{"x", {{"b", "é\"\n"}, {"a", {1, 2.5, nullptr, true}}}}}),
            "{\"b\": \"é\\\"\\n\", \"a\": [1, 2.5, null, true]}");
  EXPECT_EQ(render("{{ x|tojson(indent=2) }}", {{"x", {{"a", {1}}, {"b", nlohmann::ordered_json::object()}}}}),
            "{\n  \"a\": [\n    1\n  ],\n  \"b\": {}\n}");
  EXPECT_EQ(render("{{ 'é'|tojson(ensure_ascii=true) }}"), "\"\\u00e9\"");
  EXPECT_EQ(render("{{ [3,1,2]|sort|join(',') }} {{ [1,1,2]|unique|list }} {{ [1,2]|reverse|list }}"),
            "1,2,3 [1, 2] [2, 1]");
  EXPECT_EQ(render("{{ xs|selectattr('r', 'equalto', 'u')|map(attribute='c')|join }}",
                   {{"xs", {{{"r", "u"}, {"c", "1"}}, {{"r", "a"}, {"c", "2"}}, {{"r", "u"}, {"c", "3"}}}}}),
            "13");
  EXPECT_EQ(render("{{ xs|rejectattr('r')|list|length }}", {{"xs", {{{"r", true}}, {{"r", false}}}}}), "1");
  // jinja2 filters a falsy value (None, undefined) to nothing instead of raising (templates pass `tools` as None).
  EXPECT_EQ(render("{{ n|selectattr('r')|list }}{{ n|rejectattr('r')|list }}{{ n|select|list }}{{ n|reject|list }}"
                   "{{ n|map(attribute='c')|list }}{{ u|map('upper')|list }}",
                   {{"n", nullptr}}),
            "[][][][][][]");
  EXPECT_EQ(render("{{ [1,2,3]|first }}{{ [1,2,3]|last }}{{ [1,2,3]|count }}"), "133");
  EXPECT_EQ(render("{{ u|default('d') }} {{ ''|default('d', true) }} {{ 'abc'|upper }} {{ 'hello world'|title }}"),
            "d d ABC Hello World");
  EXPECT_EQ(render("{{ 'aXa'|replace('a', 'b') }} {{ '3'|int + 1 }} {{ '2.5'|float }} {{ 5|string }}"),
            "bXb 4 2.5 5");
  EXPECT_EQ(render("{{ 'a\nb\n\nc'|indent(2) }}"), "a\n  b\n\n  c");
  EXPECT_EQ(render("{{ {'b': 1, 'a': 2}|dictsort }}"), "[['a', 2], ['b', 1]]");
  EXPECT_EQ(render("{{ [1,2,3,4,5]|batch(2)|list }}"), "[[1, 2], [3, 4], [5]]");
  EXPECT_EQ(render("{{ '<a>'|escape }}{{ 'x'|safe }}"), "&lt;a&gt;x");
  EXPECT_EQ(render("{{ {'a': 1}|items|list }}"), "[['a', 1]]");
}

TEST(JinjaTests, Common) {
  EXPECT_EQ(render("{{ x is defined }}{{ y is undefined }}{{ n is none }}{{ 's' is string }}",
                   {{"x", 1}, {"n", nullptr}}),
            "TrueTrueTrueTrue");
  EXPECT_EQ(render("{{ 1 is number }}{{ 1.5 is integer }}{{ {} is mapping }}{{ [] is iterable }}{{ 's' is sequence }}"),
            "TrueFalseTrueTrueTrue");
  EXPECT_EQ(render("{{ true is boolean }}{{ true is true }}{{ 0 is false }}{{ 3 is odd }}{{ 4 is even }}"),
            "TrueTrueFalseTrueTrue");
  EXPECT_EQ(render("{{ 9 is divisibleby 3 }}{{ 'a' is equalto 'a' }}{{ 'a' is in ['a'] }}{{ 1 is not eq 2 }}"),
            "TrueTrueTrueTrue");
}

TEST(JinjaMethods, StringsDictsLists) {
  EXPECT_EQ(render("{{ ' a '.strip() }}|{{ 'xxa'.lstrip('x') }}|{{ 'a\n\n'.rstrip('\n') }}"), "a|a|a");
  EXPECT_EQ(render("{{ 'a,b,,c'.split(',') }} {{ ' a  b '.split() }} {{ 'a-b-c'.split('-', 1) }}"),
            "['a', 'b', '', 'c'] ['a', 'b'] ['a', 'b-c']");
  EXPECT_EQ(render("{{ 'abc'.startswith('ab') }}{{ 'abc'.endswith(['x', 'c']) }}{{ 'hello world'.title() }}"),
            "TrueTrueHello World");
  EXPECT_EQ(render("{{ '{} and {}'.format(1, 'b') }} {{ 'aaa'.replace('a', 'b', 2) }} {{ 'ABC'.lower() }}"),
            "1 and b bba abc");
  EXPECT_EQ(render("{{ d.get('a') }}{{ d.get('z', 0) }}{{ d.keys()|list }}{{ d.values()|list }}", {{"d", {{"a", 1}}}}),
            "10['a'][1]");
  EXPECT_EQ(render("{% set ns = namespace(l=[]) %}{% for i in [1,2] %}{% set _ = ns.l.append(i) %}{% endfor %}{{ ns.l }}"),
            "[1, 2]");
  EXPECT_EQ(render("{{ raise_exception is defined }}{{ strftime_now('%Y-%m-%d %d %b %Y') }}", {},
                   [] {
                     RenderConfig c;
                     c.clock = [] {
                       std::tm tm{};
                       tm.tm_year = 124;
                       tm.tm_mon = 6;
                       tm.tm_mday = 26;
                       return tm;
                     };
                     return c;
                   }()),
            "True2024-07-26 26 Jul 2024");
}

TEST(JinjaUndefined, AsJinja2Default) {
  EXPECT_EQ(render("[{{ missing }}][{{ missing|length }}][{% for x in missing %}x{% endfor %}]"), "[][0][]");
  EXPECT_EQ(render("{{ d.nokey is defined }}{{ d.nokey }}", {{"d", {{"a", 1}}}}), "False");
  EXPECT_EQ(error_of("{{ missing.attr }}"), ErrorKind::Undefined);
  EXPECT_EQ(error_of("{{ d.nokey.attr }}", {{"d", {{"a", 1}}}}), ErrorKind::Undefined);
  EXPECT_EQ(error_of("{{ missing + 1 }}"), ErrorKind::Undefined);
  EXPECT_EQ(error_of("{{ missing() }}"), ErrorKind::Undefined);
  try {
    render("{{ m.content.x }}", {{"m", {{"role", "user"}}}});
    ADD_FAILURE();
  } catch (const JinjaError& e) {
    EXPECT_STREQ(e.what(), "'dict object' has no attribute 'content'");
  }
}

TEST(JinjaErrors, KindsAndMessages) {
  try {
    render("{{ raise_exception('Conversation roles must alternate') }}");
    ADD_FAILURE();
  } catch (const JinjaError& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Raised);
    EXPECT_STREQ(e.what(), "Conversation roles must alternate");
  }
  EXPECT_EQ(error_of("{{ 'a' + 1 }}"), ErrorKind::Type);
  EXPECT_EQ(error_of("{% for x in none %}{% endfor %}"), ErrorKind::Type);
  EXPECT_EQ(error_of("{{ 1 // 0 }}"), ErrorKind::Value);
  EXPECT_EQ(error_of("{{ 5|items }}"), ErrorKind::Type);
  for (const char* bad : {"{% if %}", "{% if x %}", "{{ x ", "{% for x in %}{% endfor %}", "{% endif %}",
                          "{{ x|nosuchfilter }}", "{% include 'a' %}", "{{ 'abc }}", "{{ (1 }}", "{# x"}) {
    SCOPED_TRACE(bad);
    EXPECT_THROW(render(bad), JinjaError);
  }
  try {
    Template::parse("line1\n{% if x %}\n{% endfor %}");
    ADD_FAILURE();
  } catch (const JinjaError& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Syntax);
    EXPECT_NE(std::string(e.what()).find("line"), std::string::npos) << e.what();
  }
}

TEST(JinjaLimits, BadTemplatesCannotHurt) {
  RenderConfig small;
  small.max_loop_iterations = 1000;
  small.max_output_bytes = 10000;
  small.max_call_depth = 16;
  EXPECT_EQ(error_of("{% for i in range(100000) %}{% endfor %}", {}, small), ErrorKind::Limit);
  EXPECT_EQ(error_of("{% for i in range(100) %}{% for j in range(100) %}{% endfor %}{% endfor %}", {}, small),
            ErrorKind::Limit);
  EXPECT_EQ(error_of("{{ 'x' * 100000 }}", {}, small), ErrorKind::Limit);
  EXPECT_EQ(error_of("{% for i in range(900) %}{{ 'abcdefghijklmnop' }}{% endfor %}", {}, small), ErrorKind::Limit);
  EXPECT_EQ(error_of("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", {}, small), ErrorKind::Limit);
  EXPECT_EQ(error_of("{{ 2 ** 64 }}"), ErrorKind::Value);  // no silent wrap-around
  // Refused before allocating: a character scan of a huge content, an exploding replace or indent.
  const nlohmann::ordered_json big = {{"s", std::string(5000, 'a')}};
  EXPECT_EQ(error_of("{% for c in s %}{% endfor %}", big, small), ErrorKind::Limit);
  EXPECT_EQ(error_of("{{ s.replace('', 'xyz') }}", big, small), ErrorKind::Limit);
  EXPECT_EQ(error_of("{{ ('a\n' * 500)|indent(200) }}", {}, small), ErrorKind::Limit);
  EXPECT_EQ(render("{{ '' * 1000000000000 }}|"), "|");
  EXPECT_THROW(Template::parse("{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}"), JinjaError);
  std::string deep;
  for (int i = 0; i < 300; ++i) deep += "{% if true %}";
  EXPECT_THROW(Template::parse(deep), JinjaError);
}

TEST(JinjaTemplate, OneParsedTemplateRendersOnManyThreads) {
  const Template t = Template::parse(
      "{% set ns = namespace(n=0) %}{% for m in ms %}{% set ns.n = ns.n + 1 %}{{ m|upper }}{{ loop.index }}"
      "{% endfor %}{{ ns.n }}{{ [1, 2]|tojson }}");
  Dict d;
  d.set("ms", Value::list({Value::string("a"), Value::content("b")}));
  const std::string want = t.render(d).text;
  EXPECT_EQ(want, "A1B22[1, 2]");
  std::vector<std::thread> threads;
  std::vector<int> bad(4, 0);
  for (int k = 0; k < 4; ++k) {
    threads.emplace_back([&, k] {
      for (int i = 0; i < 300; ++i) bad[k] += t.render(d).text != want;
    });
  }
  for (std::thread& th : threads) th.join();
  for (int k = 0; k < 4; ++k) EXPECT_EQ(bad[k], 0);
}

TEST(JinjaMarks, ContentSpansSurviveStringOperations) {
  Dict d;
  d.set("c", Value::content("  <|im_end|>hi  "));
  const Str out = Template::parse("<|im_start|>{{ c|trim }}<|im_end|>{{ (c + 'x')[2:5] }}{{ c.split('|')[1] }}").render(d);
  EXPECT_EQ(out.text, "<|im_start|><|im_end|>hi<|im_end|><|iim_end");
  ASSERT_EQ(out.marks.size(), 2u);
  EXPECT_EQ(out.text.substr(out.marks[0].offset, out.marks[0].length), "<|im_end|>hi");
  EXPECT_EQ(out.text.substr(out.marks[1].offset, out.marks[1].length), "<|iim_end");  // two pieces, merged
}

}  // namespace
}  // namespace preface::chat::jinja
