// Reasoning split, the streaming contract (minimal hold-back, order, finish) and the invariant that no way of
// chunking an output changes what the parser reports.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <ostream>
#include <random>

#include "text/output_parser.h"

namespace imp::text {

void PrintTo(const ParsedOutput& out, std::ostream* os) {
  nlohmann::json calls = nlohmann::json::array();
  for (const ToolCall& call : out.tool_calls) calls.push_back({call.id, call.name, call.arguments});
  *os << nlohmann::json{{"reasoning", out.reasoning}, {"content", out.content}, {"tool_calls", calls}}.dump();
}

namespace {

OutputParserOptions thinking() {
  OutputParserOptions options;
  options.starts_in_reasoning = true;
  return options;
}

OutputParserOptions with_tools() {
  OutputParserOptions options = thinking();
  options.tools = ToolSchemas::from_openai_tools(nlohmann::json::parse(R"([{"type": "function", "function": {
      "name": "get_weather", "parameters": {"type": "object", "properties": {
      "city": {"type": "string"}, "days": {"type": "integer"}, "options": {"type": "object"}}}}}])"));
  return options;
}

std::vector<OutputEvent> stream_events(std::string_view text, const std::vector<size_t>& cuts,
                                 const OutputParserOptions& options) {
  OutputParser parser(options);
  std::vector<OutputEvent> events;
  size_t from = 0;
  for (size_t cut : cuts) {
    for (OutputEvent& e : parser.feed(text.substr(from, cut - from))) events.push_back(std::move(e));
    from = cut;
  }
  for (OutputEvent& e : parser.feed(text.substr(from))) events.push_back(std::move(e));
  for (OutputEvent& e : parser.finish()) events.push_back(std::move(e));
  return events;
}

bool valid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    const size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (len == 0 || i + len > s.size()) return false;
    for (size_t k = 1; k < len; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    }
    i += len;
  }
  return true;
}

// Every single split point, byte by byte, and random multi-splits give the one-shot result, and every event
// of the byte-by-byte stream is non-empty valid UTF-8.
void expect_chunking_invariant(std::string_view text, const OutputParserOptions& options) {
  SCOPED_TRACE(std::string(text));
  const ParsedOutput whole = parse_output(text, options);
  for (size_t cut = 0; cut <= text.size(); ++cut) {
    ASSERT_EQ(collect_events(stream_events(text, {cut}, options)), whole) << "split at byte " << cut;
  }
  std::vector<size_t> every_byte;
  for (size_t cut = 1; cut < text.size(); ++cut) every_byte.push_back(cut);
  const std::vector<OutputEvent> bytewise = stream_events(text, every_byte, options);
  ASSERT_EQ(collect_events(bytewise), whole) << "byte by byte";
  for (const OutputEvent& e : bytewise) {
    if (e.kind == OutputEventKind::reasoning || e.kind == OutputEventKind::content) {
      EXPECT_FALSE(e.text.empty());
      EXPECT_TRUE(valid_utf8(e.text)) << e.text;
    }
  }
  std::mt19937 rng(static_cast<unsigned>(text.size()));
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<size_t> cuts(std::uniform_int_distribution<size_t>(1, 12)(rng));
    for (size_t& cut : cuts) cut = std::uniform_int_distribution<size_t>(0, text.size())(rng);
    std::ranges::sort(cuts);
    ASSERT_EQ(collect_events(stream_events(text, cuts, options)), whole) << "trial " << trial;
  }
}

