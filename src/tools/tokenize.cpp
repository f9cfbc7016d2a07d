// imp tokenize: text on stdin to token ids (or, with --decode, ids on stdin to text), with the
// tokenizer.json of a model folder; no weights needed. stdin is taken verbatim, so a trailing newline
// (as `echo` adds) is encoded too; use printf or echo -n to leave it out.
#include <cstdio>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "text/tokenizer.h"
#include "tools/commands.h"
#include "tools/token_list.h"

namespace imp::tools {
namespace {

struct TokenizeOptions {
  std::string model;
  bool json = false;
  bool decode = false;
  bool skip_special = false;
};

std::string read_stdin() {
  std::ios::sync_with_stdio(false);
  std::cin >> std::noskipws;
  return std::string(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
}

// Ids as {"ids": [...]}, a JSON array, or integers separated by spaces, commas or newlines.
std::vector<int32_t> parse_ids(const std::string& input) {
  const size_t first = input.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && (input[first] == '{' || input[first] == '[')) {
    try {
      nlohmann::json j = nlohmann::json::parse(input);
      if (j.is_object()) j = j.at("ids");
      return j.get<std::vector<int32_t>>();
    } catch (const nlohmann::json::exception& e) {
      fail("--decode: stdin is not {{\"ids\": [...]}} or a JSON array of ids ({})", e.what());
    }
  }
  return parse_token_ids(input, "--decode");
}

int run_tokenize(const TokenizeOptions& options) {
  const text::Tokenizer tokenizer = text::Tokenizer::load(options.model);
  const std::string input = read_stdin();
  if (options.decode) {
    const std::string text = tokenizer.decode(parse_ids(input), options.skip_special);
    if (options.json) {
      fmt::print("{}\n", nlohmann::json({{"text", text}}).dump());
    } else {
      std::fwrite(text.data(), 1, text.size(), stdout);
    }
    return 0;
  }
  const std::vector<int32_t> ids = tokenizer.encode(input);
  if (options.json) {
    fmt::print("{}\n", nlohmann::json({{"ids", ids}}).dump());
  } else {
    fmt::print("{}\n", fmt::join(ids, " "));
  }
  return 0;
}

void add_tokenize(CLI::App& app, std::function<int()>& run) {
  auto options = std::make_shared<TokenizeOptions>();
  CLI::App* cmd = app.add_subcommand("tokenize", "Encode stdin to token ids (or decode ids with --decode)");
  cmd->add_option("--model", options->model, "Model folder with tokenizer.json, or the tokenizer.json file")->required();
  cmd->add_flag("--json", options->json, "Print one JSON line: {\"ids\":[...]} (or {\"text\":...} with --decode)");
  cmd->add_flag("--decode", options->decode, "Read token ids from stdin and print the text");
  cmd->add_flag("--skip-special", options->skip_special, "With --decode: leave special tokens out");
  cmd->callback([&run, options] { run = [options] { return run_tokenize(*options); }; });
}

const Registration kRegistration(add_tokenize);

}  // namespace
}  // namespace imp::tools
