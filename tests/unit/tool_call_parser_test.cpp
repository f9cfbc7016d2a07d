// Tool calls in both Qwen formats: parsing, schema typing of XML values, and malformed calls kept as content.
// Chunking invariance over these outputs is checked in output_parser_test.cpp.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "text/output_parser.h"
#include "text/tool_call_parser.h"

namespace imp::text {
namespace {

using json = nlohmann::json;

ToolSchemas weather_tools() {
  return ToolSchemas::from_openai_tools(json::parse(R"([
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {
      "city": {"type": "string"}, "days": {"type": "integer"}, "scale": {"type": "number"},
      "metric": {"type": "boolean"}, "options": {"type": "object"}, "hours": {"type": "array"},
      "nothing": {"type": "null"}, "maybe": {"type": ["integer", "null"]},
      "either": {"anyOf": [{"type": "string"}, {"type": "null"}]}, "text_or_int": {"type": ["string", "integer"]},
      "free": {"description": "no type"}}}}},
    {"type": "function", "function": {"name": "noop", "parameters": {"type": "object", "properties": {}}}}
  ])"));
}

ParsedOutput parse(std::string_view text, ToolSchemas tools = {}) {
  OutputParserOptions options;
  options.tools = std::move(tools);
  return parse_output(text, options);
}

// One XML call with one parameter, typed by the weather schema; returns the arguments string.
std::string xml_arguments(std::string_view param, std::string_view value) {
  const std::string text = "<tool_call>\n<function=get_weather>\n<parameter=" + std::string(param) + ">\n" +
                           std::string(value) + "\n</parameter>\n</function>\n</tool_call>";
  const ParsedOutput out = parse(text, weather_tools());
  if (out.tool_calls.size() != 1) return "<no call: " + out.content + ">";
  return out.tool_calls[0].arguments;
}

void expect_plain_content(std::string_view text) {
  const ParsedOutput out = parse(text, weather_tools());
  EXPECT_EQ(out.content, text);
  EXPECT_TRUE(out.tool_calls.empty());
  EXPECT_TRUE(out.reasoning.empty());
}

TEST(ToolCallParser, JsonSingleCall) {
  const ParsedOutput out =
      parse("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>");
  ASSERT_EQ(out.tool_calls.size(), 1u);
  EXPECT_EQ(out.tool_calls[0], (ToolCall{"call_0", "get_weather", R"({"city":"Paris"})"}));
  EXPECT_EQ(out.content, "");
  EXPECT_TRUE(out.has_tool_calls());
}

TEST(ToolCallParser, JsonMultipleCallsDropSeparatingWhitespace) {
  const ParsedOutput out = parse(
      "<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>\n"
      "<tool_call>\n{\"name\": \"b\", \"arguments\": {\"x\": [1, 2]}}\n</tool_call>\n");
  ASSERT_EQ(out.tool_calls.size(), 2u);
  EXPECT_EQ(out.tool_calls[0], (ToolCall{"call_0", "a", "{}"}));
  EXPECT_EQ(out.tool_calls[1], (ToolCall{"call_1", "b", R"({"x":[1,2]})"}));
  EXPECT_EQ(out.content, "");
}

TEST(ToolCallParser, JsonArgumentsKeepKeyOrderAndAcceptStringOrMissingArguments) {
  EXPECT_EQ(parse(R"(<tool_call>{"name": "f", "arguments": {"z": 1, "a": {"y": 2, "b": 3}}}</tool_call>)")
                .tool_calls.at(0)
                .arguments,
            R"({"z":1,"a":{"y":2,"b":3}})");
  EXPECT_EQ(parse(R"(<tool_call>{"name": "f", "arguments": "{\"a\": 1}"}</tool_call>)").tool_calls.at(0).arguments,
            R"({"a":1})");
  EXPECT_EQ(parse(R"(<tool_call>{"name": "f"}</tool_call>)").tool_calls.at(0).arguments, "{}");
  EXPECT_EQ(parse(R"(<tool_call>{"name": "f", "arguments": null}</tool_call>)").tool_calls.at(0).arguments, "{}");
  EXPECT_EQ(parse(R"(<tool_call>{"name": "f", "parameters": {"a": 1}}</tool_call>)").tool_calls.at(0).arguments,
            R"({"a":1})");
}

// A `</tool_call>` inside a JSON string does not close the call; braces and quotes in strings are data.
TEST(ToolCallParser, JsonNestedArgumentsWithBracesQuotesAndCloseTagInStrings) {
  const std::string args = R"({"code":"if (x) { print(\"</tool_call>\"); }","nested":{"a":[1,{"b":"}\\"}]}})";
  const ParsedOutput out = parse("<tool_call>\n{\"name\": \"run\", \"arguments\": " + args + "}\n</tool_call>");
  ASSERT_EQ(out.tool_calls.size(), 1u);
  EXPECT_EQ(out.tool_calls[0].arguments, args);
  EXPECT_EQ(json::parse(out.tool_calls[0].arguments)["code"], "if (x) { print(\"</tool_call>\"); }");
  EXPECT_EQ(out.content, "");
}

