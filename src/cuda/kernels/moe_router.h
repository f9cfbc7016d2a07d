// The MoE router on the GPU: softmax + top-k over any number of experts up to 4096, for decode and prefill rows.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace imp::cuda {

// Router: per token row of logits [rows, experts] (experts <= 4096, 1 <= k <= 64), the top k by softmax
// probability (ties: lower expert id), weights from an fp32 softmax, optionally renormalised over the k.
// Writes experts [rows, k] (descending) and weights [rows, k]. A warp per row up to 512 experts and k <= 16 (the
// decode router's selection and softmax), else a block per row; every expert is considered.
// The choice is made on the logits (softmax is monotonic; equal logits are equal probabilities).
void launch_router_topk(const float* logits, int32_t rows, int32_t experts, int32_t k, bool renormalize,
                        int32_t* top_experts, float* top_weights, cudaStream_t stream);

}  // namespace imp::cuda
