#include "server/encode_pool.h"

#include <algorithm>
#include <exception>
#include <future>

namespace imp::server {

EncodePool::EncodePool(const text::Tokenizer& tokenizer, size_t threads) : tokenizer_(tokenizer) {
  for (size_t i = 0; i < std::max<size_t>(threads, 1); ++i) threads_.emplace_back([this] { work(); });
}

EncodePool::~EncodePool() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  ready_.notify_all();
  for (std::thread& thread : threads_) thread.join();
}

std::vector<int32_t> EncodePool::encode(std::string_view text) {
  std::packaged_task<std::vector<int32_t>()> task([this, text] { return tokenizer_.encode(text); });
  std::future<std::vector<int32_t>> result = task.get_future();
  {
    std::lock_guard lock(mutex_);
    tasks_.emplace_back([&task] { task(); });
  }
  ready_.notify_one();
  return result.get();
}

void EncodePool::work() {
  while (true) {
    std::function<void()> task;
    {
      std::unique_lock lock(mutex_);
      ready_.wait(lock, [&] { return stopping_ || !tasks_.empty(); });
      if (tasks_.empty()) return;
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();
  }
}

}  // namespace imp::server
