// Per-sequence state of the CPU reference, owned by the sequence: nothing model-wide holds context.
#pragma once

#include <cstdint>
#include <vector>

#include "model/config.h"

namespace imp::cpu {

struct AttentionCache {
  std::vector<float> keys;        // [tokens, kv_heads * head_dim], after k_norm and RoPE
  std::vector<float> values;      // [tokens, kv_heads * head_dim]
  std::vector<float> index_keys;  // [tokens, indexer_head_dim], raw (before norm and RoPE)
};

struct GatedDeltaNetState {
  std::vector<float> conv;       // [kernel - 1, conv_dim]: the last inputs of the causal conv
  std::vector<float> recurrent;  // [value_heads, key_dim, value_dim], fp32
  bool has_previous = false;     // false until the first forward: the reference then uses the chunked form
};

struct PleState {
  std::vector<int64_t> context;  // the raw last ngram_size-1 token ids (EOS at sequence start)
  std::vector<float> conv;       // [(kernel - 1) * dilation, S * d]: the last normalised gated values
};

struct LayerState {
  AttentionCache attention;
  GatedDeltaNetState gdn;
  PleState ple;
};

struct SequenceState {
  int64_t length = 0;  // tokens already processed
  std::vector<LayerState> layers;
};

SequenceState new_sequence_state(const model::ModelConfig& config);

}  // namespace imp::cpu
