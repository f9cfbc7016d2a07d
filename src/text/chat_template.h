// A model's chat template, rendered exactly as Hugging Face's tokenizer.apply_chat_template(...,
// tokenize=False) does (transformers 5.x with jinja2 3.1): same template file precedence, same
// special-token variables, same message clean-up (null keys dropped, reasoning fields aliased), and the
// jinja2 sandbox semantics of src/text/jinja.
//
// Errors: bad input (not a list of message objects, conflicting kwargs) throws imp::Error; the
// template's own raise_exception throws jinja::TemplateError with kind() == kRaised (a request the
// template refuses: map it to HTTP 400); other template failures are TemplateError too.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "text/jinja/template.h"

namespace imp::text {

class ChatTemplate {
 public:
  // Reads a Hugging Face model folder. The template comes from chat_template.jinja (plus
  // additional_chat_templates/*.jinja) when present, which wins over tokenizer_config.json's
  // "chat_template" (a string, or a list of {name, template}); special tokens come from
  // tokenizer_config.json (strings or {"content": ...} objects). Nothing else is needed.
  static ChatTemplate load(const std::filesystem::path& model_dir);

  // A template given as text; special_tokens become template variables (bos_token, eos_token, ...).
  static ChatTemplate from_source(std::string_view source,
                                  std::vector<std::pair<std::string, std::string>> special_tokens = {},
                                  std::string name = "chat template");

  // messages: a non-empty array of message objects. tools: an array of tool schemas, or null.
  // extra_kwargs: an object of further template variables (enable_thinking, reasoning_effort, ...)
  // or null; it overrides special tokens, as in HF. Use ordered_json so that key order (which tojson
  // shows) is the request's, as in Python.
  std::string render(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools = nullptr,
                     bool add_generation_prompt = false, const nlohmann::ordered_json& extra_kwargs = nullptr) const;

  // The special tokens the template sees, in HF's order (bos, eos, unk, sep, pad, cls, mask, others).
  const std::vector<std::pair<std::string, std::string>>& special_tokens() const { return special_tokens_; }
  std::optional<std::string> special_token(std::string_view name) const;
  // The source of the template used without tools (the "default" one).
  const std::string& source() const { return default_source_; }
  // The source used when tools are given (a "tool_use" template when there is one, else the default).
  const std::string& tool_source() const { return pick(true).source; }

 private:
  struct Named {
    std::string name;
    std::string source;
    jinja::Template parsed;
  };

  const Named& pick(bool has_tools) const;

  std::vector<Named> templates_;  // one unnamed ("default"), or several named ones
  std::string default_source_;
  std::vector<std::pair<std::string, std::string>> special_tokens_;
};

}  // namespace imp::text
