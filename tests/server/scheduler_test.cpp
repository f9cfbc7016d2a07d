// The scheduler on the CPU engine and the chat_tiny fixture: batching does not change tokens, the queue is
// bounded, cancellation and deadlines end generations and free their sequences.
#include <gtest/gtest.h>

#include <thread>

#include "runtime/engine.h"
#include "runtime/scheduler.h"

namespace imp::runtime {
namespace {

const char* kModel = IMP_SOURCE_DIR "/tests/fixtures/chat_tiny";

GenerationRequest request(int32_t first, int64_t max_tokens, uint64_t seed) {
  GenerationRequest r;
  r.prompt = {first, 10, 20, 30, 40};
  r.max_tokens = max_tokens;
  r.sampling = {.temperature = 0.8f, .seed = seed};
  return r;
}

// Polls a job to its end; returns its tokens and finish reason.
std::pair<std::vector<int32_t>, FinishReason> collect(Job& job) {
  std::vector<int32_t> tokens;
  while (true) {
    JobUpdate u = job.poll(std::chrono::milliseconds(50));
    for (const GeneratedToken& t : u.tokens) tokens.push_back(t.token);
    if (u.state == JobState::finished || u.state == JobState::refused) return {tokens, u.reason};
  }
}

std::vector<int32_t> sequential(Engine& engine, const GenerationRequest& r) {
  Sampler sampler(r.sampling);
  const SequenceId seq = engine.new_sequence();
  ForwardRequest f{.sequence = seq, .tokens = r.prompt, .all_logits = false};
  std::vector<float> logits = engine.forward({&f, 1}).front();
  std::vector<int32_t> out;
  while (static_cast<int64_t>(out.size()) < r.max_tokens) {
    out.push_back(sampler.sample(logits, out));
    const int32_t next[1] = {out.back()};
    f = {.sequence = seq, .tokens = next, .all_logits = false};
    logits = engine.forward({&f, 1}).front();
  }
  engine.release(seq);
  return out;
}

TEST(Scheduler, BatchedGenerationsEqualSequentialOnes) {
  auto engine = load_engine(kModel, {});
  std::vector<std::vector<int32_t>> expected;
  for (int i = 0; i < 4; ++i) expected.push_back(sequential(*engine, request(100 + i, 12 + i, 7 + i)));
  Scheduler scheduler(*engine, {.max_queue = 8, .max_running = 4, .kv_budget_tokens = 0, .prefill_chunk = 2});
  std::vector<std::shared_ptr<Job>> jobs;
  for (int i = 0; i < 4; ++i) {
    Scheduler::Refusal refusal;
    jobs.push_back(scheduler.submit(request(100 + i, 12 + i, 7 + i), &refusal));
    ASSERT_TRUE(jobs.back());
  }
  for (int i = 0; i < 4; ++i) {
    auto [tokens, reason] = collect(*jobs[i]);
    EXPECT_EQ(tokens, expected[i]) << "job " << i;
    EXPECT_EQ(reason, FinishReason::length);
  }
  scheduler.drain();  // the worker has removed every finished sequence
  const SchedulerStats stats = scheduler.stats();
  EXPECT_GT(stats.batched_sequences, stats.forward_batches);  // some steps held several sequences
  EXPECT_EQ(stats.kv_reserved_tokens, 0);
}

TEST(Scheduler, FullQueueIsRefusedAtOnce) {
  auto engine = load_engine(kModel, {});
  Scheduler scheduler(*engine, {.max_queue = 1, .max_running = 1});
  Scheduler::Refusal refusal;
  auto running = scheduler.submit(request(1, 100000, 1), &refusal);
  while (scheduler.stats().running == 0) std::this_thread::yield();
  auto queued = scheduler.submit(request(1, 4, 1), &refusal);
  ASSERT_TRUE(queued);
  EXPECT_FALSE(scheduler.submit(request(1, 4, 1), &refusal));
  EXPECT_EQ(refusal, Scheduler::Refusal::queue_full);
  running->cancel();
  EXPECT_EQ(collect(*running).second, FinishReason::cancelled);
  EXPECT_EQ(collect(*queued).second, FinishReason::length);
  scheduler.drain();
  EXPECT_EQ(scheduler.stats().running, 0u);
  EXPECT_EQ(scheduler.stats().queued, 0u);
}

// Two requests arriving together, before the worker admits the first: the first is bound for the idle
// running slot, so the second still finds the queue's one place (the server used to answer it 503).
TEST(Scheduler, BackToBackRequestsFillSlotThenQueue) {
  auto engine = load_engine(kModel, {});
  Scheduler scheduler(*engine, {.max_queue = 1, .max_running = 1});
  Scheduler::Refusal refusal;
  auto first = scheduler.submit(request(1, 100000, 1), &refusal);
  auto second = scheduler.submit(request(1, 4, 1), &refusal);
  ASSERT_TRUE(first);
  ASSERT_TRUE(second) << "refused with a running slot free";
  EXPECT_FALSE(scheduler.submit(request(1, 4, 1), &refusal));
  EXPECT_EQ(refusal, Scheduler::Refusal::queue_full);
  first->cancel();
  EXPECT_EQ(collect(*first).second, FinishReason::cancelled);
  EXPECT_EQ(collect(*second).second, FinishReason::length);
  scheduler.drain();
}

TEST(Scheduler, DeadlinesEndRunningAndQueuedWork) {
  auto engine = load_engine(kModel, {});
  Scheduler scheduler(*engine, {.max_queue = 4, .max_running = 1});
  GenerationRequest slow = request(1, 1000000, 1);
  slow.deadline = Clock::now() + std::chrono::milliseconds(200);
  GenerationRequest behind = request(2, 4, 1);
  behind.deadline = Clock::now() + std::chrono::milliseconds(100);
  Scheduler::Refusal refusal;
  auto a = scheduler.submit(slow, &refusal);
  auto b = scheduler.submit(behind, &refusal);
  auto [tokens, reason] = collect(*a);
  EXPECT_EQ(reason, FinishReason::deadline);
  EXPECT_GT(tokens.size(), 0u);
  const JobUpdate last = b->poll(std::chrono::milliseconds(1000));
  EXPECT_EQ(last.state, JobState::refused);
}

TEST(Scheduler, ForcedTokensThenStopAndDrain) {
  auto engine = load_engine(kModel, {});
  Scheduler scheduler(*engine, {});
  GenerationRequest r = request(1, 100, 1);
  r.forced_tokens = std::vector<int32_t>{5, 6, 7};
  r.stop_tokens = {503};
  r.top_logprobs = 2;
  Scheduler::Refusal refusal;
  auto job = scheduler.submit(r, &refusal);
  auto [tokens, reason] = collect(*job);
  EXPECT_EQ(tokens, (std::vector<int32_t>{5, 6, 7}));
  EXPECT_EQ(reason, FinishReason::stop);
  scheduler.drain();
  EXPECT_FALSE(scheduler.submit(r, &refusal));
  EXPECT_EQ(refusal, Scheduler::Refusal::draining);
}

}  // namespace
}  // namespace imp::runtime
