#include "text/output_parser.h"

#include <utility>

namespace imp::text {

using parser_detail::append_text;

OutputParser::OutputParser(OutputParserOptions options)
    : parse_tool_calls_(options.parse_tool_calls),
      reasoning_(ReasoningOptions{.enabled = options.parse_reasoning,
                                  .starts_in_reasoning = options.starts_in_reasoning,
                                  .tool_call_ends_reasoning = options.parse_tool_calls}),
      tools_(std::move(options.tools), std::move(options.make_call_id)) {
  if (!options.prefix.empty()) prefix_events_ = feed(options.prefix);
}

// Reasoning passes through; content goes on to the tool-call stage. Order is kept: the reasoning stage never
// yields reasoning after content.
void OutputParser::route(std::vector<OutputEvent>& stage, std::vector<OutputEvent>& out) {
  for (OutputEvent& event : stage) {
    if (event.kind == OutputEventKind::content && parse_tool_calls_) {
      tools_.feed(event.text, out);
    } else {
      append_text(out, event.kind, event.text);
    }
  }
}

std::vector<OutputEvent> OutputParser::feed(std::string_view delta) {
  std::vector<OutputEvent> stage, out = std::exchange(prefix_events_, {});
  if (finished_) return out;
  reasoning_.feed(delta, stage);
  route(stage, out);
  return out;
}

std::vector<OutputEvent> OutputParser::finish() {
  std::vector<OutputEvent> stage, out = std::exchange(prefix_events_, {});
  if (finished_) return out;
  finished_ = true;
  reasoning_.finish(stage);
  route(stage, out);
  if (parse_tool_calls_) tools_.finish(out);
  return out;
}

void apply_event(ParsedOutput& result, const OutputEvent& event) {
  switch (event.kind) {
    case OutputEventKind::reasoning:
      result.reasoning += event.text;
      break;
    case OutputEventKind::content:
      result.content += event.text;
      break;
    case OutputEventKind::tool_call_start:
      result.tool_calls.push_back(ToolCall{event.id, event.name, {}});
      break;
    case OutputEventKind::tool_call_arguments:
      if (event.index >= 0 && static_cast<size_t>(event.index) < result.tool_calls.size()) {
        result.tool_calls[static_cast<size_t>(event.index)].arguments += event.text;
      }
      break;
  }
}

ParsedOutput collect_events(std::span<const OutputEvent> events) {
  ParsedOutput result;
  for (const OutputEvent& event : events) apply_event(result, event);
  return result;
}

ParsedOutput parse_output(std::string_view text, OutputParserOptions options) {
  OutputParser parser(std::move(options));
  std::vector<OutputEvent> events = parser.feed(text);
  std::vector<OutputEvent> rest = parser.finish();
  events.insert(events.end(), rest.begin(), rest.end());
  return collect_events(events);
}

}  // namespace imp::text
