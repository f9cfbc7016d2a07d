#include "text/tool_call_opening.h"

#include <nlohmann/json.hpp>

#include "text/parser_common.h"

namespace imp::text {

using parser_detail::kToolCallOpen;

ToolCallFormat detect_tool_call_format(std::string_view template_source) {
  if (template_source.find("<function=") != std::string_view::npos) return ToolCallFormat::xml;
  if (template_source.find(kToolCallOpen) != std::string_view::npos) return ToolCallFormat::json;
  return ToolCallFormat::unknown;
}

const char* tool_call_format_name(ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::json: return "json";
    case ToolCallFormat::xml: return "xml";
    case ToolCallFormat::unknown: break;
  }
  return "unknown";
}

std::string tool_call_opening(ToolCallFormat format, std::string_view function) {
  std::string out;
  switch (format) {
    case ToolCallFormat::unknown:
      return out;
    case ToolCallFormat::json:
      out.append(kToolCallOpen).append("\n{\"name\": \"");
      if (!function.empty()) {
        const std::string quoted = nlohmann::json(std::string(function)).dump();  // "..." with escapes
        out.append(quoted, 1, quoted.size() - 2).append("\", \"arguments\": ");
      }
      return out;
    case ToolCallFormat::xml:
      out.append(kToolCallOpen).append("\n<function=");
      if (!function.empty()) out.append(function).append(">\n");
      return out;
  }
  return out;
}

}  // namespace imp::text
