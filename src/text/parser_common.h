// What the output parsers emit, and the tag matching they share. The parsers see text as it streams in, so
// every match answers "full", "none" or "partial" (the text ends inside the tag and more may complete it).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace imp::text {

enum class OutputEventKind {
  reasoning,            // text: reasoning delta
  content,              // text: content delta
  tool_call_start,      // index, id, name
  tool_call_arguments,  // index, text: a piece of the arguments JSON string
};

struct OutputEvent {
  OutputEventKind kind = OutputEventKind::content;
  std::string text;
  int index = -1;  // tool call index, 0-based in order of appearance
  std::string id;
  std::string name;

  bool operator==(const OutputEvent&) const = default;
};

namespace parser_detail {

inline constexpr std::string_view kThinkOpen = "<think>";
inline constexpr std::string_view kThinkClose = "</think>";
inline constexpr std::string_view kToolCallOpen = "<tool_call>";
inline constexpr std::string_view kToolCallClose = "</tool_call>";
inline constexpr std::string_view kFunctionOpen = "<function";  // then optional spaces and '='
inline constexpr std::string_view kFunctionClose = "</function>";
inline constexpr std::string_view kParameterOpen = "<parameter";
inline constexpr std::string_view kParameterClose = "</parameter>";

// Appends a reasoning or content delta, merging it into the last event when that has the same kind.
void append_text(std::vector<OutputEvent>& events, OutputEventKind kind, std::string_view text);

enum class Match { none, partial, full };

inline bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }
size_t skip_space(std::string_view s, size_t pos);
std::string_view trim(std::string_view s);

// Does tag start at pos? partial: s ends first and what is there (maybe nothing) is a prefix of tag.
Match match_at(std::string_view s, size_t pos, std::string_view tag);
// Like match_at for `<function` / `<parameter`, which must be followed by '=' or a space, so that
// `<functions>` is not an opening tag.
Match match_open(std::string_view s, size_t pos, std::string_view tag);
// Start of the longest suffix of s that is a proper prefix of tag (text to hold back), or npos.
size_t partial_tag_start(std::string_view s, std::string_view tag);
// Length of s without a trailing incomplete UTF-8 sequence, so no event splits a character.
size_t utf8_complete_end(std::string_view s);

}  // namespace parser_detail
}  // namespace imp::text
