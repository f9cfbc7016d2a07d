#include "runtime/scheduler.h"

#include <malloc.h>

#include <algorithm>
#include <exception>
#include <utility>

#include "core/log.h"

namespace imp::runtime {

const char* finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::none: return "none";
    case FinishReason::stop: return "stop";
    case FinishReason::length: return "length";
    case FinishReason::deadline: return "deadline";
    case FinishReason::cancelled: return "cancelled";
    case FinishReason::error: return "error";
  }
  return "none";
}

JobUpdate Job::poll(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  changed_.wait_for(lock, timeout, [&] {
    return !pending_.empty() || state_ == JobState::finished || state_ == JobState::refused;
  });
  JobUpdate update;
  update.tokens.swap(pending_);
  update.state = state_;
  update.reason = reason_;
  update.error = error_;
  return update;
}

void Job::cancel() {
  std::lock_guard lock(mutex_);
  cancelled_ = true;
}

bool Job::cancelled() const {
  std::lock_guard lock(mutex_);
  return cancelled_;
}

void Job::push(GeneratedToken token) {
  {
    std::lock_guard lock(mutex_);
    pending_.push_back(std::move(token));
  }
  changed_.notify_all();
}

void Job::set_state(JobState state, FinishReason reason, std::string error) {
  {
    std::lock_guard lock(mutex_);
    state_ = state;
    reason_ = reason;
    error_ = std::move(error);
  }
  changed_.notify_all();
}

Scheduler::Scheduler(Engine& engine, SchedulerOptions options) : engine_(engine), options_(options) {
  options_.max_running = std::max<size_t>(options_.max_running, 1);
  options_.prefill_chunk = std::max<int64_t>(options_.prefill_chunk, 1);
  worker_ = std::thread([this] { work(); });
}

Scheduler::~Scheduler() {
  drain();
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  worker_.join();
}

int64_t Scheduler::reservation(const GenerationRequest& request) const {
  return static_cast<int64_t>(request.prompt.size()) + request.max_tokens;
}

std::shared_ptr<Job> Scheduler::submit(GenerationRequest request, Refusal* refusal) {
  *refusal = Refusal::none;
  if (options_.kv_budget_tokens > 0 && reservation(request) > options_.kv_budget_tokens) {
    *refusal = Refusal::too_large;
    return nullptr;
  }
  auto job = std::make_shared<Job>(std::move(request));
  {
    std::lock_guard lock(mutex_);
    if (draining_) *refusal = Refusal::draining;
    // A generation that a free running slot will take counts against no queue: without this, a request
    // arriving before the worker admitted the one just ahead of it was refused with a slot idle.
    else if (queue_.size() >= options_.max_queue + free_running_slots()) *refusal = Refusal::queue_full;
    else queue_.push_back(job);
  }
  if (*refusal != Refusal::none) return nullptr;
  wake_.notify_all();
  return job;
}

void Scheduler::drain() {
  std::unique_lock lock(mutex_);
  draining_ = true;
  idle_.wait(lock, [&] { return queue_.empty() && running_.empty(); });
}

// Called with mutex_ held (the worker changes running_'s size only under it).
size_t Scheduler::free_running_slots() const {
  return running_.size() < options_.max_running ? options_.max_running - running_.size() : 0;
}

SchedulerStats Scheduler::stats() const {
  std::lock_guard lock(mutex_);
  return {.queued = queue_.size(),
          .running = running_.size(),
          .kv_reserved_tokens = kv_reserved_,
          .kv_budget_tokens = options_.kv_budget_tokens,
          .forward_batches = forward_batches_,
          .batched_sequences = batched_sequences_};
}

// Called with mutex_ held. Ends queued jobs that were cancelled or outlived their deadline, then moves
// jobs from the head of the queue into the batch while there is room.
void Scheduler::admit(Clock::time_point now) {
  std::erase_if(queue_, [&](const std::shared_ptr<Job>& job) {
    if (job->cancelled()) {
      job->set_state(JobState::finished, FinishReason::cancelled);
      return true;
    }
    if (now >= job->request().deadline) {
      job->set_state(JobState::refused, FinishReason::deadline, "the request waited in the queue past its deadline");
      return true;
    }
    return false;
  });
  while (!queue_.empty() && running_.size() < options_.max_running) {
    const int64_t need = reservation(queue_.front()->request());
    if (options_.kv_budget_tokens > 0 && kv_reserved_ + need > options_.kv_budget_tokens) break;
    std::shared_ptr<Job> job = std::move(queue_.front());
    queue_.pop_front();
    Running run{.job = job, .sequence = 0, .sampler = Sampler(job->request().sampling), .generated = {}, .reserved = need};
    try {
      run.sequence = engine_.new_sequence();
    } catch (const std::exception& error) {
      job->set_state(JobState::finished, FinishReason::error, error.what());
      continue;
    }
    kv_reserved_ += need;
    job->set_state(JobState::running);
    running_.push_back(std::move(run));
  }
}

