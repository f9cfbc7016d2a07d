#include "cuda/memory/kv_cache.h"

#include <algorithm>

#include "core/error.h"
#include "cuda/check.h"
#include "cuda/kernels/random_fill.h"

namespace imp::cuda {

KvCache::KvCache(int32_t pages, int32_t layers, int32_t kv_width) : pages_(pages), kv_width_(kv_width) {
  const size_t elements = static_cast<size_t>(pages) * kPageSize * static_cast<size_t>(kv_width);
  for (int32_t l = 0; l < layers; ++l) {
    keys_.emplace_back(elements);
    values_.emplace_back(elements);
  }
  // Zeroed once: the prefill attention's tensor copies read whole pages, rows past a sequence's end included
  // (masked, multiplied by P = 0), so the pool must never hold NaN, as fresh device memory may.
  // cudaMemset runs on the legacy stream, which the engine's non-blocking streams do not wait for: finished here,
  // before any of them writes a page.
  for (auto* pools : {&keys_, &values_}) {
    for (auto& pool : *pools) IMP_CUDA_CHECK(cudaMemset(pool.data(), 0, pool.size() * sizeof(uint16_t)));
  }
  IMP_CUDA_CHECK(cudaDeviceSynchronize());
  // Highest id first so take() hands out 0, 1, 2, ...
  for (int32_t p = pages - 1; p >= 0; --p) free_.push_back(p);
}

int32_t KvCache::take() {
  if (free_.empty()) fail("the KV cache is full ({} pages of {} tokens): no room for more context", pages_, kPageSize);
  const int32_t page = free_.back();
  free_.pop_back();
  return page;
}

void KvCache::give_back(const std::vector<int32_t>& pages) {
  // Keep low ids at the back so reuse stays compact.
  free_.insert(free_.end(), pages.rbegin(), pages.rend());
  std::sort(free_.begin(), free_.end(), std::greater<>());
}

void KvCache::copy_pages(const std::vector<int32_t>& from, const std::vector<int32_t>& to, cudaStream_t stream) {
  const size_t page_elements = static_cast<size_t>(kPageSize) * static_cast<size_t>(kv_width_);
  for (size_t layer = 0; layer < keys_.size(); ++layer) {
    for (size_t i = 0; i < from.size() && i < to.size(); ++i) {
      for (auto* pool : {&keys_[layer], &values_[layer]}) {
        IMP_CUDA_CHECK(cudaMemcpyAsync(pool->data() + static_cast<size_t>(to[i]) * page_elements,
                                       pool->data() + static_cast<size_t>(from[i]) * page_elements,
                                       page_elements * sizeof(uint16_t), cudaMemcpyDeviceToDevice, stream));
      }
    }
  }
}

void KvCache::fill_random(uint64_t seed, cudaStream_t stream) {
  for (size_t layer = 0; layer < keys_.size(); ++layer) {
    for (auto* pool : {&keys_[layer], &values_[layer]}) {
      launch_fill_random_bytes(reinterpret_cast<uint8_t*>(pool->data()), pool->size() * 2, seed++, 0, 0x3e, stream);
    }
  }
}

KvPages KvCache::pages(int32_t layer, const int32_t* page_table, int32_t max_pages) const {
  KvPages p;
  p.keys = const_cast<uint16_t*>(keys_[static_cast<size_t>(layer)].data());
  p.values = const_cast<uint16_t*>(values_[static_cast<size_t>(layer)].data());
  p.page_table = page_table;
  p.max_pages = max_pages;
  p.page_size = kPageSize;
  p.pages = pages_;
  p.bf16 = true;
  return p;
}

}  // namespace imp::cuda
