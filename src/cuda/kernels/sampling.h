// On-device token choice. Greedy: the index of the largest logit per row, ties to the lowest index
// (runtime::argmax). Sampling with temperature / top-k / top-p / min-p comes with the decode graph.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace imp::cuda {

// tokens[row] = argmax of logits [rows, vocab] (rows <= 65535): a cluster of 8 blocks per row.
void launch_argmax(const float* logits, int32_t rows, int32_t vocab, int32_t* tokens, cudaStream_t stream);

// positions[row] += 1: the end of a decode step that feeds its own greedy token back (device-driven loops).
void launch_advance_positions(int32_t* positions, int32_t rows, cudaStream_t stream);

}  // namespace imp::cuda
