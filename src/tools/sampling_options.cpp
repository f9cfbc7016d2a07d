#include "tools/sampling_options.h"

#include <string>

namespace imp::tools {
namespace {

// A CLI11 check that a number lies in [lo, hi], with a message a person can act on.
CLI::Validator in_range(double lo, double hi, const char* hint) {
  return CLI::Validator(
      [lo, hi, hint](const std::string& text) -> std::string {
        try {
          const double value = std::stod(text);
          if (value >= lo && value <= hi) return {};
        } catch (const std::exception&) {
        }
        return std::string("must be ") + hint + ", got " + text;
      },
      hint);
}

}  // namespace

void add_sampling_options(CLI::App& cmd, runtime::SamplingOptions& sampling) {
  cmd.add_option("--temperature", sampling.temperature, "0 = greedy")->capture_default_str()->check(in_range(0, 1e6, ">= 0"));
  cmd.add_option("--top-k", sampling.top_k, "0 = off")->check(in_range(0, 1e12, ">= 0"));
  cmd.add_option("--top-p", sampling.top_p, "1 = off")->check(in_range(1e-9, 1.0, "in (0, 1]"));
  cmd.add_option("--min-p", sampling.min_p, "0 = off")->check(in_range(0, 1.0, "in [0, 1]"));
  cmd.add_option("--seed", sampling.seed, "Sampling seed");
}

}  // namespace imp::tools