TEST(ToolCallParser, UnicodeArgumentsStayUtf8) {
  const ParsedOutput out =
      parse("<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Zürich 東京 🌍\"}}</tool_call>");
  EXPECT_EQ(out.tool_calls.at(0).arguments, "{\"city\":\"Zürich 東京 🌍\"}");
  EXPECT_EQ(xml_arguments("city", "Zürich 東京 🌍"), "{\"city\":\"Zürich 東京 🌍\"}");
}

TEST(ToolCallParser, XmlCallWithTemplateLayout) {
  const ParsedOutput out = parse(
      "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n3\n"
      "</parameter>\n</function>\n</tool_call>",
      weather_tools());
  ASSERT_EQ(out.tool_calls.size(), 1u);
  EXPECT_EQ(out.tool_calls[0], (ToolCall{"call_0", "get_weather", R"({"city":"Paris","days":3})"}));
  EXPECT_EQ(out.content, "");
}

TEST(ToolCallParser, XmlSchemaTypesEachJsonType) {
  EXPECT_EQ(xml_arguments("city", "Paris"), R"({"city":"Paris"})");
  EXPECT_EQ(xml_arguments("city", "42"), R"({"city":"42"})");
  EXPECT_EQ(xml_arguments("city", "\"quoted\""), R"({"city":"\"quoted\""})");
  EXPECT_EQ(xml_arguments("days", "7"), R"({"days":7})");
  EXPECT_EQ(xml_arguments("days", "-12"), R"({"days":-12})");
  EXPECT_EQ(xml_arguments("days", "5.0"), R"({"days":5})");
  EXPECT_EQ(xml_arguments("scale", "2.5"), R"({"scale":2.5})");
  EXPECT_EQ(xml_arguments("scale", "3"), R"({"scale":3})");
  EXPECT_EQ(xml_arguments("metric", "true"), R"({"metric":true})");
  EXPECT_EQ(xml_arguments("metric", "False"), R"({"metric":false})");
  EXPECT_EQ(xml_arguments("options", R"({"unit": "C", "n": [1, 2]})"), R"({"options":{"unit":"C","n":[1,2]}})");
  EXPECT_EQ(xml_arguments("hours", "[1, 2, 3]"), R"({"hours":[1,2,3]})");
  EXPECT_EQ(xml_arguments("nothing", "null"), R"({"nothing":null})");
}

