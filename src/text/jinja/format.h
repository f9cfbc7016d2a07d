// Python's two string formatting mini-languages: printf-style `fmt % args` (also the |format filter)
// and str.format(). The common conversions are implemented; anything else raises kUnsupported.
#pragma once

#include <string>
#include <string_view>

#include "text/jinja/value.h"

namespace imp::text::jinja {

// `args` is a tuple (positional), a dict (%(name)s) or a single value.
std::string percent_format(std::string_view format, const Value& args);
std::string brace_format(std::string_view format, const CallArgs& args);

}  // namespace imp::text::jinja
