// On-device token choice. Greedy: the index of the largest logit per row, ties to the lowest index
// (runtime::argmax). Sampling with temperature / top-k / top-p / min-p: runtime::sample_token's rule
// (runtime/sampler.cpp, runtime/sampling_rule.h), the same token for the same uniform draw.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace imp::cuda {

// tokens[row] = argmax of logits [rows, vocab] (rows <= 65535): a cluster of 8 blocks per row.
void launch_argmax(const float* logits, int32_t rows, int32_t vocab, int32_t* tokens, cudaStream_t stream);

// One row's sampling parameters (runtime::SamplingOptions without seed and penalties) and its uniform draw.
struct SampleParams {
  float temperature = 0.0f;  // <= 0 (or NaN): greedy, the argmax
  int32_t top_k = 0;         // <= 0: off (the options' int64 clamped to INT32_MAX)
  float top_p = 1.0f;        // >= 1: off
  float min_p = 0.0f;        // <= 0: off
  double u = 0.0;            // in [0, 1): runtime::sampling_uniform(seed, draw)
};

// tokens[row] = runtime::sample_token(logits row, params[row], params[row].u) for logits [rows, vocab]
// (rows <= 65535, vocab <= 2^22) and params [rows] in device memory: a cluster of 8 blocks per row, radix
// selects over the rows' sampling weights instead of a sort. The first call sets the kernel's shared-memory
// limit: make it outside stream capture.
void launch_sample_tokens(const float* logits, int32_t rows, int32_t vocab, const SampleParams* params, int32_t* tokens,
                          cudaStream_t stream);

// positions[row] += 1: the end of a decode step that feeds its own greedy token back (device-driven loops).
void launch_advance_positions(int32_t* positions, int32_t rows, cudaStream_t stream);

}  // namespace imp::cuda