// Outputs covering every rule; each runs through the chunking invariant with several option sets.
const std::vector<std::string>& corpus() {
  static const std::vector<std::string> texts = {
      "Hello world",
      "The answer is 4.",
      "Let me think.\n</think>\n\nThe answer is 4.",
      "<think>\nhmm, ünïcödé 東京 🌍\n</think>\n\nHi 👋 there",
      "  \n<think>x</think>y",
      "still thinking ✓",
      "</think>\n\n  \n",
      "a</think>b",
      "Hi <think>x</think>",
      "<think",
      "<thinking>no</thinking>",
      "I should call it.\n<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
      "</function>\n</tool_call>",
      "Use <tool_call> tags.</think>ok",
      "json in thought <tool_call>\n{\"name\": \"x\"}\n</tool_call></think>\n\nreal",
      "Plan.\n</think>\n\nSure.\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n"
      "</tool_call>\n<tool_call>\n<function=get_weather>\n<parameter=city>\nZürich 東京\n</parameter>\n"
      "<parameter=days>\n3\n</parameter>\n<parameter=options>\n{\"unit\": \"C\"}\n</parameter>\n</function>\n"
      "</tool_call>\n",
      "x</think><tool_call>{\"name\": \"run\", \"arguments\": {\"code\": \"if (a) { s = \\\"</tool_call>\\\"; }\"}}"
      "</tool_call>between<tool_call>\n<function=run>\n<parameter=code>\nx = '</parameter>' + '</tool_call>'\n"
      "</parameter>\n</function>\n</tool_call> after",
      "done</think>\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": }}\n</tool_call>\ntext",
      "done</think>\n<tool_call>\n<function=f>\n<parameter=a>\n1\n</parameter>\n</tool_call>",
      "done</think>\n<tool_call>\n<function=f>\n<parameter=a>\n1\n</parameter>\n",
      "done</think>ends with <tool_",
      "done</think>ends with <tool_call>\n  ",
      "done</think><tool_call>{\"name\": \"a\"}</tool_call>\n\n<tool_",
      "done</think><tool_call>{\"name\": \"a\"}</tool_call>\n\n",
      "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"s\": \"raw\nnewline </tool_call>\"}}\n</tool_call>",
      "é<tool_call>{\"name\": \"é\", \"arguments\": {\"é\": \"ü\"}}</tool_call>é",
  };
  return texts;
}

TEST(OutputParser, ChunkingNeverChangesTheResult) {
  OutputParserOptions no_tools = thinking();
  no_tools.parse_tool_calls = false;
  OutputParserOptions raw;
  raw.parse_reasoning = false;
  const OutputParserOptions option_sets[] = {OutputParserOptions{}, thinking(), with_tools(), no_tools, raw};
  for (const std::string& text : corpus()) {
    for (const OutputParserOptions& options : option_sets) expect_chunking_invariant(text, options);
  }
}

// Random soups of tag pieces, JSON pieces, whitespace and multi-byte characters: chunking still changes
// nothing, and when no call parsed every byte of the output comes back as content.
TEST(OutputParser, RandomOutputsSurviveAnyChunking) {
  const std::vector<std::string> pieces = {
      "<think>", "</think>", "<tool_call>", "</tool_call>", "<function=f>", "<function=", "</function>",
      "<parameter=a>", "</parameter>", "{\"name\": \"f\", \"arguments\": {\"a\": \"", "\"}}", "\"", "\\", "{", "}",
      "\n", " ", "x", "é", "東", "🌍", "<", "</", "<tool_", "null", "1",
      "<tool_call>{\"name\": \"f\"}</tool_call>", "<tool_call>\n<function=g>\n</function>\n</tool_call>",
      "<tool_call><function=h><parameter=p>\n{\"k\": [1]}\n</parameter></function></tool_call>"};
  OutputParserOptions no_reasoning;
  no_reasoning.parse_reasoning = false;
  const OutputParserOptions option_sets[] = {OutputParserOptions{}, thinking(), no_reasoning};
  std::mt19937 rng(20260101);
  for (int sample = 0; sample < 150; ++sample) {
    std::string text;
    const size_t count = std::uniform_int_distribution<size_t>(0, 30)(rng);
    for (size_t i = 0; i < count; ++i) text += pieces[std::uniform_int_distribution<size_t>(0, pieces.size() - 1)(rng)];
    for (const OutputParserOptions& options : option_sets) {
      const ParsedOutput whole = parse_output(text, options);
      for (size_t cut = 0; cut <= text.size(); ++cut) {
        ASSERT_EQ(collect_events(stream_events(text, {cut}, options)), whole) << text << " split at " << cut;
      }
    }
    const ParsedOutput raw = parse_output(text, no_reasoning);
    if (!raw.has_tool_calls()) {
      EXPECT_EQ(raw.content, text);
    }
  }
}