TEST(ToolCallParser, XmlValuesThatDoNotFitTheirTypeStayStrings) {
  EXPECT_EQ(xml_arguments("days", "three"), R"({"days":"three"})");
  EXPECT_EQ(xml_arguments("scale", "1.5x"), R"({"scale":"1.5x"})");
  EXPECT_EQ(xml_arguments("metric", "yes"), R"({"metric":"yes"})");
  EXPECT_EQ(xml_arguments("options", "{unit: C}"), R"({"options":"{unit: C}"})");
  EXPECT_EQ(xml_arguments("options", "[1]"), R"({"options":"[1]"})");
  EXPECT_EQ(xml_arguments("hours", "[1, 2"), R"({"hours":"[1, 2"})");
}

TEST(ToolCallParser, XmlUnionAndNullableTypes) {
  EXPECT_EQ(xml_arguments("maybe", "4"), R"({"maybe":4})");
  EXPECT_EQ(xml_arguments("maybe", "null"), R"({"maybe":null})");
  EXPECT_EQ(xml_arguments("maybe", "None"), R"({"maybe":null})");
  EXPECT_EQ(xml_arguments("either", "null"), R"({"either":null})");
  EXPECT_EQ(xml_arguments("either", "text"), R"({"either":"text"})");
  EXPECT_EQ(xml_arguments("text_or_int", "5"), R"({"text_or_int":"5"})");  // string wins a union
  EXPECT_EQ(xml_arguments("days", "null"), R"({"days":null})");           // non-string types take null
  EXPECT_EQ(xml_arguments("city", "null"), R"({"city":"null"})");
}

// No schema for the parameter (untyped, unknown parameter, unknown tool): JSON if it parses, else a string.
TEST(ToolCallParser, XmlWithoutSchemaTriesJsonThenString) {
  EXPECT_EQ(xml_arguments("free", "42"), R"({"free":42})");
  EXPECT_EQ(xml_arguments("unknown", "true"), R"({"unknown":true})");
  EXPECT_EQ(xml_arguments("unknown", "[1, {\"a\": 2}]"), R"({"unknown":[1,{"a":2}]})");
  EXPECT_EQ(xml_arguments("unknown", "\"quoted\""), R"({"unknown":"quoted"})");
  EXPECT_EQ(xml_arguments("unknown", "hello world"), R"({"unknown":"hello world"})");
  EXPECT_EQ(xml_arguments("unknown", "007"), R"({"unknown":"007"})");
  const ParsedOutput out = parse("<tool_call><function=other><parameter=n>1.5</parameter></function></tool_call>");
  EXPECT_EQ(out.tool_calls.at(0).arguments, R"({"n":1.5})");
}

TEST(ToolCallParser, XmlStringStripsExactlyOneNewlineEachSide) {
  EXPECT_EQ(xml_arguments("city", "\nline one\n  indented\n"), "{\"city\":\"\\nline one\\n  indented\\n\"}");
  EXPECT_EQ(xml_arguments("city", "  spaced  "), R"({"city":"  spaced  "})");
  const ParsedOutput bare =
      parse("<tool_call><function=get_weather><parameter=city>Rome</parameter></function></tool_call>",
            weather_tools());
  EXPECT_EQ(bare.tool_calls.at(0).arguments, R"({"city":"Rome"})");
}

TEST(ToolCallParser, XmlWhitespaceVariantsAndParameterOrder) {
  const ParsedOutput out = parse(
      "<tool_call><function = get_weather >  <parameter= days >\n2\n</parameter><parameter =city>Oslo"
      "</parameter>\n\n</function>   </tool_call>",
      weather_tools());
  ASSERT_EQ(out.tool_calls.size(), 1u);
  EXPECT_EQ(out.tool_calls[0].name, "get_weather");
  EXPECT_EQ(out.tool_calls[0].arguments, R"({"days":2,"city":"Oslo"})");
  EXPECT_EQ(parse("<tool_call>\n<function=noop>\n</function>\n</tool_call>").tool_calls.at(0).arguments, "{}");
}

// A value ends at a `</parameter>` followed by `<parameter=`, `</function>` or the end of the call only.
TEST(ToolCallParser, XmlValueMayContainClosingTags) {
  const std::string code = "print('</parameter> and </function> and </tool_call>')\n</parameter>x";
  const ParsedOutput out = parse("<tool_call>\n<function=run>\n<parameter=code>\n" + code +
                                 "\n</parameter>\n<parameter=n>\n1\n</parameter>\n</function>\n</tool_call>");
  ASSERT_EQ(out.tool_calls.size(), 1u) << out.content;
  EXPECT_EQ(json::parse(out.tool_calls[0].arguments)["code"], code);
  EXPECT_EQ(out.content, "");
}

TEST(ToolCallParser, TextBeforeBetweenAndAfterCallsIsContent) {
  const ParsedOutput out = parse(
      "Checking both.\n\n<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>\nand then\n"
      "<tool_call>\n<function=b>\n</function>\n</tool_call>\nDone.");
  ASSERT_EQ(out.tool_calls.size(), 2u);
  EXPECT_EQ(out.tool_calls[0].name, "a");
  EXPECT_EQ(out.tool_calls[1].name, "b");
  EXPECT_EQ(out.content, "Checking both.\n\n\nand then\n\nDone.");
}

TEST(ToolCallParser, MalformedCallsAreContentExactlyAsGenerated) {
  expect_plain_content("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}");  // unclosed
  expect_plain_content("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": }}\n</tool_call>");
  expect_plain_content("<tool_call>\n{\"arguments\": {\"city\": \"Paris\"}}\n</tool_call>");  // no name
  expect_plain_content("<tool_call>\n{\"name\": 7, \"arguments\": {}}\n</tool_call>");
  expect_plain_content("<tool_call>\n{\"name\": \"  \", \"arguments\": {}}\n</tool_call>");
  expect_plain_content("<tool_call>\n{\"name\": \"f\", \"arguments\": [1]}\n</tool_call>");
  expect_plain_content("<tool_call>\n{\"name\": \"f\", \"arguments\": \"not json\"}\n</tool_call>");
  expect_plain_content("<tool_call>\n{\"name\": \"f\"} trailing\n</tool_call>");
  expect_plain_content("<tool_call>\n{\"name\": \"f\", \"arguments\": {\"s\": \"raw\nnewline\"}}\n</tool_call>");
  expect_plain_content("<tool_call>\nhello\n</tool_call>");
  expect_plain_content("<tool_call></tool_call>");
  expect_plain_content("<tool_call>\n<function=f>\n<parameter=a>\n1\n</parameter>\n</tool_call>");  // no </function>
  expect_plain_content("<tool_call>\n<function=f>\n<parameter=a>\n1\n</function>\n</tool_call>");  // no </parameter>
  expect_plain_content("<tool_call>\n<function=f>\nstray text\n</function>\n</tool_call>");
  expect_plain_content("<tool_call>\n<function=>\n</function>\n</tool_call>");
  expect_plain_content("<tool_call>\n<function f>\n</function>\n</tool_call>");
  expect_plain_content("<tool_call>\n<functions>\n</tool_call>");
  expect_plain_content("<tool_call>\n<function=f>\n</function>\nextra\n</tool_call>");
  expect_plain_content("<tool_call>\n<function=f>\n<parameter=a>\n1\n</parameter>\n");  // truncated
  expect_plain_content("<tool_call>\n<function=f");
  expect_plain_content("<tool_call>");
  expect_plain_content("<tool_call>\n\n");
  expect_plain_content("a <tool_call b");
  expect_plain_content("</tool_call> stray close");
}

