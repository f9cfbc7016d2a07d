// The consumer side of one generation: polls its scheduler Job, turns tokens into text (detokenizer, stop
// strings, output parser) and hands each settled piece to the response writer. Runs on the request's thread.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/scheduler.h"
#include "server/metrics.h"
#include "server/stop_strings.h"
#include "text/output_parser.h"
#include "text/tokenizer.h"

namespace imp::server {

// What one poll settled: parser events, and the tokens consumed for them (with log-probabilities when
// asked; stop tokens excluded).
struct Piece {
  std::vector<text::OutputEvent> events;
  std::vector<runtime::GeneratedToken> tokens;
};

struct Outcome {
  std::string finish_reason;  // "stop", "length" or "tool_calls"; empty when it failed or was cancelled
  std::string error;          // engine failure
  bool cancelled = false;     // the client went away
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  double ttft_s = -1.0;       // -1: no token
};

class GenerationRun {
 public:
  GenerationRun(const text::Tokenizer& tokenizer, std::shared_ptr<runtime::Job> job, text::OutputParserOptions parser,
                std::vector<std::string> stop, Metrics& metrics, runtime::Clock::time_point arrival);
  ~GenerationRun();  // cancels the job if it is still going (the request ended early)

  // Blocks until the job has started producing or has ended; its state then (refused: still queued at the
  // deadline; finished with an error: the engine failed before the first token).
  runtime::JobUpdate wait_started();

  // Runs to the end. emit gets each piece; heartbeat is called after `idle` without news. Either returning
  // false means the client is gone: the job is cancelled and run returns false.
  bool run(const std::function<bool(const Piece&)>& emit, const std::function<bool()>& heartbeat,
           std::chrono::milliseconds idle);

  const Outcome& outcome() const { return outcome_; }
  bool has_tool_calls() const { return parser_.has_tool_calls(); }

 private:
  void consume(std::vector<runtime::GeneratedToken>& tokens, Piece& piece);

  std::shared_ptr<runtime::Job> job_;
  text::IncrementalDetokenizer detokenizer_;
  StopStringMatcher stops_;
  text::OutputParser parser_;
  Metrics& metrics_;
  runtime::Clock::time_point arrival_;
  runtime::Clock::time_point last_token_;
  runtime::JobUpdate first_;  // what wait_started saw, consumed first by run
  Outcome outcome_;
};

}  // namespace imp::server
