// The Jinja engine (src/text/jinja) against Python jinja2 3.1 set up as Hugging Face's chat
// templates use it (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loopcontrols, HF's
// tojson). Every expected string in the tables below was produced by jinja2 itself with the
// variables in kVariables; the tests after the tables check errors: kind, message and line.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "text/jinja/json.h"
#include "text/jinja/template.h"

namespace imp::text::jinja {
namespace {

constexpr const char* kVariables =
    R"json({"d": {"a": 1, "items": 5, "b": [1, 2]}, "l": [3, 1, 2], "n": null, "s": "héllo wörld", "t": true, "f": 1.5, "i": 7, "e": [], "ss": ["b", "A", "c"], "msgs": [{"role": "system", "content": "sys"}, {"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]})json";

std::string render(std::string_view source) {
  const Value variables = from_json(nlohmann::ordered_json::parse(kVariables));
  return Template::parse(source, "test.jinja").render(variables.as_dict());
}

std::optional<TemplateError> render_error(std::string_view source) {
  try {
    const std::string out = render(source);
    ADD_FAILURE() << "rendered instead of failing: " << out;
  } catch (const TemplateError& error) {
    return error;
  }
  return std::nullopt;
}

struct Case {
  const char* name;
  const char* source;
  const char* expected;  // jinja2's output
};

const Case kWhitespace[] = {
    {"TrimBlocksEatsOneNewline", R"j({% if true %}
x
{% endif %}

y)j",
     R"j(x

y)j"},
    {"LstripBlocksStripsIndent", R"j(  {% if true %}
  x
  {% endif %}
)j",
     R"j(  x
)j"},
    {"LstripKeepsTextBeforeTag", R"j(a  {% if true %}b{% endif %})j", R"j(a  b)j"},
    {"VariablesAreNotLstripped", R"j(  {{ 'v' }}
  {% set x = 1 %}
end)j",
     R"j(  v
end)j"},
    {"DashStripsBothSides", R"j(a  
  {%- if true -%}  
  b  
  {%- endif -%}  
  c)j",
     R"j(abc)j"},
    {"DashOnVariables", R"j(a 
 {{- 'b' -}} 
 c)j",
     R"j(abc)j"},
    {"PlusDisablesLstrip", R"j(  {%+ if true %}x{% endif %})j", R"j(  x)j"},
    {"PlusDisablesTrim", R"j({% if true +%}
x{% endif %})j",
     R"j(
