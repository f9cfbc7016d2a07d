#include "core/thread_pool.h"

#include <algorithm>

#include "core/log.h"

namespace imp {

ThreadPool::ThreadPool(int threads) {
  for (int i = 1; i < std::max(threads, 1); ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  work_ready_.notify_all();
  for (auto& worker : workers_) worker.join();
}

ThreadPool& ThreadPool::global() {
  static ThreadPool& pool = [] () -> ThreadPool& {
    const int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    log::info("cpu threads: {} (one per hardware thread)", threads);
    static ThreadPool instance(threads);
    return instance;
  }();
  return pool;
}

void ThreadPool::parallel_for(int64_t count, int64_t min_chunk, const std::function<void(int64_t, int64_t)>& fn) {
  if (count <= 0) return;
  const int64_t threads = size();
  if (threads == 1 || count < 2 * std::max<int64_t>(min_chunk, 1)) {
    fn(0, count);
    return;
  }
  std::lock_guard call(call_mutex_);
  std::unique_lock lock(mutex_);
  job_ = &fn;
  job_count_ = count;
  chunk_ = std::max<int64_t>(min_chunk, (count + threads * 4 - 1) / (threads * 4));
  next_ = 0;
  pending_ = static_cast<int>(workers_.size());
  ++generation_;
  work_ready_.notify_all();
  // The calling thread works too.
  while (next_ < job_count_) {
    const int64_t begin = next_;
    const int64_t end = std::min(job_count_, begin + chunk_);
    next_ = end;
    lock.unlock();
    fn(begin, end);
    lock.lock();
  }
  work_done_.wait(lock, [this] { return pending_ == 0; });
  job_ = nullptr;
}

void ThreadPool::worker_loop() {
  uint64_t seen = 0;
  std::unique_lock lock(mutex_);
  while (true) {
    work_ready_.wait(lock, [&] { return stop_ || generation_ != seen; });
    if (stop_) return;
    seen = generation_;
    while (next_ < job_count_) {
      const int64_t begin = next_;
      const int64_t end = std::min(job_count_, begin + chunk_);
      next_ = end;
      lock.unlock();
      (*job_)(begin, end);
      lock.lock();
    }
    if (--pending_ == 0) work_done_.notify_all();
  }
}

}  // namespace imp
