// Forced tool calls (tool_choice required / named): the opening text per format, closing an open thought
// before it, and the output parser reading the opening as the start of the output.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "text/output_parser.h"
#include "text/reasoning_parser.h"
#include "text/tool_call_opening.h"

namespace imp::text {
namespace {

TEST(ToolCallOpening, FormatFollowsTheTemplate) {
  EXPECT_EQ(detect_tool_call_format(R"({{- '<tool_call>\n{"name": "' }})"), ToolCallFormat::json);
  EXPECT_EQ(detect_tool_call_format(R"({{- '<tool_call>\n<function=' + name + '>\n' }})"), ToolCallFormat::xml);
  EXPECT_EQ(detect_tool_call_format("{{ messages[0].content }}"), ToolCallFormat::unknown);
}

TEST(ToolCallOpening, TextPerFormat) {
  EXPECT_EQ(tool_call_opening(ToolCallFormat::json), "<tool_call>\n{\"name\": \"");
  EXPECT_EQ(tool_call_opening(ToolCallFormat::json, "get_weather"),
            "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": ");
  EXPECT_EQ(tool_call_opening(ToolCallFormat::json, "a\"b"), "<tool_call>\n{\"name\": \"a\\\"b\", \"arguments\": ");
  EXPECT_EQ(tool_call_opening(ToolCallFormat::xml), "<tool_call>\n<function=");
  EXPECT_EQ(tool_call_opening(ToolCallFormat::xml, "get_weather"), "<tool_call>\n<function=get_weather>\n");
  EXPECT_EQ(tool_call_opening(ToolCallFormat::unknown, "f"), "");
}

TEST(ToolCallOpening, OpenThoughtIsClosedEmpty) {
  EXPECT_EQ(close_open_reasoning("<|im_start|>assistant\n<think>\n"), "\n</think>\n\n");
  EXPECT_EQ(close_open_reasoning("<|im_start|>assistant\n<think>"), "\n\n</think>\n\n");
  EXPECT_EQ(close_open_reasoning("<|im_start|>assistant\n"), "");
  EXPECT_EQ(close_open_reasoning("<|im_start|>assistant\n<think>\n\n</think>\n\n"), "");
  const std::string closed = std::string("x<think>\n") + close_open_reasoning("x<think>\n");
  EXPECT_FALSE(prompt_opens_reasoning(closed));
}

OutputParserOptions forced(std::string prefix) {
  OutputParserOptions options;
  options.tools = ToolSchemas::from_openai_tools(nlohmann::json::parse(R"([{"type": "function", "function": {
      "name": "f", "parameters": {"type": "object", "properties": {"n": {"type": "integer"}}}}}])"));
  options.prefix = std::move(prefix);
  return options;
}

TEST(ToolCallOpening, ParserCompletesTheOpeningWithTheGeneratedText) {
  for (ToolCallFormat format : {ToolCallFormat::json, ToolCallFormat::xml}) {
    const bool json = format == ToolCallFormat::json;
    const ParsedOutput any = parse_output(json ? "f\", \"arguments\": {\"n\": 1}}\n</tool_call>"
                                               : "f>\n<parameter=n>\n1\n</parameter>\n</function>\n</tool_call>",
                                          forced(tool_call_opening(format)));
    ASSERT_EQ(any.tool_calls.size(), 1u) << tool_call_format_name(format);
    EXPECT_EQ(any.tool_calls[0].name, "f");
    EXPECT_EQ(any.tool_calls[0].arguments, "{\"n\":1}");
    EXPECT_EQ(any.content, "");
    const ParsedOutput named = parse_output(json ? "{\"n\": 1}}\n</tool_call>" : "<parameter=n>\n1\n</parameter>\n</function>\n</tool_call>",
                                            forced(tool_call_opening(format, "f")));
    EXPECT_EQ(named.tool_calls, any.tool_calls);
  }
}

TEST(ToolCallOpening, MalformedContinuationIsContentFromTheOpening) {
  const std::string opening = tool_call_opening(ToolCallFormat::json);
  const ParsedOutput out = parse_output("hello", forced(opening));
  EXPECT_FALSE(out.has_tool_calls());
  EXPECT_EQ(out.content, opening + "hello");
}

TEST(ToolCallOpening, StreamedEventsComeWithTheFirstFeed) {
  OutputParser parser(forced(tool_call_opening(ToolCallFormat::json, "f")));
  EXPECT_TRUE(parser.feed("{\"n\": 1}").empty());  // the call is still open
  std::vector<OutputEvent> events = parser.feed("}\n</tool_call>");
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].kind, OutputEventKind::tool_call_start);
  EXPECT_EQ(events[0].name, "f");
  EXPECT_EQ(events[1].text, "{\"n\":1}");
  EXPECT_TRUE(parser.finish().empty());
  EXPECT_TRUE(parser.has_tool_calls());
}

}  // namespace
}  // namespace imp::text