x)j"},
    {"CommentsAreTrimmedToo", R"j(a
  {# note #}
b {#- x -#} c)j",
     R"j(a
bc)j"},
    {"RawBlock", R"j({% raw %}{{ not evaluated }} {% if %}{% endraw %})j", R"j({{ not evaluated }} {% if %})j"},
    {"OneTrailingNewlineDropped", R"j(x

)j",
     R"j(x
)j"},
    {"CarriageReturnsBecomeNewlines", R"j(a
b
c)j",
     R"j(a
b
c)j"},
    {"TabsCountAsIndent", R"j(	 {% if true %}x{% endif %})j", R"j(x)j"},
};
const Case kPrinting[] = {
    {"Scalars", R"j({{ none }}|{{ true }}|{{ false }}|{{ 42 }}|{{ -7 }}|{{ 'text' }}|{{ None }}|{{ True }})j",
     R"j(None|True|False|42|-7|text|None|True)j"},
    {"Floats",
     R"j({{ 1.0 }} {{ 1.5 }} {{ 1e16 }} {{ 1e15 }} {{ 0.0001 }} {{ 0.00001 }} {{ 0.1 + 0.2 }} {{ 1/3 }} {{ -0.0 }} {{ 2.5e-300 }})j",
     R"j(1.0 1.5 1e+16 1000000000000000.0 0.0001 1e-05 0.30000000000000004 0.3333333333333333 -0.0 2.5e-300)j"},
    {"ListsUseRepr", R"j({{ [1, 'a', none, true, 1.0] }} {{ l }} {{ [] }})j",
     R"j([1, 'a', None, True, 1.0] [3, 1, 2] [])j"},
    {"DictsKeepOrder", R"j({{ {'b': 1, 'a': [2]} }} {{ d }} {{ {} }})j",
     R"j({'b': 1, 'a': [2]} {'a': 1, 'items': 5, 'b': [1, 2]} {})j"},
    {"Tuples", R"j({{ (1,) }} {{ (1, 'x') }} {{ () }} {{ 1, 2 }})j", R"j((1,) (1, 'x') () (1, 2))j"},
    {"StringRepr",
     R"j({{ ["it's", 'say "hi"', 'both \'"', 'back\\slash', 'nl\n', 'tab\t', '\x00', '\u200b', 'é', '😀'] }})j",
     R"j(["it's", 'say "hi"', 'both \'"', 'back\\slash', 'nl\n', 'tab\t', '\x00', '\u200b', 'é', '😀'])j"},
    {"Undefined", R"j([{{ missing }}][{{ d.missing }}][{{ l[10] }}][{{ n.x }}])j", R"j([][][][])j"},
    {"Markup", R"j({{ 'a<b'|safe }} {{ 'a<b'|escape }} {{ ['x'|safe] }})j", R"j(a<b a&lt;b [Markup('x')])j"},
};
const Case kLiterals[] = {
    {"Strings", R"j({{ 'single' }} {{ "double" }} {{ 'adj' 'acent' }} {{ 'esc\tape\u00e9\x41\101\d' }})j",
     R"j(single double adjacent esc	apeéAA\d)j"},
    {"Numbers", R"j({{ 1_000 }} {{ 0x1F }} {{ 0o17 }} {{ 0b101 }} {{ 1.5e3 }} {{ 2E-2 }} {{ 00 }})j",
     R"j(1000 31 15 5 1500.0 0.02 0)j"},
    {"Containers", R"j({{ [1, [2, 3], {'k': (4, 5)}] }} {{ [1, 2,] }} {{ {'a': 1,} }})j",
     R"j([1, [2, 3], {'k': (4, 5)}] [1, 2] {'a': 1})j"},
};
const Case kExpressions[] = {
    {"Arithmetic",
     R"j({{ 7 + 3 }} {{ 7 - 10 }} {{ 7 * 3 }} {{ 7 / 2 }} {{ 8 / 2 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7 % -3 }} {{ 2 ** 10 }} {{ 2 ** -1 }} {{ 7.5 // 2 }} {{ -7.5 % 2 }})j",
     R"j(10 -3 21 3.5 4.0 3 -4 1 2 -2 1024 0.5 3.0 0.5)j"},
    {"Precedence",
     R"j({{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 2 ** 3 ** 2 }} {{ -2 ** 2 }} {{ -(l|length) }} {{ -i|abs }} {{ 1 ~ 2 * 3 }} {{ (1 + 2) ~ 3 }} {{ 10 - 2 - 3 }} {{ not true or true }} {{ not (true or true) }})j",
     R"j(7 9 64 4 -3 7 16 33 5 True False)j"},
    {"MixedNumbers", R"j({{ 1 + 1.5 }} {{ true + 1 }} {{ 3 * 1.0 }} {{ 1 == 1.0 }} {{ true == 1 }})j",
     R"j(2.5 2 3.0 True True)j"},
    {"Sequences",
     R"j({{ [1, 2] + [3] }} {{ (1,) + (2,) }} {{ 'ab' + 'cd' }} {{ 'ab' * 3 }} {{ [0] * 3 }} {{ 2 * 'x' }})j",
     R"j([1, 2, 3] (1, 2) abcd ababab [0, 0, 0] xx)j"},
    {"Concat", R"j({{ 'a' ~ 1 ~ none ~ missing ~ 1.5 ~ [1] }})j", R"j(a1None1.5[1])j"},
    {"Comparisons",
     R"j({{ 1 < 2 }} {{ 1 < 2 < 3 }} {{ 3 > 2 > 5 }} {{ 2 <= 2 }} {{ 2 >= 3 }} {{ 'a' < 'b' }} {{ [1, 2] < [1, 3] }} {{ 1 != 2 }} {{ [1, 2] == [1, 2] }} {{ (1, 2) == [1, 2] }} {{ {'a': 1} == {'a': 1.0} }} {{ missing == missing }} {{ none == missing }})j",
     R"j(True True False True False True True True True False True True False)j"},
    {"Membership",
     R"j({{ 1 in l }} {{ 5 not in l }} {{ 'a' in d }} {{ 'zz' in d }} {{ 'é' in s }} {{ 'x' in missing }} {{ 1 in (1, 2) }})j",
     R"j(True True True False True False True)j"},
    {"AndOrReturnOperands",
     R"j({{ t and 'yes' }} {{ n and 'yes' }} {{ n or 'fallback' }} {{ 0 or '' or 'last' }} {{ 'first' or 'x' }} {{ not n }})j",
     R"j(yes None fallback last first True)j"},
    {"InlineIf",
     R"j({{ 'a' if t else 'b' }} {{ 'a' if n else 'b' }} [{{ 'a' if n }}] {{ 'x' if false else 'y' if true else 'z' }})j",
     R"j(a b [] y)j"},
    {"AttributesAndItems",
     R"j({{ d.a }} {{ d['a'] }} {{ msgs[1].role }} {{ msgs.0.content }} {{ msgs[-1]['content'] }} {{ l.1 }} {{ d['items'] }})j",
     R"j(1 1 user sys yo 1 5)j"},
    {"Slicing",
     R"j({{ l[1:] }} {{ l[:-1] }} {{ l[::-1] }} {{ l[::2] }} {{ l[-2:] }} {{ l[5:] }} {{ s[1:4] }} {{ s[::-1] }} {{ s[-5:] }} {{ msgs[::-1]|map(attribute='role')|join(',') }} {{ (1, 2, 3)[1:] }})j",
     R"j([1, 2] [3, 1] [2, 1, 3] [3, 2] [1, 2] [] éll dlröw olléh wörld assistant,user,system (2, 3))j"},
    {"StringIndexingByCodePoint", R"j({{ s[1] }} {{ s[-1] }} {{ s|length }} {{ '日本語'[1] }} {{ '😀x'|length }})j",
     R"j(é d 11 本 2)j"},
    {"MethodsBeatDictKeys", R"j({{ d.items() | list }} {{ d.keys() | list }} {{ d['items'] }} {{ d.get('a') }})j",
     R"j([('a', 1), ('items', 5), ('b', [1, 2])] ['a', 'items', 'b'] 5 1)j"},
};
const Case kStatements[] = {
    {"IfElifElse",
     R"j({% for x in [1, 2, 3] %}{% if x == 1 %}one{% elif x == 2 %}two{% else %}many{% endif %};{% endfor %})j",
     R"j(one;two;many;)j"},
    {"ForLoopVariables",
     R"j({% for m in msgs %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}|{% endfor %})j",
     R"j(1032TrueFalse3|2121FalseFalse3|3210FalseTrue3|)j"},
    {"ForPrevNextItem", R"j({% for x in l %}[{{ loop.previtem }}<{{ x }}>{{ loop.nextitem }}]{% endfor %})j",
     R"j([<3>1][3<1>2][1<2>])j"},
    {"ForElse",
     R"j({% for x in e %}x{% else %}empty{% endfor %}|{% for x in l if x > 5 %}x{% else %}none{% endfor %})j",
     R"j(empty|none)j"},
    {"ForFilterCountsAfterFiltering",
     R"j({% for m in msgs if m.role != 'system' %}{{ loop.index }}/{{ loop.length }} {{ m.role }};{% endfor %})j",
     R"j(1/2 user;2/2 assistant;)j"},
    {"ForUnpacking",
     R"j({% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}{% for a, (b, c) in [(1, (2, 3))] %}{{ a }}{{ b }}{{ c }}{% endfor %})j",
     R"j(a=1;items=5;b=[1, 2];123)j"},
    {"ForOverDictStringUndefined",
     R"j({% for k in d %}{{ k }},{% endfor %}|{% for c in 'héy' %}{{ c }}.{% endfor %}|{% for x in missing %}never{% endfor %})j",
     R"j(a,items,b,|h.é.y.|)j"},
    {"BreakContinue",
     R"j({% for x in [1, 2, 3, 4, 5] %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 4 %}{% break %}{% endif %}{{ x }}{% endfor %})j",
     R"j(13)j"},
    {"LoopCycleChanged", R"j({% for x in [1, 1, 2] %}{{ loop.cycle('a', 'b') }}{{ loop.changed(x) }};{% endfor %})j",
     R"j(aTrue;bFalse;aTrue;)j"},
    {"NestedLoops",
     R"j({% for a in [1, 2] %}{% for b in 'xy' %}{{ a }}{{ b }}{{ loop.index }} {% endfor %}{{ loop.index }}|{% endfor %})j",
     R"j(1x1 1y2 1|2x1 2y2 2|)j"},
    {"RecursiveLoop",
     R"j({% for node in [{'n': 'a', 'k': [{'n': 'b', 'k': []}]}, {'n': 'c', 'k': []}] recursive %}{{ node.n }}{{ loop.depth }}({{ loop(node.k) }}){% endfor %})j",
     R"j(a1(b2())c1())j"},
    {"SetInLoopDoesNotLeak",
     R"j({% set x = 1 %}{% for i in [1, 2] %}{{ x }}{% set x = x + 10 %}{{ x }};{% endfor %}{{ x }})j",
     R"j(111;111;1)j"},
    {"SetInIfDoesLeak", R"j({% if true %}{% set y = 5 %}{% endif %}{{ y }})j", R"j(5)j"},
    {"Namespace",
     R"j({% set ns = namespace(total=0, names=[]) %}{% for x in l %}{% set ns.total = ns.total + x %}{% endfor %}{{ ns.total }} {{ ns.names }} {{ ns.missing }} {{ ns }})j",
     R"j(6 []  <Namespace {'total': 6, 'names': []}>)j"},
    {"TupleAssignment", R"j({% set a, b = 1, 2 %}{{ a }}{{ b }}{% set c, d2 = 'xy' %}{{ c }}{{ d2 }})j", R"j(12xy)j"},
    {"BlockSet",
     R"j({% set x %}inner {{ i }}{% endset %}[{{ x }}]{% set y | upper | trim %}  abc  {% endset %}[{{ y }}])j",
     R"j([inner 7][ABC])j"},
    {"MacroDefaults",
     R"j({% macro greet(name, greeting='Hello', punct='!') %}{{ greeting }}, {{ name }}{{ punct }}{% endmacro %}{{ greet('Bob') }} {{ greet('Al', punct='?') }} {{ greet(greeting='Hi', name='Cy') }} [{{ greet() }}])j",
     R"j(Hello, Bob! Hello, Al? Hi, Cy! [Hello, !])j"},
    {"MacroVarargsKwargs", R"j({% macro m(a) %}{{ a }}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1, 2, 3, x=4) }})j",
     R"j(1(2, 3){'x': 4})j"},
    {"MacroSeesLaterGlobals", R"j({% set x = 1 %}{% macro m() %}{{ x }}{% endmacro %}{% set x = 2 %}{{ m() }})j",
     R"j(2)j"},
    {"MacroScopeIsPrivate", R"j({% macro m() %}{% set inner = 1 %}{{ inner }}{% endmacro %}{{ m() }}[{{ inner }}])j",
     R"j(1[])j"},
    {"MacroRecursion", R"j({% macro fact(n) %}{{ 1 if n <= 1 else n * fact(n - 1)|int }}{% endmacro %}{{ fact(5) }})j",
     R"j(120)j"},
    {"CallBlock",
     R"j({% macro wrap(tag) %}<{{ tag }}>{{ caller() }}</{{ tag }}>{% endmacro %}{% call wrap('b') %}bold {{ i }}{% endcall %})j",
     R"j(<b>bold 7</b>)j"},
    {"CallBlockWithArguments",
     R"j({% macro each(items) %}{% for x in items %}{{ caller(x) }}{% endfor %}{% endmacro %}{% call(item) each(l) %}[{{ item }}]{% endcall %})j",
     R"j([3][1][2])j"},
    {"FilterBlock",
     R"j({% filter upper %}hello {{ s }}{% endfilter %}|{% filter replace('a', 'o') | title %}banana split{% endfilter %})j",
     R"j(HELLO HÉLLO WÖRLD|Bonono Split)j"},
    {"With", R"j({% with a = 1, b = 2 %}{{ a + b }}{% endwith %}[{{ a }}])j", R"j(3[])j"},
    {"GenerationTag", R"j(x{% generation %}{{ 'assistant text' }}{% endgeneration %}y)j", R"j(xassistant texty)j"},
    {"PrintTag", R"j({% print 'p' ~ i %})j", R"j(p7)j"},
};
const Case kFilters[] = {
    {"Tojson", R"j({{ d|tojson }} {{ 'é"\n'|tojson }} {{ [1.0, 2.5, none, true]|tojson }} {{ {'<': '&'}|tojson }})j",
     R"j({"a": 1, "items": 5, "b": [1, 2]} "é\"\n" [1.0, 2.5, null, true] {"<": "&"})j"},
    {"TojsonArguments",
     R"j({{ d|tojson(indent=2) }}|{{ d|tojson(sort_keys=true) }}|{{ d|tojson(separators=(',', ':')) }}|{{ 'é😀'|tojson(ensure_ascii=true) }}|{{ {'a': [], 'b': {}}|tojson(indent='\t') }})j",
     R"j({
  "a": 1,
  "items": 5,
  "b": [
    1,
    2
  ]
}|{"a": 1, "b": [1, 2], "items": 5}|{"a":1,"items":5,"b":[1,2]}|"\u00e9\ud83d\ude00"|{
	"a": [],
	"b": {}
})j"},
    {"LengthCount",
     R"j({{ l|length }} {{ d|length }} {{ s|length }} {{ s|count }} {{ missing|length }} {{ e|length }})j",
     R"j(3 3 11 11 0 0)j"},
    {"StringFilters",
     R"j({{ '  x  '|trim }}|{{ 'xxaxx'|trim('x') }}|{{ 5|string ~ 'x' }}|{{ none|string }}|{{ [1]|string }}|{{ 'Hello'|lower }}|{{ 'héllo'|upper }}|{{ 'hELLO wORLD'|capitalize }}|{{ 'hello-world (foo) o\'neil'|title }})j",
     R"j(x|a|5x|None|[1]|hello|HÉLLO|Hello world|Hello-World (Foo) O'neil)j"},
    {"Replace", R"j({{ 'a-b-c'|replace('-', '+') }} {{ 'a-b-c'|replace('-', '', 1) }} {{ 123|replace('2', 'x') }})j",
     R"j(a+b+c ab-c 1x3)j"},
    {"FirstLast", R"j({{ l|first }} {{ l|last }} {{ s|first }} {{ s|last }} [{{ e|first }}] {{ d|first }})j",
     R"j(3 2 h d [] a)j"},
    {"JoinListItems",
     R"j({{ l|join }} {{ l|join(', ') }} {{ msgs|join('|', attribute='role') }} {{ 'abc'|list }} {{ d|list }} {{ d|items|list }} {{ missing|items|list }})j",
     R"j(312 3, 1, 2 system|user|assistant ['a', 'b', 'c'] ['a', 'items', 'b'] [('a', 1), ('items', 5), ('b', [1, 2])] [])j"},
    {"Default",
     R"j({{ missing|default('dflt') }} {{ n|default('dflt') }} {{ n|default('dflt', true) }} {{ ''|d('empty', boolean=true) }} {{ 0|d(5) }})j",
     R"j(dflt None dflt empty 0)j"},
    {"MapSelectReject",
     R"j({{ msgs|map(attribute='role')|list }} {{ msgs|map(attribute='nope', default='?')|list }} {{ ['1', '2']|map('int')|list }} {{ l|select('odd')|list }} {{ l|reject('odd')|list }} {{ [0, 1, '', 'a', none]|select|list }} {{ l|select('gt', 1)|list }})j",
     R"j(['system', 'user', 'assistant'] ['?', '?', '?'] [1, 2] [3, 1] [2] [1, 'a'] [3, 2])j"},
    {"SelectattrRejectattr",
     R"j({{ msgs|selectattr('role', 'equalto', 'user')|map(attribute='content')|list }} {{ msgs|rejectattr('role', 'in', ['user', 'system'])|map(attribute='role')|first }} {{ [{'x': 1}, {'x': 0}, {}]|selectattr('x')|list }})j",
     R"j(['hi'] assistant [{'x': 1}])j"},
    {"GeneratorsAreAlwaysTrue",
     R"j({% if e|select %}truthy{% endif %} {% if e|select|list %}never{% else %}empty list{% endif %})j",
     R"j(truthy empty list)j"},
    {"Numbers",
     R"j({{ '42'|int }} {{ ' 4.7 '|int }} {{ 'x'|int }} {{ 'x'|int(5) }} {{ 3.9|int }} {{ '0x1A'|int(base=16) }} {{ '3.5'|float }} {{ 'a'|float }} {{ 2|float }} {{ -3|abs }} {{ -2.5|abs }})j",
     R"j(42 4 0 5 3 26 3.5 0.0 2.0 3 2.5)j"},
    {"Round",
     R"j({{ 2.5|round }} {{ 3.5|round }} {{ 2.675|round(2) }} {{ 2.1|round(0, 'ceil') }} {{ 2.9|round(method='floor') }} {{ 7|round }} {{ 1234.5678|round(2) }})j",
     R"j(2.0 4.0 2.67 3.0 2.0 7 1234.57)j"},
    {"SortUniqueReverse",
     R"j({{ l|sort }} {{ l|sort(reverse=true) }} {{ ss|sort }} {{ ss|sort(case_sensitive=true) }} {{ msgs|sort(attribute='role')|map(attribute='role')|list }} {{ [1, 2, 2, 'a', 'A']|unique|list }} {{ l|reverse|list }} {{ 'abc'|reverse }})j",
     R"j([1, 2, 3] [3, 2, 1] ['A', 'b', 'c'] ['A', 'b', 'c'] ['assistant', 'system', 'user'] [1, 2, 'a'] [2, 1, 3] cba)j"},
    {"Dictsort",
     R"j({{ {'b': 2, 'a': 3, 'C': 1}|dictsort }} {{ {'b': 2, 'a': 3}|dictsort(by='value') }} {{ {'b': 2, 'a': 3}|dictsort(reverse=true) }})j",
     R"j([('a', 3), ('b', 2), ('C', 1)] [('b', 2), ('a', 3)] [('b', 2), ('a', 3)])j"},
    {"Indent",
     R"j([{{ 'a\nb\n\nc'|indent }}] [{{ 'a\nb'|indent(2, true) }}] [{{ 'a\n\nb'|indent('> ', blank=true) }}])j",
     R"j([a
    b

    c] [  a
  b] [a
> 
> b])j"},
    {"MiscText",
     R"j({{ 'hello big-world, foo_bar 12'|wordcount }} {{ 'hi'|center(6) }}| {{ 'hello world foo'|truncate(9) }} {{ '%s=%d'|format('x', 3) }} {{ '<a href>'|e }})j",
     R"j(5   hi  | hello... x=3 &lt;a href&gt;)j"},
    {"Aggregates",
     R"j({{ l|max }} {{ l|min }} {{ l|sum }} {{ msgs|map(attribute='role')|max }} {{ [{'v': 2}, {'v': 5}]|sum(attribute='v') }} {{ l|batch(2)|list }} {{ l|slice(2)|list }})j",
     R"j(3 1 6 user 7 [[3, 1], [2]] [[3, 1], [2]])j"},
};
const Case kTests[] = {
    {"DefinedNone",
     R"j({{ missing is defined }} {{ missing is undefined }} {{ d.a is defined }} {{ d.zz is defined }} {{ n is none }} {{ n is not none }} {{ 0 is none }})j",
     R"j(False True True False True False False)j"},
    {"Types",
     R"j({{ s is string }} {{ 1 is string }} {{ d is mapping }} {{ l is mapping }} {{ i is number }} {{ t is number }} {{ i is integer }} {{ t is integer }} {{ f is float }} {{ f is integer }} {{ t is boolean }} {{ 1 is boolean }})j",
     R"j(True False True False True True True False True False True False)j"},
    {"IterableSequence",
     R"j({{ l is iterable }} {{ s is iterable }} {{ d is iterable }} {{ i is iterable }} {{ missing is iterable }} {{ l is sequence }} {{ d is sequence }} {{ missing is sequence }} {{ (l|select) is sequence }} {{ n is sequence }})j",
     R"j(True True True False True True True True False False)j"},
    {"TrueFalse", R"j({{ t is true }} {{ t is false }} {{ 1 is true }} {{ false is false }} {{ none is false }})j",
     R"j(True False False True False)j"},
    {"Numbers",
     R"j({{ 3 is odd }} {{ 3 is even }} {{ 4 is even }} {{ 9 is divisibleby 3 }} {{ 10 is divisibleby(3) }})j",
     R"j(True False True True False)j"},
    {"Comparisons",
     R"j({{ i is eq 7 }} {{ i is equalto 7 }} {{ i == 7 }} {{ i is ne 7 }} {{ i is gt 3 }} {{ i is ge 7 }} {{ i is lt 3 }} {{ i is le 7 }} {{ i is lessthan 8 }} {{ i is greaterthan 8 }} {{ 'a' is in 'abc' }} {{ 4 is in l }})j",
     R"j(True True True False True True False True True False True False)j"},
    {"Misc",
     R"j({{ 'abc' is lower }} {{ 'ABC' is upper }} {{ n is sameas none }} {{ 'upper' is filter }} {{ 'odd' is test }} {{ 'nope' is filter }} {{ range is callable }} {{ s is callable }} {{ ('x'|safe) is escaped }})j",
     R"j(True True True True True False True False True)j"},
    {"NegationBindsToTest", R"j({{ not d.zz is defined }} {{ d.zz is not defined and true }} {{ 1 + 1 is number }})j",
     R"j(True True 2)j"},
};
const Case kMethods[] = {
    {"StartsEnds",
     R"j({{ s.startswith('hé') }} {{ s.startswith('x') }} {{ s.endswith(('x', 'ld')) }} {{ 'abc'.startswith('b', 1) }})j",
     R"j(True False True True)j"},
    {"Split",
     R"j({{ 'a,b,,c'.split(',') }} {{ ' a  b  '.split() }} {{ 'a b c'.split(' ', 1) }} {{ 'a b c'.rsplit(' ', 1) }} {{ ''.split() }} {{ 'a\nb\r\nc'.splitlines() }})j",
     R"j(['a', 'b', '', 'c'] ['a', 'b'] ['a', 'b c'] ['a b', 'c'] [] ['a', 'b', 'c'])j"},
    {"Strip",
     R"j([{{ '  x \n'.strip() }}] [{{ 'xxaxx'.lstrip('x') }}] [{{ 'xxaxx'.rstrip('x') }}] [{{ '\n\ntext\n'.strip('\n') }}])j",
     R"j([x] [axx] [xxa] [text])j"},
    {"Case",
     R"j({{ 'MiXed'.lower() }} {{ 'MiXed'.upper() }} {{ "hello world's".title() }} {{ 'hELLO'.capitalize() }} {{ 'MiXed'.swapcase() }})j",
     R"j(mixed MIXED Hello World'S Hello mIxED)j"},
    {"FindReplaceCount",
     R"j({{ s.find('l') }} {{ s.rfind('l') }} {{ s.find('zz') }} {{ s.index('w') }} {{ s.count('l') }} {{ s.replace('l', 'L') }} {{ s.replace('l', 'L', 1) }} {{ 'abc'.replace('', '-') }})j",
     R"j(2 9 -1 6 3 héLLo wörLd héLlo wörld -a-b-c-)j"},
    {"Misc",
     R"j({{ '-'.join(['a', 'b']) }} {{ 'ab'.center(6, '*') }} {{ '7'.zfill(3) }} {{ 'ab'.ljust(4, '.') }} {{ 'ab'.rjust(4) }} {{ 'abc'.isalpha() }} {{ '12'.isdigit() }} {{ ' '.isspace() }} {{ 'x.y'.partition('.') }} {{ 'prefix_x'.removeprefix('prefix_') }} {{ '{} and {name}'.format(1, name='two') }})j",
     R"j(a-b **ab** 007 ab..   ab True True True ('x', '.', 'y') x 1 and two)j"},
    {"DictAndList",
     R"j({{ d.get('a') }} {{ d.get('zz') }} {{ d.get('zz', 9) }} {{ d.keys()|list }} {{ d.values()|list }} {{ d.items() }} {{ d.keys() }} {{ l.index(1) }} {{ l.count(3) }} {{ (1, 2).index(2) }})j",
     R"j(1 None 9 ['a', 'items', 'b'] [1, 5, [1, 2]] dict_items([('a', 1), ('items', 5), ('b', [1, 2])]) dict_keys(['a', 'items', 'b']) 1 1 1)j"},
};
const Case kGlobals[] = {
    {"Range",
     R"j({{ range(3)|list }} {{ range(1, 10, 3)|list }} {{ range(5, 0, -2)|list }} {{ range(3) }} {{ range(3)|length }} {% for x in range(2) %}{{ x }}{% endfor %})j",
     R"j([0, 1, 2] [1, 4, 7] [5, 3, 1] range(0, 3) 3 01)j"},
    {"Dict", R"j({{ dict(a=1, b=2) }} {{ dict([('x', 1)]) }} {{ dict({'y': 1}, z=2) }})j",
     R"j({'a': 1, 'b': 2} {'x': 1} {'y': 1, 'z': 2})j"},
    {"CyclerJoiner",
     R"j({% set c = cycler('a', 'b') %}{{ c.next() }}{{ c.next() }}{{ c.next() }}{{ c.current }} {% set j = joiner('|') %}{{ j() }}a{{ j() }}b{{ j() }}c)j",
     R"j(abab a|b|c)j"},
    {"PercentFormat",
     R"j({{ '%s-%d-%.2f-%5s|%-4s|%03d|%x|%r|%%' % ('a', 3, 1.5, 'b', 'c', 7, 255, 'q') }} {{ '%(a)s' % {'a': 1} }} {{ '%s' % 'one' }})j",
     R"j(a-3-1.50-    b|c   |007|ff|'q'|% 1 one)j"},
};