TEST(ToolCallParser, MalformedCallDoesNotConsumeAnIndex) {
  const ParsedOutput out = parse(
      "<tool_call>{bad}</tool_call>\n<tool_call>{\"name\": \"good\", \"arguments\": {}}</tool_call>");
  ASSERT_EQ(out.tool_calls.size(), 1u);
  EXPECT_EQ(out.tool_calls[0], (ToolCall{"call_0", "good", "{}"}));
  EXPECT_EQ(out.content, "<tool_call>{bad}</tool_call>\n");
}

TEST(ToolCallParser, BothFormatsInOneOutput) {
  const ParsedOutput out = parse(
      "<tool_call>\n<function=get_weather>\n<parameter=days>\n1\n</parameter>\n</function>\n</tool_call>\n"
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"days\": \"1\"}}\n</tool_call>",
      weather_tools());
  ASSERT_EQ(out.tool_calls.size(), 2u);
  EXPECT_EQ(out.tool_calls[0].arguments, R"({"days":1})");
  EXPECT_EQ(out.tool_calls[1].arguments, R"({"days":"1"})");  // JSON arguments are taken as written
}

TEST(ToolCallParser, ParseBodyDirectly) {
  const ToolSchemas none;
  EXPECT_EQ(parse_tool_call_body(" {\"name\": \"f\"} ", none)->name, "f");
  EXPECT_EQ(parse_tool_call_body("\n<function=g>\n</function>\n", none)->name, "g");
  EXPECT_FALSE(parse_tool_call_body("", none));
  EXPECT_FALSE(parse_tool_call_body("[{\"name\": \"f\"}]", none));
}

TEST(ToolCallParser, ConvertParameterValueDirectly) {
  const json integer = {{"type", "INTEGER"}};
  EXPECT_EQ(convert_parameter_value("\n 12 \n", &integer), 12);
  EXPECT_EQ(convert_parameter_value("12.5", &integer), 12.5);  // a number that is not integral stays a number
  EXPECT_EQ(convert_parameter_value("\n", nullptr), "");
  EXPECT_EQ(convert_parameter_value("", nullptr), "");
}

TEST(ToolCallParser, ToolSchemasIgnoreJunk) {
  EXPECT_TRUE(ToolSchemas::from_openai_tools(json()).empty());
  EXPECT_TRUE(ToolSchemas::from_openai_tools(json::object()).empty());
  const ToolSchemas schemas = ToolSchemas::from_openai_tools(json::parse(R"([1, "x", {"type": "function"},
      {"function": {"name": 5}}, {"name": "bare", "parameters": {"properties": {"n": {"type": "integer"}}}},
      {"type": "function", "function": {"name": "no_params"}}])"));
  ASSERT_NE(schemas.parameter("bare", "n"), nullptr);
  EXPECT_EQ(schemas.parameter("bare", "n")->at("type"), "integer");
  EXPECT_EQ(schemas.parameter("bare", "m"), nullptr);
  EXPECT_EQ(schemas.parameter("no_params", "n"), nullptr);
  EXPECT_EQ(schemas.parameter("missing", "n"), nullptr);
}

TEST(ToolCallParser, CallIdsComeFromTheHook) {
  OutputParserOptions options;
  options.make_call_id = [](int index) { return "call_req7_" + std::to_string(index); };
  const ParsedOutput out = parse_output(
      "<tool_call>{\"name\": \"a\"}</tool_call><tool_call>{\"name\": \"b\"}</tool_call>", options);
  ASSERT_EQ(out.tool_calls.size(), 2u);
  EXPECT_EQ(out.tool_calls[0].id, "call_req7_0");
  EXPECT_EQ(out.tool_calls[1].id, "call_req7_1");
}

TEST(ToolCallParser, DisabledToolParsingKeepsCallsAsContent) {
  OutputParserOptions options;
  options.parse_tool_calls = false;
  const std::string text = "<tool_call>\n{\"name\": \"a\"}\n</tool_call>";
  const ParsedOutput out = parse_output(text, options);
  EXPECT_EQ(out.content, text);
  EXPECT_FALSE(out.has_tool_calls());
}

}  // namespace
}  // namespace imp::text
