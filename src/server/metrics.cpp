#include "server/metrics.h"

#include <malloc.h>

#include <algorithm>

#include <fmt/format.h>

namespace imp::server {

void Histogram::observe(double value) {
  const size_t bucket = static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin());
  ++counts_[bucket];
  sum_ += value;
  ++count_;
}

void Histogram::render(std::string& out, const std::string& name) const {
  uint64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    out += fmt::format("{}_bucket{{le=\"{}\"}} {}\n", name, bounds_[i], cumulative);
  }
  out += fmt::format("{}_bucket{{le=\"+Inf\"}} {}\n{}_sum {}\n{}_count {}\n", name, count_, name, sum_, name, count_);
}

Metrics::Metrics()
    : ttft_({0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}),
      itl_({0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5}),
      duration_({0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}) {}

void Metrics::request_done(const std::string& endpoint, int status) {
  std::lock_guard lock(mutex_);
  ++requests_[{endpoint, status}];
}

void Metrics::tokens(int64_t prompt, int64_t generated) {
  std::lock_guard lock(mutex_);
  prompt_tokens_ += static_cast<uint64_t>(prompt);
  generated_tokens_ += static_cast<uint64_t>(generated);
}

void Metrics::time_to_first_token(double seconds) {
  std::lock_guard lock(mutex_);
  ttft_.observe(seconds);
}

void Metrics::inter_token_latency(double seconds) {
  std::lock_guard lock(mutex_);
  itl_.observe(seconds);
}

void Metrics::request_duration(double seconds) {
  std::lock_guard lock(mutex_);
  duration_.observe(seconds);
}

std::string Metrics::render(const runtime::SchedulerStats& stats, const std::string& backend) const {
  std::lock_guard lock(mutex_);
  std::string out;
  out += "# HELP imp_requests_total HTTP requests answered, by endpoint and status code.\n# TYPE imp_requests_total counter\n";
  for (const auto& [key, count] : requests_) {
    out += fmt::format("imp_requests_total{{endpoint=\"{}\",status=\"{}\"}} {}\n", key.first, key.second, count);
  }
  out += fmt::format("# HELP imp_prompt_tokens_total Prompt tokens of requests that ran.\n# TYPE imp_prompt_tokens_total counter\n"
                     "imp_prompt_tokens_total {}\n", prompt_tokens_);
  out += fmt::format("# HELP imp_generation_tokens_total Tokens generated.\n# TYPE imp_generation_tokens_total counter\n"
                     "imp_generation_tokens_total {}\n", generated_tokens_);
  out += "# HELP imp_time_to_first_token_seconds From request arrival to its first generated token.\n"
         "# TYPE imp_time_to_first_token_seconds histogram\n";
  ttft_.render(out, "imp_time_to_first_token_seconds");
  out += "# HELP imp_inter_token_latency_seconds Between consecutive generated tokens of a request.\n"
         "# TYPE imp_inter_token_latency_seconds histogram\n";
  itl_.render(out, "imp_inter_token_latency_seconds");
  out += "# HELP imp_request_duration_seconds From arrival to the last byte of generation requests.\n"
         "# TYPE imp_request_duration_seconds histogram\n";
  duration_.render(out, "imp_request_duration_seconds");
  out += fmt::format("# HELP imp_queue_depth Generations waiting for a slot.\n# TYPE imp_queue_depth gauge\nimp_queue_depth {}\n", stats.queued);
  out += fmt::format("# HELP imp_running_sequences Generations in the forward batch.\n# TYPE imp_running_sequences gauge\n"
                     "imp_running_sequences {}\n", stats.running);
  out += fmt::format("# HELP imp_kv_reserved_tokens KV tokens reserved (prompt + max_tokens) by running generations.\n"
                     "# TYPE imp_kv_reserved_tokens gauge\nimp_kv_reserved_tokens {}\n", stats.kv_reserved_tokens);
  out += fmt::format("# HELP imp_kv_budget_tokens KV tokens the scheduler may reserve.\n# TYPE imp_kv_budget_tokens gauge\n"
                     "imp_kv_budget_tokens {}\n", stats.kv_budget_tokens);
  const double usage = stats.kv_budget_tokens > 0 ? static_cast<double>(stats.kv_reserved_tokens) / static_cast<double>(stats.kv_budget_tokens) : 0.0;
  out += fmt::format("# HELP imp_kv_usage_ratio Reserved over budget KV tokens.\n# TYPE imp_kv_usage_ratio gauge\nimp_kv_usage_ratio {}\n", usage);
  out += fmt::format("# HELP imp_forward_batches_total Engine forward calls.\n# TYPE imp_forward_batches_total counter\n"
                     "imp_forward_batches_total {}\n", stats.forward_batches);
  out += fmt::format("# HELP imp_batched_sequences_total Sequences summed over forward calls (mean batch = this / batches).\n"
                     "# TYPE imp_batched_sequences_total counter\nimp_batched_sequences_total {}\n", stats.batched_sequences);
  const struct mallinfo2 heap = mallinfo2();
  out += fmt::format("# HELP imp_heap_in_use_bytes Bytes allocated with malloc and not freed (a leak makes it grow).\n"
                     "# TYPE imp_heap_in_use_bytes gauge\nimp_heap_in_use_bytes {}\n", heap.uordblks + heap.hblkhd);
  // The expert cache (hit rate, PCIe bytes) exists only on the GPU backend; absent rather than zero here.
  out += fmt::format("# imp_expert_cache_hit_ratio and imp_expert_pcie_bytes_total: not reported by backend {}\n", backend);
  return out;
}

}  // namespace imp::server
