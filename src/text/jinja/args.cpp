#include "text/jinja/args.h"

namespace imp::text::jinja {

std::vector<Value> bind_args(std::string_view function, const CallArgs& args, std::initializer_list<Param> params) {
  if (args.positional.size() > params.size()) {
    raise(ErrorKind::kType, "{}() takes at most {} argument(s) ({} given)", function, params.size(),
          args.positional.size());
  }
  std::vector<std::optional<Value>> bound(params.size());
  for (size_t i = 0; i < args.positional.size(); ++i) bound[i] = args.positional[i];
  for (const auto& [name, value] : args.keyword) {
    size_t index = 0;
    for (const Param& param : params) {
      if (param.name == name) break;
      ++index;
    }
    if (index == params.size()) raise(ErrorKind::kType, "{}() got an unexpected keyword argument '{}'", function, name);
    if (bound[index]) raise(ErrorKind::kType, "{}() got multiple values for argument '{}'", function, name);
    bound[index] = value;
  }
  std::vector<Value> out;
  out.reserve(params.size());
  size_t index = 0;
  for (const Param& param : params) {
    if (bound[index]) {
      out.push_back(std::move(*bound[index]));
    } else if (param.default_value) {
      out.push_back(*param.default_value);
    } else {
      raise(ErrorKind::kType, "{}() missing required argument '{}'", function, param.name);
    }
    ++index;
  }
  return out;
}

void expect_no_args(std::string_view function, const CallArgs& args) {
  if (!args.positional.empty() || !args.keyword.empty()) raise(ErrorKind::kType, "{}() takes no arguments", function);
}

}  // namespace imp::text::jinja
