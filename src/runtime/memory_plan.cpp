#include "runtime/memory_plan.h"

#include <algorithm>

#include "core/error.h"

namespace imp::runtime {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

double gib(uint64_t bytes) { return static_cast<double>(bytes) / kGiB; }

int32_t pages_for(int64_t tokens, int32_t page_tokens) {
  return static_cast<int32_t>((tokens + page_tokens - 1) / page_tokens);
}

}  // namespace

MemoryPlan plan_memory(const MemoryPlanInputs& in) {
  MemoryPlan plan;
  plan.context = in.max_context_option > 0 ? in.max_context_option
                                           : std::min(in.model_max_positions, MemoryPlan::kDefaultContextCap);
  plan.state_bytes = in.state_bytes(plan.context);
  const int32_t context_pages = pages_for(plan.context, in.page_tokens);
  const uint64_t full_context_kv = static_cast<uint64_t>(context_pages) * in.page_bytes;
  const uint64_t budget = static_cast<uint64_t>(static_cast<double>(in.free_bytes) * MemoryPlan::kBudgetShare);
  const uint64_t fixed = MemoryPlan::kMaxSequences * plan.state_bytes;
  if (budget < fixed + full_context_kv) {
    fail("not enough GPU memory for sequences of {} tokens: {} sequences' state ({:.2f} GiB) and one full context of KV "
         "({:.2f} GiB) exceed the {:.2f} GiB free after the weights; pass a shorter --max-context",
         plan.context, MemoryPlan::kMaxSequences, gib(fixed), gib(full_context_kv), gib(in.free_bytes));
  }
  const uint64_t rest = budget - fixed - full_context_kv;  // the first full context is reserved above
  int32_t chunk = static_cast<int32_t>(std::min<int64_t>(MemoryPlan::kMaxPrefillChunk, plan.context));
  while (chunk > 16 && in.prefill_bytes(chunk, plan.context) > rest / 4) chunk /= 2;
  plan.prefill_chunk = chunk;
  plan.prefill_bytes = in.prefill_bytes(chunk, plan.context);
  const int64_t extra_pages = static_cast<int64_t>((rest > plan.prefill_bytes ? rest - plan.prefill_bytes : 0) / in.page_bytes);
  const int64_t max_pages = MemoryPlan::kMaxSequences * context_pages;
  plan.kv_pages = static_cast<int32_t>(std::min<int64_t>(max_pages, context_pages + extra_pages));
  plan.summary = fmt::format(
      "memory plan: {:.2f} GiB free after weights; context {} tokens{}; per-sequence state {:.1f} MiB (room for {}); "
      "prefill chunks of {} tokens ({:.2f} GiB workspace); KV cache {} pages x {} tokens x {:.1f} KiB = {:.2f} GiB "
      "({:.1f} sequences at full context)",
      gib(in.free_bytes), plan.context,
      in.max_context_option > 0
          ? std::string(" (--max-context)")
          : fmt::format(" (min of the model's {} and {})", in.model_max_positions, MemoryPlan::kDefaultContextCap),
      static_cast<double>(plan.state_bytes) / (1024.0 * 1024.0), MemoryPlan::kMaxSequences, plan.prefill_chunk,
      gib(plan.prefill_bytes), plan.kv_pages, in.page_tokens, static_cast<double>(in.page_bytes) / 1024.0,
      gib(static_cast<uint64_t>(plan.kv_pages) * in.page_bytes),
      static_cast<double>(plan.kv_pages) / static_cast<double>(context_pages));
  return plan;
}

bool plan_low_term_weights(uint64_t low_term_bytes, uint64_t free_bytes) { return low_term_bytes <= free_bytes / 10; }

}  // namespace imp::runtime
