// Splits streamed model output into reasoning (`<think>…</think>`) and content. First stage of OutputParser;
// the content it emits goes on to the tool-call parser.
//
// Semantics (close to vLLM's qwen3 reasoning parser for Qwen3/Qwen3.5):
// - A `<think>` at the very start of the output (after optional whitespace, which is dropped with it) opens
//   reasoning. A `<think>` anywhere else is ordinary text (vLLM would drop the text before it; we keep it).
// - starts_in_reasoning (the prompt ended with `<think>\n`, as Qwen3.5+/Flash-Next render it with thinking
//   on): the output begins inside reasoning. Everything up to `</think>` is reasoning; with no `</think>`
//   at all, all of it is reasoning (a truncated thought), as vLLM does with thinking enabled.
// - Without starts_in_reasoning and without a leading `<think>`, everything is content and `</think>` is
//   ordinary text (the prompt closed the thought, e.g. enable_thinking=false).
// - Whitespace right after `</think>` is dropped (the template renders `</think>\n\n`). Reasoning text is
//   kept verbatim, including its leading and trailing newlines.
// - `<tool_call>` followed by optional whitespace and `<function=` inside reasoning ends the reasoning
//   implicitly (Qwen3.5 sometimes calls a tool without closing its thought); the `<tool_call>` starts the
//   content. A JSON-style `<tool_call>{…}` inside reasoning stays reasoning text.
// - An unclosed `<think>` at the end: its text is reasoning. Nothing is ever dropped except the tags and the
//   whitespace named above.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "text/parser_common.h"

namespace imp::text {

struct ReasoningOptions {
  bool enabled = true;                   // false: every byte is content, tags included
  bool starts_in_reasoning = false;      // the generation prompt ends inside `<think>`
  bool tool_call_ends_reasoning = true;  // see above
};

// Whether a rendered generation prompt ends inside an open `<think>` (only whitespace after it): the value
// for starts_in_reasoning when generating from that prompt (imp chat, imp serve).
bool prompt_opens_reasoning(std::string_view rendered);

// What closes that open thought empty, to be appended to the prompt ("" when none is open): the result ends in
// `<think>\n\n</think>\n\n`, the empty thought the Qwen3/Qwen3.5/Flash-Next templates render with thinking
// off. Used before a forced tool-call opening (tool_call_opening.h), which must not land inside a thought.
std::string close_open_reasoning(std::string_view rendered);

class ReasoningParser {
 public:
  explicit ReasoningParser(const ReasoningOptions& options = {});

  // Appends the reasoning/content events that the text so far settles; holds back only a possible tag start
  // (and an incomplete UTF-8 character).
  void feed(std::string_view delta, std::vector<OutputEvent>& out);
  // Flushes everything held back. Later feeds are ignored.
  void finish(std::vector<OutputEvent>& out);

 private:
  enum class State { start, reasoning, after_end, content };

  void advance(std::vector<OutputEvent>& out, bool final);
  bool step_start(bool final);
  bool step_reasoning(std::vector<OutputEvent>& out, bool final);

  ReasoningOptions options_;
  State state_;
  std::string pending_;
  bool finished_ = false;
};

}  // namespace imp::text
