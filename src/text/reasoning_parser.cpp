#include "text/reasoning_parser.h"

#include <algorithm>

namespace imp::text {

using namespace parser_detail;  // tags and matching helpers

constexpr size_t npos = std::string_view::npos;

ReasoningParser::ReasoningParser(const ReasoningOptions& options)
    : options_(options), state_(options.enabled ? State::start : State::content) {}

bool prompt_opens_reasoning(std::string_view rendered) {
  const size_t open = rendered.rfind(parser_detail::kThinkOpen);
  return open != std::string_view::npos && rendered.find(parser_detail::kThinkClose, open) == std::string_view::npos &&
         rendered.find_first_not_of(" \n", open + parser_detail::kThinkOpen.size()) == std::string_view::npos;
}

std::string close_open_reasoning(std::string_view rendered) {
  if (!prompt_opens_reasoning(rendered)) return {};
  const std::string_view after = rendered.substr(rendered.rfind(kThinkOpen) + kThinkOpen.size());
  const std::string_view newlines = after == "\n" ? "\n" : after.empty() ? "\n\n" : "";
  return std::string(newlines).append(kThinkClose).append("\n\n");
}

void ReasoningParser::feed(std::string_view delta, std::vector<OutputEvent>& out) {
  if (finished_) return;
  pending_ += delta;
  advance(out, false);
}

void ReasoningParser::finish(std::vector<OutputEvent>& out) {
  if (finished_) return;
  advance(out, true);
  finished_ = true;
}

// Runs the state machine until it needs more text. `final`: no more text comes, so partial tags are text.
void ReasoningParser::advance(std::vector<OutputEvent>& out, bool final) {
  for (;;) {
    switch (state_) {
      case State::start:
        if (!step_start(final)) return;
        break;
      case State::reasoning:
        if (!step_reasoning(out, final)) return;
        break;
      case State::after_end:
        pending_.erase(0, skip_space(pending_, 0));
        if (pending_.empty()) return;
        state_ = State::content;
        break;
      case State::content: {
        const size_t emit = final ? pending_.size() : utf8_complete_end(pending_);
        append_text(out, OutputEventKind::content, std::string_view(pending_).substr(0, emit));
        pending_.erase(0, emit);
        return;
      }
    }
  }
}

// Decides whether the output opens with `<think>`; waits while it still could.
bool ReasoningParser::step_start(bool final) {
  const size_t at = skip_space(pending_, 0);
  const Match m = match_at(pending_, at, kThinkOpen);
  if (m == Match::partial && !final) return false;
  if (m == Match::full) {
    pending_.erase(0, at + kThinkOpen.size());
    state_ = State::reasoning;
  } else {
    state_ = options_.starts_in_reasoning ? State::reasoning : State::content;
  }
  return true;
}

bool ReasoningParser::step_reasoning(std::vector<OutputEvent>& out, bool final) {
  const std::string_view p = pending_;
  const size_t end = p.find(kThinkClose);
  size_t hold = final ? npos : partial_tag_start(p, kThinkClose);
  size_t call = npos;
  if (options_.tool_call_ends_reasoning) {
    for (size_t t = p.find(kToolCallOpen); t != npos && t < end; t = p.find(kToolCallOpen, t + 1)) {
      const Match m = match_open(p, skip_space(p, t + kToolCallOpen.size()), kFunctionOpen);
      if (m == Match::full) {
        call = t;
        break;
      }
      if (m == Match::partial && !final) {  // `<function=` may still follow
        hold = std::min(hold, t);
        break;
      }
    }
    if (!final) hold = std::min(hold, partial_tag_start(p, kToolCallOpen));
  }
  if (end != npos || call != npos) {
    const size_t at = std::min(end, call);
    append_text(out, OutputEventKind::reasoning, p.substr(0, at));
    if (at == end) {
      pending_.erase(0, at + kThinkClose.size());
      state_ = State::after_end;
    } else {
      pending_.erase(0, at);  // the `<tool_call>` belongs to the content
      state_ = State::content;
    }
    return true;
  }
  size_t emit = std::min(hold, p.size());
  if (!final) emit = utf8_complete_end(p.substr(0, emit));
  append_text(out, OutputEventKind::reasoning, p.substr(0, emit));
  pending_.erase(0, emit);
  return false;
}

}  // namespace imp::text