TEST(OutputParser, ReasoningThenToolCallsTogether) {
  const ParsedOutput out = parse_output(corpus()[14], with_tools());
  EXPECT_EQ(out.reasoning, "Plan.\n");
  EXPECT_EQ(out.content, "Sure.\n\n");
  ASSERT_EQ(out.tool_calls.size(), 2u);
  EXPECT_EQ(out.tool_calls[0], (ToolCall{"call_0", "get_weather", R"({"city":"Paris"})"}));
  EXPECT_EQ(out.tool_calls[1],
            (ToolCall{"call_1", "get_weather",
                      "{\"city\":\"Zürich 東京\",\"days\":3,\"options\":{\"unit\":\"C\"}}"}));
}

TEST(OutputParser, EventsArriveInOutputOrder) {
  OutputParser parser(thinking());
  std::vector<OutputEvent> events = parser.feed(
      "r</think>\n\nA<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>B<tool_call><function=g>"
      "</function></tool_call>");
  for (OutputEvent& e : parser.finish()) events.push_back(std::move(e));
  using K = OutputEventKind;
  ASSERT_EQ(events.size(), 7u);
  const std::vector<K> kinds = {K::reasoning, K::content,          K::tool_call_start, K::tool_call_arguments,
                                K::content,   K::tool_call_start, K::tool_call_arguments};
  for (size_t i = 0; i < kinds.size(); ++i) EXPECT_EQ(events[i].kind, kinds[i]) << i;
  EXPECT_EQ(events[1].text, "A");
  EXPECT_EQ(events[2].index, 0);
  EXPECT_EQ(events[2].id, "call_0");
  EXPECT_EQ(events[2].name, "f");
  EXPECT_EQ(events[3].text, "{}");
  EXPECT_EQ(events[4].text, "B");
  EXPECT_EQ(events[5].index, 1);
  EXPECT_EQ(events[6].index, 1);
  EXPECT_EQ(events.back().kind, K::tool_call_arguments);
  EXPECT_TRUE(parser.has_tool_calls());
  EXPECT_EQ(parser.tool_call_count(), 2);
}

TEST(OutputParser, HoldsBackOnlyPossibleTagStarts) {
  OutputParser parser;
  auto text_of = [](const std::vector<OutputEvent>& events) {
    std::string s;
    for (const OutputEvent& e : events) s += e.text;
    return s;
  };
  EXPECT_EQ(text_of(parser.feed("Hello")), "Hello");
  EXPECT_EQ(text_of(parser.feed(" <tool")), " ");
  EXPECT_EQ(text_of(parser.feed("s>")), "<tools>");
  EXPECT_EQ(text_of(parser.feed(" caf\xC3")), " caf");  // half of an é
  EXPECT_EQ(text_of(parser.feed("\xA9 <")), "é ");
  EXPECT_EQ(text_of(parser.finish()), "<");
  EXPECT_TRUE(parser.feed("more").empty());
  EXPECT_TRUE(parser.finish().empty());
}

TEST(OutputParser, FinishFlushesPartialTagsAndUnclosedCalls) {
  EXPECT_EQ(parse_output("Hello <tool_").content, "Hello <tool_");
  EXPECT_EQ(parse_output("x <tool_call>\n<function=f>\n").content, "x <tool_call>\n<function=f>\n");
  EXPECT_EQ(parse_output("thought </thi", thinking()).reasoning, "thought </thi");
}

TEST(OutputParser, NoToolCallsMeansNoHint) {
  EXPECT_FALSE(parse_output("plain").has_tool_calls());
  EXPECT_FALSE(OutputParser().has_tool_calls());
}

TEST(ReasoningParser, PromptOpenedThinkingSplitsAtThinkEnd) {
  const ParsedOutput out = parse_output("Let me think.\n</think>\n\nThe answer is 4.", thinking());
  EXPECT_EQ(out.reasoning, "Let me think.\n");
  EXPECT_EQ(out.content, "The answer is 4.");
}