class JinjaCases : public testing::TestWithParam<Case> {};

TEST_P(JinjaCases, MatchesJinja2) { EXPECT_EQ(render(GetParam().source), GetParam().expected) << GetParam().source; }

std::string case_name(const testing::TestParamInfo<Case>& info) { return info.param.name; }

INSTANTIATE_TEST_SUITE_P(Whitespace, JinjaCases, testing::ValuesIn(kWhitespace), case_name);
INSTANTIATE_TEST_SUITE_P(Printing, JinjaCases, testing::ValuesIn(kPrinting), case_name);
INSTANTIATE_TEST_SUITE_P(Literals, JinjaCases, testing::ValuesIn(kLiterals), case_name);
INSTANTIATE_TEST_SUITE_P(Expressions, JinjaCases, testing::ValuesIn(kExpressions), case_name);
INSTANTIATE_TEST_SUITE_P(Statements, JinjaCases, testing::ValuesIn(kStatements), case_name);
INSTANTIATE_TEST_SUITE_P(Filters, JinjaCases, testing::ValuesIn(kFilters), case_name);
INSTANTIATE_TEST_SUITE_P(Tests, JinjaCases, testing::ValuesIn(kTests), case_name);
INSTANTIATE_TEST_SUITE_P(Methods, JinjaCases, testing::ValuesIn(kMethods), case_name);
INSTANTIATE_TEST_SUITE_P(Globals, JinjaCases, testing::ValuesIn(kGlobals), case_name);

