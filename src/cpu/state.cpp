#include "cpu/state.h"

#include "model/ngram_hash.h"

namespace imp::cpu {

SequenceState new_sequence_state(const model::ModelConfig& config) {
  SequenceState state;
  state.layers.resize(static_cast<size_t>(config.num_hidden_layers));
  for (int layer = 0; layer < config.num_hidden_layers; ++layer) {
    LayerState& ls = state.layers[static_cast<size_t>(layer)];
    if (config.layer_types[static_cast<size_t>(layer)] == model::LayerType::kLinearAttention) {
      ls.gdn.conv.assign(static_cast<size_t>((config.linear_conv_kernel_dim - 1) * config.gdn_conv_dim()), 0.0f);
      ls.gdn.recurrent.assign(static_cast<size_t>(config.linear_num_value_heads * config.linear_key_head_dim *
                                                  config.linear_value_head_dim), 0.0f);
    }
    if (config.ple_index(layer) >= 0) {
      ls.ple.context.assign(static_cast<size_t>(config.ngram_size - 1), config.ple_eos());
      ls.ple.conv.assign(static_cast<size_t>(config.ple_conv_state_rows() * config.stream_width()), 0.0f);
    }
  }
  return state;
}

}  // namespace imp::cpu
