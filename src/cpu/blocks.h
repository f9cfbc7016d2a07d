// The blocks of a qwen4_exp decoder layer, one reference function each (fp32). `x` rows are tokens.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "cpu/ops.h"
#include "cpu/state.h"
#include "model/config.h"
#include "model/weights.h"

namespace imp::cpu {

// Hyper-connection read: the block input x [T, d] and the write weights inj [T, S] (when the module
// has block_inject_weight) from the stream H [T, S*d].
void hyper_connection_read(const model::ModelConfig& config, const model::HyperConnectionWeights& w,
                           const float* stream, int64_t tokens, float* x, float* inject);
// H_s += inj_s * y for every stream s.
void hyper_connection_write(const model::ModelConfig& config, const float* y, const float* inject, int64_t tokens,
                            float* stream);

// PLE block: returns its output [T, S*d] (to be added to the stream) and advances the PLE state.
void ple_block(const model::ModelConfig& config, const model::PleWeights& w, const float* stream,
               std::span<const int32_t> tokens, PleState& state, float* out);

// Gated DeltaNet on x [T, d] -> y [T, d]. chunked: the chunked (WY) prefill form; otherwise token by token.
void gated_delta_net(const model::ModelConfig& config, const model::GatedDeltaNetWeights& w, const float* x,
                     int64_t tokens, GatedDeltaNetState& state, bool chunked, float* y);

// Gated attention with q/k norm, partial RoPE, GQA and (when configured) the QSA indexer; x [T, d] at
// positions first_position.. -> y [T, d]. Appends to the cache.
void attention(const model::ModelConfig& config, const model::AttentionWeights& w, const Rope& rope, const float* x,
               int64_t tokens, int64_t first_position, AttentionCache& cache, float* y);

// QSA: the token positions row `position` attends to, given the raw index keys of tokens 0..position and the
// row's normalised, rotated indexer queries [indexer_n_heads, indexer_head_dim].
std::vector<int64_t> qsa_select(const model::ModelConfig& config, const model::IndexerWeights& w, const Rope& rope,
                                const float* queries, const float* raw_keys, int64_t position);

// Sparse MoE with shared expert on x [T, d] -> y [T, d].
void moe_block(const model::ModelConfig& config, const model::MoeWeights& w, const float* x, int64_t tokens, float* y);

// Router: the chosen experts and their weights for one token's logits (softmax, top-k, optional renorm).
void route(const model::ModelConfig& config, std::span<const float> logits, std::span<int64_t> experts,
           std::span<float> weights);

}  // namespace imp::cpu
