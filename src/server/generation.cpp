#include "server/generation.h"

namespace imp::server {

using runtime::Clock;
using runtime::JobState;

GenerationRun::GenerationRun(const text::Tokenizer& tokenizer, std::shared_ptr<runtime::Job> job,
                             text::OutputParserOptions parser, std::vector<std::string> stop, Metrics& metrics,
                             Clock::time_point arrival)
    : job_(std::move(job)), detokenizer_(tokenizer), stops_(std::move(stop)), parser_(std::move(parser)),
      metrics_(metrics), arrival_(arrival) {
  outcome_.prompt_tokens = static_cast<int64_t>(job_->request().prompt.size());
}

GenerationRun::~GenerationRun() { job_->cancel(); }

runtime::JobUpdate GenerationRun::wait_started() {
  while (true) {
    runtime::JobUpdate update = job_->poll(std::chrono::milliseconds(100));
    for (auto& token : update.tokens) first_.tokens.push_back(std::move(token));
    first_.state = update.state;
    first_.reason = update.reason;
    first_.error = update.error;
    if (!first_.tokens.empty() || update.state == JobState::finished || update.state == JobState::refused) return first_;
  }
}

void GenerationRun::consume(std::vector<runtime::GeneratedToken>& tokens, Piece& piece) {
  for (runtime::GeneratedToken& token : tokens) {
    if (stops_.matched()) break;  // tokens after a stop string are not part of the answer
    const Clock::time_point now = Clock::now();
    if (outcome_.completion_tokens == 0) {
      outcome_.ttft_s = std::chrono::duration<double>(now - arrival_).count();
      metrics_.time_to_first_token(outcome_.ttft_s);
    } else {
      metrics_.inter_token_latency(std::chrono::duration<double>(now - last_token_).count());
    }
    last_token_ = now;
    ++outcome_.completion_tokens;
    if (token.is_stop) continue;
    std::string text = stops_.feed(detokenizer_.push(token.token));
    if (stops_.matched()) {
      job_->cancel();
      text += stops_.finish();
    }
    for (text::OutputEvent& event : parser_.feed(text)) piece.events.push_back(std::move(event));
    piece.tokens.push_back(std::move(token));
  }
}

bool GenerationRun::run(const std::function<bool(const Piece&)>& emit, const std::function<bool()>& heartbeat,
                        std::chrono::milliseconds idle) {
  runtime::JobUpdate update = std::move(first_);
  auto quiet_since = Clock::now();
  while (true) {
    Piece piece;
    consume(update.tokens, piece);
    const bool ended = stops_.matched() || update.state == JobState::finished || update.state == JobState::refused;
    if (ended) {
      std::string tail = stops_.matched() ? std::string() : stops_.feed(detokenizer_.finish());
      tail += stops_.finish();
      for (text::OutputEvent& event : parser_.feed(tail)) piece.events.push_back(std::move(event));
      for (text::OutputEvent& event : parser_.finish()) piece.events.push_back(std::move(event));
    }
    if (!piece.events.empty() || !piece.tokens.empty()) {
      if (!emit(piece)) {
        job_->cancel();
        outcome_.cancelled = true;
        return false;
      }
      quiet_since = Clock::now();
    } else if (Clock::now() - quiet_since >= idle) {
      if (!heartbeat()) {
        job_->cancel();
        outcome_.cancelled = true;
        return false;
      }
      quiet_since = Clock::now();
    }
    if (ended) {
      if (stops_.matched() || update.reason == runtime::FinishReason::stop) {
        outcome_.finish_reason = parser_.has_tool_calls() ? "tool_calls" : "stop";
      } else if (update.reason == runtime::FinishReason::length || update.reason == runtime::FinishReason::deadline) {
        outcome_.finish_reason = "length";
      } else if (update.reason == runtime::FinishReason::error) {
        outcome_.error = update.error.empty() ? "the engine failed" : update.error;
      } else {
        outcome_.error = update.error.empty() ? "the generation was cancelled" : update.error;
      }
      return true;
    }
    update = job_->poll(idle);
  }
}

}  // namespace imp::server