void Scheduler::finish(Running& run, FinishReason reason, std::string error) {
  engine_.release(run.sequence);
  run.job->set_state(JobState::finished, reason, std::move(error));
  run.job.reset();  // marks it done; step() removes it
}

bool Scheduler::step() {
  const Clock::time_point now = Clock::now();
  std::vector<ForwardRequest> batch;
  std::vector<size_t> members;  // index into running_ of each batch entry
  for (size_t i = 0; i < running_.size(); ++i) {
    Running& run = running_[i];
    const GenerationRequest& request = run.job->request();
    if (run.job->cancelled()) {
      finish(run, FinishReason::cancelled);
      continue;
    }
    if (now >= request.deadline) {
      finish(run, FinishReason::deadline);
      continue;
    }
    std::span<const int32_t> tokens;
    if (run.prefilled < request.prompt.size()) {
      const size_t chunk = std::min(static_cast<size_t>(options_.prefill_chunk), request.prompt.size() - run.prefilled);
      tokens = std::span(request.prompt).subspan(run.prefilled, chunk);
    } else {
      tokens = std::span(run.generated).last(1);
    }
    ForwardRequest forward{.sequence = run.sequence, .tokens = tokens, .all_logits = false};
    // A step that yields a token, for a request that needs no logits row on the host (no penalties, no
    // logprobs, not forced): the engine chooses the token (on the device for GPU backends) with the draw
    // the host Sampler would have used, so the tokens are the same either way.
    const bool yields_token = run.prefilled + tokens.size() >= request.prompt.size();
    if (yields_token && !request.forced_tokens && request.top_logprobs < 0 && !run.sampler.has_penalties()) {
      forward.sampling = TokenSampling{.options = request.sampling, .draw = run.sampler.take_draw()};
    }
    batch.push_back(forward);
    members.push_back(i);
  }

  std::vector<ForwardResult> results;
  if (!batch.empty()) {
    try {
      results = engine_.forward_sampled(batch);
    } catch (const std::exception& error) {
      log::warn("engine forward failed for a batch of {}: {}", batch.size(), error.what());
      for (size_t i : members) finish(running_[i], FinishReason::error, error.what());
      members.clear();
    }
  }

  for (size_t b = 0; b < members.size(); ++b) {
    Running& run = running_[members[b]];
    const GenerationRequest& request = run.job->request();
    if (run.prefilled < request.prompt.size()) {
      run.prefilled += batch[b].tokens.size();
      if (run.prefilled < request.prompt.size()) continue;  // more prompt to go before the first token
    }
    const size_t vocab = static_cast<size_t>(engine_.config().vocab_size);
    const std::vector<float>& logits = results[b].logits;
    const std::span<const float> row =
        batch[b].sampling ? std::span<const float>() : std::span<const float>(logits.data() + logits.size() - vocab, vocab);
    int32_t token;
    if (batch[b].sampling) {
      token = results[b].token;
    } else if (request.forced_tokens) {
      if (run.generated.size() >= request.forced_tokens->size()) {
        finish(run, FinishReason::stop);
        continue;
      }
      token = (*request.forced_tokens)[run.generated.size()];
    } else {
      token = run.sampler.sample(row, run.generated);
    }
    GeneratedToken out{.token = token, .is_stop = false, .logprobs = std::nullopt};
    out.is_stop = std::find(request.stop_tokens.begin(), request.stop_tokens.end(), token) != request.stop_tokens.end();
    if (request.top_logprobs >= 0) out.logprobs = token_logprobs(row, token, request.top_logprobs);
    run.generated.push_back(token);
    const bool is_stop = out.is_stop;
    run.job->push(std::move(out));
    if (is_stop) {
      finish(run, FinishReason::stop);
    } else if (static_cast<int64_t>(run.generated.size()) >= request.max_tokens) {
      finish(run, FinishReason::length);
    }
  }

  std::lock_guard lock(mutex_);
  if (!batch.empty()) {
    ++forward_batches_;
    batched_sequences_ += batch.size();
  }
  for (const Running& run : running_) {
    if (!run.job) kv_reserved_ -= run.reserved;
  }
  std::erase_if(running_, [](const Running& run) { return !run.job; });
  return !running_.empty();
}

void Scheduler::work() {
  bool trimmed = true;
  while (true) {
    {
      std::unique_lock lock(mutex_);
      auto busy = [&] { return stopping_ || !queue_.empty() || !running_.empty(); };
      if (!trimmed && !wake_.wait_for(lock, std::chrono::seconds(1), busy)) {
        // Idle for a second (the request threads have freed their buffers too): hand freed memory back to
        // the OS, so the footprint returns to its baseline after a burst.
        malloc_trim(0);
        trimmed = true;
      }
      wake_.wait(lock, busy);
      if (stopping_ && queue_.empty() && running_.empty()) return;
      admit(Clock::now());
    }
    trimmed = false;
    step();
    std::unique_lock lock(mutex_);
    if (queue_.empty() && running_.empty()) {
      lock.unlock();
      idle_.notify_all();
    }
  }
}

}  // namespace imp::runtime
