// Runs Tokenizer::encode on a few dedicated threads. The tokenizer keeps a 2.4 MB cache per calling thread
// (src/text/bpe.cpp), so encoding on each of the many HTTP threads would grow the footprint by that much
// per thread; more encoding threads than cores would not be faster anyway.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string_view>
#include <thread>
#include <vector>

#include "text/tokenizer.h"

namespace imp::server {

class EncodePool {
 public:
  EncodePool(const text::Tokenizer& tokenizer, size_t threads);
  ~EncodePool();
  EncodePool(const EncodePool&) = delete;
  EncodePool& operator=(const EncodePool&) = delete;

  // Blocks until one of the pool's threads has encoded `text`; rethrows what encode threw.
  std::vector<int32_t> encode(std::string_view text);

 private:
  void work();

  const text::Tokenizer& tokenizer_;
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<std::function<void()>> tasks_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace imp::server
