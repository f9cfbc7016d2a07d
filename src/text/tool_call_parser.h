// Finds tool calls in streamed content and turns them into OpenAI-style calls {id, name, arguments as a
// JSON string}. Second stage of OutputParser. Two body formats, detected per call:
//
//   Qwen3 (JSON):      <tool_call>\n{"name": "f", "arguments": {"a": 1}}\n</tool_call>
//   Qwen3.5+ (XML):    <tool_call>\n<function=f>\n<parameter=a>\n1\n</parameter>\n</function>\n</tool_call>
//
// JSON bodies: one object with a non-empty string "name" and "arguments" that is an object, a string holding
// a JSON object, null or absent ("{}"). Arguments are re-serialised compactly in their original key order.
//
// XML bodies: exactly one `<function=NAME>` holding zero or more `<parameter=NAME>VALUE</parameter>`, then
// `</function>`; only whitespace between the elements. Tolerated: any whitespace (or none) around tags and
// around '=' and the names (`<function = f >`). A parameter value ends at the first `</parameter>` that is
// followed (after whitespace) by `<parameter=`, `</function>` or the end of the call, so a value may contain
// `</parameter>`, `</function>` or `</tool_call>` as literal text. Values are typed by the tool's JSON schema
// (see convert_parameter_value). Arguments keep the parameters' order; a repeated name keeps the last value.
//
// Closing tag: a call ends at the first `</tool_call>` that is not inside a JSON string (JSON bodies; a raw
// newline also ends a string there, since valid JSON has none) or inside a parameter value (XML bodies).
// Anything malformed (bad JSON, no name, no `</function>`, garbage between elements, `<tool_call>` never
// closed) is returned as content byte for byte, tags included. Tool names are not checked against the tools.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "text/parser_common.h"

namespace imp::text {

// Parameter schemas by function name, from an OpenAI request's `tools` array.
class ToolSchemas {
 public:
  ToolSchemas() = default;
  // Accepts [{"type":"function","function":{"name","parameters"}}] and also bare {"name","parameters"} entries;
  // anything else in the array is skipped (never throws).
  static ToolSchemas from_openai_tools(const nlohmann::json& tools);

  // The JSON schema of one parameter, or nullptr when the function or the parameter is unknown.
  const nlohmann::json* parameter(std::string_view function, std::string_view name) const;
  bool empty() const { return properties_.empty(); }

 private:
  std::map<std::string, nlohmann::json, std::less<>> properties_;  // function -> parameters.properties
};

struct ParsedCall {
  std::string name;
  std::string arguments;  // compact JSON object
};

// Parses the text between `<tool_call>` and `</tool_call>`; nullopt when it is not a well-formed call.
std::optional<ParsedCall> parse_tool_call_body(std::string_view body, const ToolSchemas& schemas);

// Types one XML parameter value by its schema (nullptr: none):
// - "string": the raw text minus exactly one leading and one trailing '\n' (the template adds them);
// - "integer"/"number": a JSON number (an integral float becomes an integer for "integer");
// - "boolean": true/false, any case; "object"/"array": the parsed JSON of that kind;
// - "null" allowed (or any non-string type) and the text is null/None: null;
// - a union ("type": [...], anyOf, oneOf) takes null first, then string if allowed, then the other types;
// - no schema or no type: the text as JSON if it parses (after trimming), else as a string.
// A value that fits none of its types is kept as a string. Python reprs other than True/False/None (e.g.
// `{'a': 1}`) are not understood and stay strings.
nlohmann::ordered_json convert_parameter_value(std::string_view raw, const nlohmann::json* schema);

// Finds the `</tool_call>` that closes a call whose body arrives piece by piece (see the rules above).
class ToolCallEndScanner {
 public:
  // Offset of the closing tag in body, or npos while it has not arrived. body may only grow between calls.
  size_t scan(std::string_view body);

 private:
  enum class Format { unknown, json, xml, other };
  Format format_ = Format::unknown;
  size_t pos_ = 0;
  bool in_string_ = false;
  bool escaped_ = false;
  bool in_param_ = false;
};

// Streaming stage: content deltas in; content, tool_call_start and tool_call_arguments events out.
// A call's events are emitted once its `</tool_call>` arrived and it parsed: start (index, id, name), then the
// whole arguments string as one arguments delta. Content before, between and after calls is emitted in
// order as content; whitespace-only text after a call (before the next call or the end) is dropped, because
// the template separates calls by newlines. While a call is open its text is held back.
class ToolCallParser {
 public:
  // make_id(index) names call `index` (0-based); empty: "call_<index>".
  explicit ToolCallParser(ToolSchemas schemas = {}, std::function<std::string(int)> make_id = {});

  void feed(std::string_view content, std::vector<OutputEvent>& out);
  void finish(std::vector<OutputEvent>& out);  // later feeds are ignored
  int call_count() const { return calls_; }

 private:
  enum class State { content, body, after_call };

  void advance(std::vector<OutputEvent>& out, bool final);
  bool step_body(std::vector<OutputEvent>& out, bool final);
  bool step_after_call(bool final);

  ToolSchemas schemas_;
  std::function<std::string(int)> make_id_;
  State state_ = State::content;
  std::string pending_;
  ToolCallEndScanner scanner_;
  int calls_ = 0;
  bool finished_ = false;
};

}  // namespace imp::text
