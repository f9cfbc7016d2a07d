// A bounded queue in front of an Engine, driven by one worker thread (the Engine is not thread-safe).
//
// - submit() never blocks: it queues the generation or refuses it at once (draining, or max_queue
//   generations already wait beyond the free running slots).
// - The worker admits queued generations FIFO while fewer than max_running run and their reservation
//   (prompt + max_tokens tokens of KV) fits the KV budget; a generation still queued at its deadline is
//   refused (the server answers 503).
// - Each step puts every running sequence into one Engine::forward batch: prefill chunks for the new ones,
//   one decode token for the others. Each generation samples with its own Sampler, so batching never
//   changes its tokens. Steps that yield a token ask the engine for it (Engine::forward_sampled, on the
//   device for GPU backends) with the Sampler's next draw, unless the generation needs the logits row on the
//   host (penalties, logprobs, forced tokens): the same tokens either way.
// - A generation ends at a stop token, at max_tokens, at its deadline, when its consumer cancels it (client
//   gone), or when the engine fails; its sequence is released at once.
// - drain() refuses new work and returns once everything queued or running has ended.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "runtime/engine.h"
#include "runtime/sampler.h"

namespace imp::runtime {

using Clock = std::chrono::steady_clock;

struct GenerationRequest {
  std::vector<int32_t> prompt;
  int64_t max_tokens = 16;
  SamplingOptions sampling;
  std::vector<int32_t> stop_tokens;
  int top_logprobs = -1;  // -1: no log-probabilities; 0..20: the chosen token's and this many alternatives
  // Test-only: emit these tokens instead of sampling (they still run through the engine), then a stop.
  std::optional<std::vector<int32_t>> forced_tokens;
  Clock::time_point deadline = Clock::time_point::max();
};

struct GeneratedToken {
  int32_t token = 0;
  bool is_stop = false;  // a stop token: counted as generated, never shown
  std::optional<TokenLogprobs> logprobs;
};

enum class JobState { queued, running, finished, refused };
enum class FinishReason { none, stop, length, deadline, cancelled, error };
const char* finish_reason_name(FinishReason reason);

// What the consumer sees at one poll: the tokens since the previous poll and where the job stands.
struct JobUpdate {
  std::vector<GeneratedToken> tokens;
  JobState state = JobState::queued;
  FinishReason reason = FinishReason::none;
  std::string error;  // engine failure (reason error) or why it was refused
};

// One generation, shared by the worker (producer) and the request's thread (consumer).
class Job {
 public:
  explicit Job(GenerationRequest request) : request_(std::move(request)) {}

  // Waits up to `timeout` for news (a token, a state change) and takes it.
  JobUpdate poll(std::chrono::milliseconds timeout);
  // The consumer is gone or has what it needs (a stop string): the worker ends the generation.
  void cancel();
  const GenerationRequest& request() const { return request_; }

 private:
  friend class Scheduler;
  void push(GeneratedToken token);
  void set_state(JobState state, FinishReason reason = FinishReason::none, std::string error = {});
  bool cancelled() const;

  GenerationRequest request_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<GeneratedToken> pending_;
  JobState state_ = JobState::queued;
  FinishReason reason_ = FinishReason::none;
  std::string error_;
  bool cancelled_ = false;
};

struct SchedulerOptions {
  size_t max_queue = 64;      // generations waiting; one more is refused at once
  size_t max_running = 4;     // generations in the forward batch
  int64_t kv_budget_tokens = 0;  // reserved prompt + max_tokens over running generations; 0: unlimited
  int64_t prefill_chunk = 256;   // prompt tokens per step, so long prompts do not stall others' decoding
};

struct SchedulerStats {
  size_t queued = 0;
  size_t running = 0;
  int64_t kv_reserved_tokens = 0;
  int64_t kv_budget_tokens = 0;
  uint64_t forward_batches = 0;
  uint64_t batched_sequences = 0;  // summed over batches: the mean batch size is this / forward_batches
};

class Scheduler {
 public:
  Scheduler(Engine& engine, SchedulerOptions options);
  ~Scheduler();  // drains, then stops the worker
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  enum class Refusal { none, queue_full, draining, too_large };
  // The job, queued; or nullptr and why not.
  std::shared_ptr<Job> submit(GenerationRequest request, Refusal* refusal);
  // Refuses new work; blocks until every queued and running generation has ended.
  void drain();
  SchedulerStats stats() const;

 private:
  struct Running {
    std::shared_ptr<Job> job;
    SequenceId sequence = 0;
    Sampler sampler;
    size_t prefilled = 0;  // prompt tokens the engine has seen
    std::vector<int32_t> generated;
    int64_t reserved = 0;
  };

  void work();
  size_t free_running_slots() const;
  void admit(Clock::time_point now);
  bool step();  // one forward batch; false when nothing runs
  void finish(Running& run, FinishReason reason, std::string error = {});
  int64_t reservation(const GenerationRequest& request) const;

  Engine& engine_;
  SchedulerOptions options_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable idle_;
  std::deque<std::shared_ptr<Job>> queue_;
  std::vector<Running> running_;  // worker thread only, but its size and reservation are read under mutex_
  int64_t kv_reserved_ = 0;
  bool draining_ = false;
  bool stopping_ = false;
  uint64_t forward_batches_ = 0;
  uint64_t batched_sequences_ = 0;
  std::thread worker_;
};

}  // namespace imp::runtime
