// The GPU backend's memory plan as arithmetic on sizes: what the CUDA engine measures (free device memory after
// the weights) and what its buffers cost go in, the decisions and the one log line that explains them come out.
// Plain C++ in runtime/ (ARCHITECTURE.md places it in cuda/memory/) so that CI tests every decision and refusal
// without a GPU; the engine measures, calls it, and allocates what it says.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace imp::runtime {

struct MemoryPlanInputs {
  uint64_t free_bytes = 0;               // device memory free now (after the weights)
  int64_t max_context_option = 0;        // --max-context, 0: auto
  int64_t model_max_positions = 0;       // config max_position_embeddings
  uint64_t page_bytes = 0;               // one KV page (all attention layers)
  int32_t page_tokens = 64;              // tokens per KV page
  std::function<uint64_t(int64_t context)> state_bytes;                     // one sequence's fixed state
  std::function<uint64_t(int32_t chunk, int64_t context)> prefill_bytes;  // the prefill workspace
};

struct MemoryPlan {
  static constexpr int64_t kDefaultContextCap = 32768;
  static constexpr int64_t kMaxSequences = 16;  // sequences the plan makes room for (the server's default concurrency)
  static constexpr int32_t kMaxPrefillChunk = 4096;
  static constexpr double kBudgetShare = 0.9;   // of the free memory; the rest for cuBLAS workspaces and the runtime

  int64_t context = 0;            // tokens per sequence
  uint64_t state_bytes = 0;       // one sequence's fixed state
  int32_t prefill_chunk = 0;      // tokens per prefill chunk
  uint64_t prefill_bytes = 0;     // its workspace
  int32_t kv_pages = 0;           // KV cache pages
  std::string summary;            // the log line: numbers and reasons
};

// Within kBudgetShare of the free memory: the context (the model's, capped at kDefaultContextCap, unless
// --max-context), the fixed state of kMaxSequences sequences and one full context of KV (refused with an
// actionable error when they do not fit), a prefill workspace of at most a quarter of the rest (chunks halved
// from kMaxPrefillChunk until it fits), then KV pages for up to kMaxSequences full contexts from what remains.
MemoryPlan plan_memory(const MemoryPlanInputs& in);

// Prefill's FP8 low-term weights are built when they take at most a tenth of the memory free after the weights.
bool plan_low_term_weights(uint64_t low_term_bytes, uint64_t free_bytes);

}  // namespace imp::runtime
