// A fixed pool of worker threads and parallel_for over an index range. The CPU reference uses it only
// where it is cheap and safe: independent output rows of a matrix product, independent heads.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace imp {

class ThreadPool {
 public:
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls fn(begin, end) on disjoint chunks covering [0, count); blocks until all are done.
  // Work smaller than min_chunk per thread runs inline. Calls from several threads are serialised;
  // fn must not call parallel_for itself.
  void parallel_for(int64_t count, int64_t min_chunk, const std::function<void(int64_t, int64_t)>& fn);

  // The process-wide pool (hardware threads).
  static ThreadPool& global();

 private:
  void worker_loop();

  std::vector<std::thread> workers_;
  std::mutex call_mutex_;  // one job at a time
  std::mutex mutex_;
  std::condition_variable work_ready_;
  std::condition_variable work_done_;
  const std::function<void(int64_t, int64_t)>* job_ = nullptr;
  int64_t job_count_ = 0;
  int64_t chunk_ = 0;
  int64_t next_ = 0;
  int pending_ = 0;
  uint64_t generation_ = 0;
  bool stop_ = false;
};

}  // namespace imp