// ---- errors: kind, message and line ---------------------------------------------------------

void expect_error(std::string_view source, ErrorKind kind, int line, std::string_view message_part) {
  const std::optional<TemplateError> error = render_error(source);
  ASSERT_TRUE(error.has_value()) << source;
  EXPECT_EQ(error->kind(), kind) << error->what();
  EXPECT_EQ(error->line(), line) << error->what();
  EXPECT_NE(error->message().find(message_part), std::string::npos) << error->what();
}

TEST(JinjaErrors, SyntaxErrorsNameTheLine) {
  expect_error("a\n{% if x %}\nb\n", ErrorKind::kSyntax, 3,
               "expected 'elif' or 'else' or 'endif' to close the 'if' block opened on line 2");
  expect_error("x\n\n{% endfor %}", ErrorKind::kSyntax, 3, "unknown tag 'endfor'");
  expect_error("{% frobnicate %}", ErrorKind::kSyntax, 1, "unknown tag 'frobnicate'");
  expect_error("a\nb\n{{ 1 +\n }}", ErrorKind::kSyntax, 4, "unexpected end of print statement");
  expect_error("\n\n{{ a b }}", ErrorKind::kSyntax, 3, "expected end of print statement, got 'b'");
  expect_error("{% if %}", ErrorKind::kSyntax, 1, "expected an expression");
  expect_error("{{ [1, 2}} }}", ErrorKind::kSyntax, 1, "unexpected '}', expected ']'");
  expect_error("\n{{ 'open }}", ErrorKind::kSyntax, 2, "unterminated string");
  expect_error("{# never closed", ErrorKind::kSyntax, 1, "missing end of comment tag");
  expect_error("{% break %}", ErrorKind::kSyntax, 1, "'break' outside of a for loop");
  expect_error("{% set 1 = 2 %}", ErrorKind::kSyntax, 1, "can't assign");
  expect_error("{% macro m(a=1, b) %}{% endmacro %}", ErrorKind::kSyntax, 1,
               "non-default argument follows default argument");
  expect_error("{{ x is defined is none }}", ErrorKind::kSyntax, 1, "");
}

