// Prometheus metrics of the server (text exposition format 0.0.4), rendered on GET /metrics.
// Counters and histograms are updated by request threads; gauges come from the scheduler at render time.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "runtime/scheduler.h"

namespace imp::server {

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}
  void observe(double value);
  // Appends the _bucket, _sum and _count lines of `name` (caller holds the lock).
  void render(std::string& out, const std::string& name) const;

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket, not cumulative; the last is +Inf
  double sum_ = 0.0;
  uint64_t count_ = 0;
};

class Metrics {
 public:
  Metrics();
  void request_done(const std::string& endpoint, int status);
  void tokens(int64_t prompt, int64_t generated);
  void time_to_first_token(double seconds);
  void inter_token_latency(double seconds);
  void request_duration(double seconds);

  std::string render(const runtime::SchedulerStats& stats, const std::string& backend) const;

 private:
  mutable std::mutex mutex_;
  std::map<std::pair<std::string, int>, uint64_t> requests_;
  uint64_t prompt_tokens_ = 0;
  uint64_t generated_tokens_ = 0;
  Histogram ttft_;
  Histogram itl_;
  Histogram duration_;
};

}  // namespace imp::server
