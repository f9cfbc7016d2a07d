// One sequence's state on the GPU, owned by the sequence (the device twin of cpu::SequenceState): GDN conv
// and recurrent state, PLE n-gram context and conv state, QSA raw and block keys, the KV page table, and
// the step inputs (token, position) the captured decode graph reads. Allocated when the sequence is
// created, sized for the engine's context length; decoding only hands out KV pages.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "cuda/device_model.h"
#include "cuda/memory/device_buffer.h"
#include "cuda/memory/kv_cache.h"

namespace imp::cuda {

struct LayerStateDevice {
  DeviceBuffer<float> gdn_conv;       // [kernel - 1, conv_dim]
  DeviceBuffer<float> gdn_recurrent;  // [value_heads, key_dim, value_dim]
  DeviceBuffer<int64_t> ple_context;  // [ngram_size - 1] raw ids
  DeviceBuffer<float> ple_conv;       // [(kernel - 1) * dilation, S*d]
  DeviceBuffer<float> index_keys;     // [context, indexer dim] raw keys
  DeviceBuffer<float> block_keys;     // [context / ratio, indexer dim]
  int32_t attention_index = -1;       // which KV cache layer
};

class SequenceStateDevice {
 public:
  SequenceStateDevice(const DeviceModel& model, KvCache& kv, int64_t context);
  ~SequenceStateDevice();
  SequenceStateDevice(const SequenceStateDevice&) = delete;
  SequenceStateDevice& operator=(const SequenceStateDevice&) = delete;

  // A copy of `other`'s state (KV pages copied into fresh pages).
  void copy_from(const SequenceStateDevice& other, cudaStream_t stream);

  // Makes sure KV pages exist for positions [0, tokens); throws imp::Error past the context or when the
  // cache is full.
  void reserve(int64_t tokens, cudaStream_t stream);

  int64_t length = 0;     // tokens processed
  int64_t context = 0;    // capacity
  std::vector<LayerStateDevice> layers;
  DeviceBuffer<int32_t> page_table;  // [max_pages]
  int32_t max_pages = 0;
  DeviceBuffer<int32_t> step_token;     // [1]
  DeviceBuffer<int32_t> step_position;  // [1]
  cudaGraphExec_t graphs[2] = {};       // this sequence's captured decode step, by DecodeRegime (forward.h)

 private:
  KvCache& kv_;
  std::vector<int32_t> pages_;  // host copy of the page table's used entries
};

}  // namespace imp::cuda