TEST(JinjaErrors, UnsupportedConstructsAreRefusedWithTheirLine) {
  expect_error("ok\n{% include 'other.jinja' %}", ErrorKind::kUnsupported, 2, "'include' tag is not supported");
  expect_error("{% extends 'base' %}", ErrorKind::kUnsupported, 1, "'extends' tag is not supported");
  expect_error("{% import 'm' as m %}", ErrorKind::kUnsupported, 1, "'import' tag is not supported");
  expect_error("\n{{ l|groupby('x') }}", ErrorKind::kUnsupported, 2, "'groupby' filter is not supported");
  expect_error("{{ 'abc'.encode() }}", ErrorKind::kUnsupported, 1, "str.encode() is not supported");
  expect_error("{{ 10000000000 * 10000000000 }}", ErrorKind::kUnsupported, 1, "64-bit");
  expect_error("{{ lipsum() }}", ErrorKind::kUnsupported, 1, "lipsum");
  expect_error("{% do l.append(1) %}", ErrorKind::kSyntax, 1, "unknown tag 'do'");
}

TEST(JinjaErrors, UnknownFiltersAndTests) {
  expect_error("{{ l|nosuchfilter }}", ErrorKind::kSyntax, 1, "no filter named 'nosuchfilter'");
  expect_error("{{ l is nosuchtest }}", ErrorKind::kSyntax, 1, "no test named 'nosuchtest'");
}

