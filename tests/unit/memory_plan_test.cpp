// The GPU memory plan's decisions (runtime/memory_plan.h) on sizes chosen by hand: context, refusal, prefill
// chunk, KV pages, the low-term weights, and the log line that states them.
#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "runtime/memory_plan.h"

namespace imp::runtime {
namespace {

constexpr uint64_t kMiB = 1024ull * 1024;
constexpr uint64_t kGiB = 1024 * kMiB;

// A model of round sizes: 1 MiB of state per sequence plus 1 KiB per context token, 1 MiB KV pages of 64 tokens,
// a prefill workspace of 1 MiB per chunk token.
MemoryPlanInputs inputs(uint64_t free_bytes, int64_t max_context_option = 0, int64_t model_positions = 262144) {
  return {.free_bytes = free_bytes,
          .max_context_option = max_context_option,
          .model_max_positions = model_positions,
          .page_bytes = kMiB,
          .page_tokens = 64,
          .state_bytes = [](int64_t context) { return kMiB + 1024 * static_cast<uint64_t>(context); },
          .prefill_bytes = [](int32_t chunk, int64_t) { return static_cast<uint64_t>(chunk) * kMiB; }};
}

TEST(MemoryPlan, ContextIsTheModelsCappedUnlessAsked) {
  EXPECT_EQ(plan_memory(inputs(100 * kGiB)).context, 32768);
  EXPECT_EQ(plan_memory(inputs(100 * kGiB, 0, 4096)).context, 4096);
  EXPECT_EQ(plan_memory(inputs(100 * kGiB, 100000)).context, 100000);
}

TEST(MemoryPlan, PlentyOfMemoryGivesFullChunksAndSixteenFullContexts) {
  const MemoryPlan plan = plan_memory(inputs(100 * kGiB));
  EXPECT_EQ(plan.state_bytes, kMiB + 1024 * 32768ull);
  EXPECT_EQ(plan.prefill_chunk, 4096);
  EXPECT_EQ(plan.prefill_bytes, 4096 * kMiB);
  EXPECT_EQ(plan.kv_pages, 16 * 512);  // capped at kMaxSequences full contexts of 512 pages
}

TEST(MemoryPlan, ChunkHalvesUntilItsWorkspaceTakesAQuarterOfTheRest) {
  // Budget 0.9 x 4 GiB = 3686.4 MiB; fixed 16 x 33 MiB = 528 MiB; one context of KV 512 MiB: rest ~2646 MiB, a
  // quarter ~661 MiB: chunks of 4096, 2048, 1024 MiB are too big, 512 fits.
  const MemoryPlan plan = plan_memory(inputs(4 * kGiB));
  EXPECT_EQ(plan.prefill_chunk, 512);
  // What is left after the workspace becomes KV pages beyond the reserved full context.
  const uint64_t budget = static_cast<uint64_t>(4.0 * kGiB * 0.9);
  const uint64_t rest = budget - 16 * (kMiB + 1024 * 32768ull) - 512 * kMiB;
  EXPECT_EQ(plan.kv_pages, static_cast<int32_t>(512 + (rest - 512 * kMiB) / kMiB));
}

TEST(MemoryPlan, RefusesWhatCannotHoldOneFullContextAndSaysWhatToDo) {
  try {
    plan_memory(inputs(512 * kMiB));
    FAIL() << "a plan without room for one full context";
  } catch (const Error& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("not enough GPU memory for sequences of 32768 tokens"), std::string::npos) << message;
    EXPECT_NE(message.find("pass a shorter --max-context"), std::string::npos) << message;
  }
  // The same memory holds a shorter context.
  EXPECT_EQ(plan_memory(inputs(512 * kMiB, 4096)).context, 4096);
}

TEST(MemoryPlan, SummaryStatesTheNumbersAndWhy) {
  const std::string auto_context = plan_memory(inputs(100 * kGiB, 0, 40960)).summary;
  EXPECT_NE(auto_context.find("context 32768 tokens (min of the model's 40960 and 32768)"), std::string::npos)
      << auto_context;
  EXPECT_NE(auto_context.find("prefill chunks of 4096 tokens"), std::string::npos) << auto_context;
  EXPECT_NE(auto_context.find("KV cache 8192 pages x 64 tokens"), std::string::npos) << auto_context;
  EXPECT_NE(auto_context.find("(16.0 sequences at full context)"), std::string::npos) << auto_context;
  const std::string asked = plan_memory(inputs(100 * kGiB, 8192)).summary;
  EXPECT_NE(asked.find("context 8192 tokens (--max-context)"), std::string::npos) << asked;
}

TEST(MemoryPlan, LowTermWeightsOnlyWithinATenthOfTheFreeMemory) {
  EXPECT_TRUE(plan_low_term_weights(kGiB, 10 * kGiB));
  EXPECT_FALSE(plan_low_term_weights(kGiB + 1, 10 * kGiB));
}

}  // namespace
}  // namespace imp::runtime
