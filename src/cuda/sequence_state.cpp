#include "cuda/sequence_state.h"

#include "core/error.h"

namespace imp::cuda {

SequenceStateDevice::SequenceStateDevice(const DeviceModel& model, KvCache& kv, int64_t context_tokens)
    : context(context_tokens), kv_(kv) {
  const model::ModelConfig& c = model.config();
  int32_t attention_layers = 0;
  for (int layer = 0; layer < c.num_hidden_layers; ++layer) {
    const LayerDevice& ld = model.layers()[static_cast<size_t>(layer)];
    LayerStateDevice s;
    if (ld.gdn) {
      s.gdn_conv = DeviceBuffer<float>(static_cast<size_t>((c.linear_conv_kernel_dim - 1) * c.gdn_conv_dim()));
      s.gdn_recurrent = DeviceBuffer<float>(
          static_cast<size_t>(c.linear_num_value_heads * c.linear_key_head_dim * c.linear_value_head_dim));
      IMP_CUDA_CHECK(cudaMemset(s.gdn_conv.data(), 0, s.gdn_conv.size() * sizeof(float)));
      IMP_CUDA_CHECK(cudaMemset(s.gdn_recurrent.data(), 0, s.gdn_recurrent.size() * sizeof(float)));
    }
    if (ld.ple) {
      s.ple_context = DeviceBuffer<int64_t>(std::vector<int64_t>(static_cast<size_t>(c.ngram_size - 1), c.ple_eos()));
      s.ple_conv = DeviceBuffer<float>(static_cast<size_t>(c.ple_conv_state_rows() * c.stream_width()));
      IMP_CUDA_CHECK(cudaMemset(s.ple_conv.data(), 0, s.ple_conv.size() * sizeof(float)));
    }
    if (ld.attention) {
      s.attention_index = attention_layers++;
      if (c.has_qsa) {
        s.index_keys = DeviceBuffer<float>(static_cast<size_t>(context * c.indexer_head_dim));
        s.block_keys = DeviceBuffer<float>(static_cast<size_t>((context / c.indexer_compress_ratio + 1) * c.indexer_head_dim));
      }
    }
    layers.push_back(std::move(s));
  }
  max_pages = KvCache::pages_for(context);
  page_table = DeviceBuffer<int32_t>(static_cast<size_t>(max_pages));
  IMP_CUDA_CHECK(cudaMemset(page_table.data(), 0, page_table.size() * sizeof(int32_t)));
  step_token = DeviceBuffer<int32_t>(1);
  step_position = DeviceBuffer<int32_t>(1);
}

SequenceStateDevice::~SequenceStateDevice() {
  for (cudaGraphExec_t graph : graphs) {
    if (graph) cudaGraphExecDestroy(graph);
  }
  kv_.give_back(pages_);
}

void SequenceStateDevice::reserve(int64_t tokens, cudaStream_t stream) {
  if (tokens > context) {
    fail("the sequence would hold {} tokens, beyond the engine's context of {} tokens", tokens, context);
  }
  const int32_t need = KvCache::pages_for(tokens);
  const size_t first_new = pages_.size();
  while (static_cast<int32_t>(pages_.size()) < need) pages_.push_back(kv_.take());
  if (pages_.size() > first_new) {
    IMP_CUDA_CHECK(cudaMemcpyAsync(page_table.data() + first_new, pages_.data() + first_new,
                                   (pages_.size() - first_new) * sizeof(int32_t), cudaMemcpyHostToDevice, stream));
    IMP_CUDA_CHECK(cudaStreamSynchronize(stream));  // pages_ may grow again before the copy would run
  }
}

void SequenceStateDevice::copy_from(const SequenceStateDevice& other, cudaStream_t stream) {
  length = other.length;
  for (size_t l = 0; l < layers.size(); ++l) {
    LayerStateDevice& to = layers[l];
    const LayerStateDevice& from = other.layers[l];
    auto copy = [&](auto& dst, const auto& src) {
      if (src.size()) {
        IMP_CUDA_CHECK(cudaMemcpyAsync(dst.data(), src.data(), src.size() * sizeof(*src.data()), cudaMemcpyDeviceToDevice, stream));
      }
    };
    copy(to.gdn_conv, from.gdn_conv);
    copy(to.gdn_recurrent, from.gdn_recurrent);
    copy(to.ple_context, from.ple_context);
    copy(to.ple_conv, from.ple_conv);
    copy(to.index_keys, from.index_keys);
    copy(to.block_keys, from.block_keys);
  }
  reserve(other.length, stream);
  kv_.copy_pages(other.pages_, pages_, stream);
  IMP_CUDA_CHECK(cudaStreamSynchronize(stream));
}

}  // namespace imp::cuda