TEST(JinjaErrors, UndefinedValuesFailWhenUsed) {
  expect_error("line1\n{{ missing.x }}", ErrorKind::kUndefined, 2, "'missing' is undefined");
  expect_error("{{ d.zz.x }}", ErrorKind::kUndefined, 1, "'dict object' has no attribute 'zz'");
  expect_error("{{ d.zz + 1 }}", ErrorKind::kUndefined, 1, "'dict object' has no attribute 'zz'");
  expect_error("{{ missing() }}", ErrorKind::kUndefined, 1, "'missing' is undefined");
  expect_error("{{ missing < 1 }}", ErrorKind::kUndefined, 1, "'missing' is undefined");
  expect_error("{{ msgs[0].content.startswith(1) }}", ErrorKind::kType, 1, "startswith first arg must be str");
  expect_error("{{ l.startswith('x') }}", ErrorKind::kUndefined, 1, "'list object' has no attribute 'startswith'");
  expect_error("{{ missing|tojson }}", ErrorKind::kType, 1, "Object of type Undefined is not JSON serializable");
}

TEST(JinjaErrors, TypeErrorsLikePython) {
  expect_error("{{ 'a' + 1 }}", ErrorKind::kType, 1, "can only concatenate str (not \"int\") to str");
  expect_error("{{ [1] + (2,) }}", ErrorKind::kType, 1, "can only concatenate list");
  expect_error("{{ 1 / 0 }}", ErrorKind::kType, 1, "division by zero");
  expect_error("{{ 1 + 2 ~ 3 }}", ErrorKind::kType, 1, "unsupported operand type(s) for +: 'int' and 'str'");
  expect_error("{{ -l|length }}", ErrorKind::kType, 1, "bad operand type for unary -: 'list'");
  expect_error("{{ [1] < ['a'] }}", ErrorKind::kType, 1, "'<' not supported between instances of 'int' and 'str'");
  expect_error("{{ l|select|length }}", ErrorKind::kType, 1, "object of type 'generator' has no len()");
  expect_error("{% for x in 5 %}{% endfor %}", ErrorKind::kType, 1, "'int' object is not iterable");
  expect_error("{% set a, b = [1, 2, 3] %}", ErrorKind::kType, 1, "too many values to unpack");
  expect_error("{% set y = 1 %}{% set y.attr = 2 %}", ErrorKind::kType, 1,
               "cannot assign attribute on non-namespace object");
  expect_error("{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}", ErrorKind::kType, 1,
               "macro 'm' takes not more than 1 argument(s)");
  expect_error("{% macro m(a) %}{% endmacro %}{{ m(b=2) }}", ErrorKind::kType, 1,
               "macro 'm' takes no keyword argument 'b'");
  expect_error("{{ 5|items|list }}", ErrorKind::kType, 1, "Can only get item pairs from a mapping.");
  expect_error("{% macro r() %}{{ r() }}{% endmacro %}{{ r() }}", ErrorKind::kType, 1, "maximum recursion depth");
}

