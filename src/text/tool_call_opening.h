// The text that opens a tool call in a model's own format, for tool_choice "required" or a named function
// without grammar-constrained decoding: the server ends the prompt with it, so the model's turn is a call
// from its first generated token, and the output parser is given it as the start of the output
// (OutputParserOptions::prefix). Formats as in tool_call_parser.h:
//
//   json (Qwen3):              <tool_call>\n{"name": "          named f: <tool_call>\n{"name": "f", "arguments": 
//   xml (Qwen3.5/Flash-Next):  <tool_call>\n<function=          named f: <tool_call>\n<function=f>\n
//
// exactly as the templates render an assistant's past calls, so a forced turn reads like a trained one.
#pragma once

#include <string>
#include <string_view>

namespace imp::text {

enum class ToolCallFormat { unknown, json, xml };

// The format a chat template renders calls in: xml when it writes `<function=`, json when it writes
// `<tool_call>` without it, unknown otherwise (no call format the parser reads).
ToolCallFormat detect_tool_call_format(std::string_view template_source);
const char* tool_call_format_name(ToolCallFormat format);

// The opening of a call to `function` (empty: any function, the model picks the name). unknown: "".
// A JSON name is JSON-escaped; an XML name is written as it is (as the template does).
std::string tool_call_opening(ToolCallFormat format, std::string_view function = {});

}  // namespace imp::text
