// Parses generated text into reasoning, content and OpenAI-style tool calls, incrementally (for SSE) or in
// one shot. Two stages: ReasoningParser (reasoning_parser.h: `<think>` rules) and, on the content it yields,
// ToolCallParser (tool_call_parser.h: formats, typing, malformed calls). Their headers hold the rules.
//
// Streaming contract:
// - feed() takes detokenizer deltas split anywhere (mid-tag, mid-character) and returns the events that the
//   text so far settles. Held back is only what could still be a tag start (`<too`, `</thi`), an open
//   `<tool_call>` (until its `</tool_call>`; in reasoning, until `<function=` confirms it), whitespace that may
//   separate two calls, leading whitespace before a possible `<think>`, and a trailing incomplete UTF-8
//   character (so every event is valid UTF-8 when the whole text is).
// - finish() flushes all of it: a partial tag or an unclosed call becomes plain text of the current kind.
// - Events come in output order; consecutive reasoning or content pieces within one call are merged.
// - Chunking never changes the result: collect_events over any split equals parse_output of the whole.
// - Errors in the model's output are never thrown: whatever does not parse is content, byte for byte.
// - OpenAI mapping: tool_call_start -> delta.tool_calls[{index, id, type "function", function {name}}];
//   tool_call_arguments -> delta.tool_calls[{index, function {arguments}}]; has_tool_calls() -> finish_reason
//   "tool_calls".
//
// One-shot: parse_output() = one feed + finish, collected. Its content is all content pieces concatenated,
// so text between calls is joined with the text around them (streaming shows where it stood).
#pragma once

#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "text/parser_common.h"
#include "text/reasoning_parser.h"
#include "text/tool_call_parser.h"

namespace imp::text {

struct OutputParserOptions {
  bool parse_reasoning = true;       // false: `<think>` tags are content
  bool starts_in_reasoning = false;  // the generation prompt ended with `<think>\n` (thinking on)
  bool parse_tool_calls = true;      // false: `<tool_call>` blocks are content (e.g. no tools, tool_choice none)
  ToolSchemas tools;                 // ToolSchemas::from_openai_tools(request["tools"]); types XML values
  std::function<std::string(int index)> make_call_id;  // empty: "call_<index>"
  // Text the output is known to begin with because the prompt ended with it (a forced tool-call opening,
  // tool_call_opening.h): parsed as the first text of the output, so the model's continuation completes it.
  // Its events (none for a call opening, which stays held until `</tool_call>`) come with the first feed/finish.
  std::string prefix;
};

struct ToolCall {
  std::string id;
  std::string name;
  std::string arguments;  // a compact JSON object, as OpenAI's function.arguments

  bool operator==(const ToolCall&) const = default;
};

struct ParsedOutput {
  std::string reasoning;
  std::string content;
  std::vector<ToolCall> tool_calls;  // in order; tool_calls[i] has index i

  // The finish_reason hint: the server reports "tool_calls" when this is true.
  bool has_tool_calls() const { return !tool_calls.empty(); }
  bool operator==(const ParsedOutput&) const = default;
};

class OutputParser {
 public:
  explicit OutputParser(OutputParserOptions options = {});

  std::vector<OutputEvent> feed(std::string_view delta);
  std::vector<OutputEvent> finish();  // later feed/finish calls return nothing

  bool has_tool_calls() const { return tools_.call_count() > 0; }
  int tool_call_count() const { return tools_.call_count(); }

 private:
  void route(std::vector<OutputEvent>& stage, std::vector<OutputEvent>& out);

  bool parse_tool_calls_;
  ReasoningParser reasoning_;
  ToolCallParser tools_;
  std::vector<OutputEvent> prefix_events_;  // what the prefix settled, not yet returned
  bool finished_ = false;
};

// Folds events into a result (what a non-streaming response shows).
void apply_event(ParsedOutput& result, const OutputEvent& event);
ParsedOutput collect_events(std::span<const OutputEvent> events);

ParsedOutput parse_output(std::string_view text, OutputParserOptions options = {});

}  // namespace imp::text