TEST(JinjaErrors, SandboxRefusesMutation) {
  expect_error("{% set x = [1] %}\n{{ x.append(2) }}", ErrorKind::kSecurity, 2,
               "access to attribute 'append' of 'list' object is unsafe.");
  expect_error("{{ d.update({'a': 2}) }}", ErrorKind::kSecurity, 1,
               "access to attribute 'update' of 'dict' object is unsafe.");
  expect_error("{{ d.pop('a') }}", ErrorKind::kSecurity, 1, "unsafe");
  expect_error("{% set ns = namespace() %}{% set ns._x = 1 %}", ErrorKind::kSecurity, 1, "underscore-prefixed");
  expect_error("{{ range(1000000)|length }}", ErrorKind::kSecurity, 1, "Range too big");
}

TEST(JinjaErrors, RaiseExceptionCarriesTheTemplatesMessage) {
  const std::optional<TemplateError> error =
      render_error("{% if true %}\n  {{ raise_exception('No user query found in messages.') }}\n{% endif %}");
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->kind(), ErrorKind::kRaised);
  EXPECT_EQ(error->message(), "No user query found in messages.");
  EXPECT_EQ(error->line(), 2);
  EXPECT_EQ(std::string(error->what()), "test.jinja, line 2: raise_exception: No user query found in messages.");
}