TEST(ReasoningParser, ExplicitThinkOpening) {
  const ParsedOutput out = parse_output("<think>\nhmm\n</think>\n\nHi");
  EXPECT_EQ(out.reasoning, "\nhmm\n");
  EXPECT_EQ(out.content, "Hi");
  EXPECT_EQ(parse_output("\n <think>x</think>y").reasoning, "x");
  // A model that repeats the prompt's `<think>` does not leak the tag into the reasoning.
  EXPECT_EQ(parse_output("<think>\nabc</think>def", thinking()), (ParsedOutput{"\nabc", "def", {}}));
}

TEST(ReasoningParser, NoTagsIsContentUnlessThePromptOpenedThinking) {
  EXPECT_EQ(parse_output("just text"), (ParsedOutput{"", "just text", {}}));
  EXPECT_EQ(parse_output("still thinking", thinking()), (ParsedOutput{"still thinking", "", {}}));
}

TEST(ReasoningParser, UnclosedThinkIsReasoning) {
  EXPECT_EQ(parse_output("<think>\nabc"), (ParsedOutput{"\nabc", "", {}}));
}

TEST(ReasoningParser, ThinkTagsOutsideReasoningPositionAreContent) {
  EXPECT_EQ(parse_output("a</think>b").content, "a</think>b");
  EXPECT_EQ(parse_output("Hi <think>x</think>").content, "Hi <think>x</think>");
  EXPECT_EQ(parse_output("<thinking>").content, "<thinking>");
  EXPECT_EQ(parse_output("x</think>y<think>z</think>", thinking()), (ParsedOutput{"x", "y<think>z</think>", {}}));
  OutputParserOptions off = thinking();
  off.parse_reasoning = false;
  EXPECT_EQ(parse_output("<think>x</think>y", off).content, "<think>x</think>y");
}

TEST(ReasoningParser, WhitespaceAfterThinkEndIsDropped) {
  EXPECT_EQ(parse_output("</think>\n\n \tHello\n\nWorld\n", thinking()),
            (ParsedOutput{"", "Hello\n\nWorld\n", {}}));
  EXPECT_EQ(parse_output("r</think>\n\n", thinking()), (ParsedOutput{"r", "", {}}));
}

TEST(ReasoningParser, XmlToolCallInsideReasoningEndsIt) {
  const ParsedOutput out = parse_output(corpus()[11], with_tools());
  EXPECT_EQ(out.reasoning, "I should call it.\n");
  EXPECT_EQ(out.content, "");
  ASSERT_EQ(out.tool_calls.size(), 1u);
  EXPECT_EQ(out.tool_calls[0].arguments, R"({"city":"Paris"})");
}

TEST(ReasoningParser, OtherToolCallMentionsStayReasoning) {
  EXPECT_EQ(parse_output("Use <tool_call> tags.</think>ok", thinking()),
            (ParsedOutput{"Use <tool_call> tags.", "ok", {}}));
  const ParsedOutput json_in_thought = parse_output(corpus()[13], thinking());
  EXPECT_EQ(json_in_thought.reasoning, "json in thought <tool_call>\n{\"name\": \"x\"}\n</tool_call>");
  EXPECT_EQ(json_in_thought.content, "real");
  EXPECT_FALSE(json_in_thought.has_tool_calls());
  EXPECT_EQ(parse_output("ends <tool_call>\n ", thinking()).reasoning, "ends <tool_call>\n ");
}

TEST(ReasoningParser, StageHoldsBackPartialThinkEnd) {
  ReasoningParser parser(
      ReasoningOptions{.enabled = true, .starts_in_reasoning = true, .tool_call_ends_reasoning = true});
  std::vector<OutputEvent> out;
  parser.feed("abc</th", out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0], (OutputEvent{OutputEventKind::reasoning, "abc", -1, "", ""}));
  parser.feed("ink>\n\n", out);
  EXPECT_EQ(out.size(), 1u);
  parser.feed("x", out);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[1].kind, OutputEventKind::content);
  EXPECT_EQ(out[1].text, "x");
}

TEST(ReasoningParser, StartWaitsOnlyForAPossibleThinkOpening) {
  ReasoningParser parser;
  std::vector<OutputEvent> out;
  parser.feed("\n<thi", out);
  EXPECT_TRUE(out.empty());
  parser.feed("s is", out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].text, "\n<this is");
}

}  // namespace
}  // namespace imp::text
