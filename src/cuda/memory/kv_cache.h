// The paged KV cache of the attention layers: one pool of pages shared by every sequence, one page id
// covering the same token range in every attention layer (a sequence has one page table). Pages are handed
// out on the host before a step; nothing allocates device memory while decoding.
#pragma once

#include <cstdint>
#include <vector>

#include "cuda/kernels/attention_decode.h"
#include "cuda/memory/device_buffer.h"

namespace imp::cuda {

class KvCache {
 public:
  static constexpr int32_t kPageSize = 64;

  // pages per layer, attention layers, kv_heads * head_dim; bf16 storage.
  KvCache(int32_t pages, int32_t layers, int32_t kv_width);

  int32_t free_pages() const { return static_cast<int32_t>(free_.size()); }
  int32_t total_pages() const { return pages_; }
  static int32_t pages_for(int64_t tokens) { return static_cast<int32_t>((tokens + kPageSize - 1) / kPageSize); }
  static uint64_t bytes_per_page(int32_t layers, int32_t kv_width) {
    return 2ull * kPageSize * static_cast<uint64_t>(kv_width) * 2 * static_cast<uint64_t>(layers);
  }

  // Takes one free page (throws imp::Error when none is left).
  int32_t take();
  void give_back(const std::vector<int32_t>& pages);
  // Copies the contents of pages from[i] to to[i] in every layer (for forked sequences).
  void copy_pages(const std::vector<int32_t>& from, const std::vector<int32_t>& to, cudaStream_t stream);

  // Benchmarks: every page of every layer filled with small positive random bf16 values.
  void fill_random(uint64_t seed, cudaStream_t stream);

  // The page description for attention layer `layer` and a device page table of `max_pages` entries.
  KvPages pages(int32_t layer, const int32_t* page_table, int32_t max_pages) const;

 private:
  int32_t pages_;
  int32_t kv_width_;
  std::vector<DeviceBuffer<uint16_t>> keys_, values_;  // per layer [pages, kPageSize, kv_width]
  std::vector<int32_t> free_;
};

}  // namespace imp::cuda