TEST(JinjaErrors, ErrorsInsideMacrosNameTheMacroLine) {
  expect_error("{% macro m() %}\n\n{{ 1 // 0 }}{% endmacro %}\n{{ m() }}", ErrorKind::kType, 3,
               "division or modulo by zero");
}

// ---- the API around templates -------------------------------------------------------------

TEST(JinjaApi, JsonKeepsKeyOrderAndTypes) {
  const Value value = from_json(nlohmann::ordered_json::parse(R"({"z": 1, "a": [1.0, 2, "x", null, true], "m": {}})"));
  EXPECT_EQ(value.repr(), "{'z': 1, 'a': [1.0, 2, 'x', None, True], 'm': {}}");
  EXPECT_EQ(to_json(value, {}), R"({"z": 1, "a": [1.0, 2, "x", null, true], "m": {}})");
  JsonOptions indented;
  indented.indent = "  ";
  indented.item_separator = ",";
  indented.sort_keys = true;
  EXPECT_EQ(to_json(value, indented),
            "{\n  \"a\": [\n    1.0,\n    2,\n    \"x\",\n    null,\n    true\n  ],\n  \"m\": {},\n  \"z\": 1\n}");
}

TEST(JinjaApi, FloatsPrintLikePython) {
  EXPECT_EQ(format_float(1.0), "1.0");
  EXPECT_EQ(format_float(0.1 + 0.2), "0.30000000000000004");
  EXPECT_EQ(format_float(1e16), "1e+16");
  EXPECT_EQ(format_float(123456789012345678.0), "1.2345678901234568e+17");
  EXPECT_EQ(format_float(1e-5), "1e-05");
  EXPECT_EQ(format_float(0.0001), "0.0001");
  EXPECT_EQ(format_float(-0.0), "-0.0");
}

TEST(JinjaApi, StrftimeNowFormatsTheLocalDate) {
  const std::string year = render("{{ strftime_now('%Y') }}");
  ASSERT_EQ(year.size(), 4u);
  EXPECT_GE(std::stoi(year), 2024);
  EXPECT_EQ(render("{{ strftime_now('%d %B %Y')|length > 8 }}"), "True");
}

TEST(JinjaApi, TemplateIsReusable) {
  const Template tpl = Template::parse("{% set ns = namespace(n=0) %}{% set ns.n = ns.n + 1 %}{{ ns.n }}{{ x }}");
  DictData vars;
  vars.set(Value("x"), Value("!"));
  EXPECT_EQ(tpl.render(vars), "1!");
  EXPECT_EQ(tpl.render(vars), "1!");
  EXPECT_EQ(tpl.render({}), "1");
}

}  // namespace
}  // namespace imp::text::jinja
