// PLE's dilated causal conv for T consecutive tokens of one sequence (prefill), the math of
// cpu::ple_block step 4 over [state ++ T rows]: out = gated + silu(conv), added to the stream rows.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace imp::cuda {

// gated, normed [tokens, width]; conv weight bf16 [width, kernel]; state [(kernel-1)*dilation, width] holds the
// last normalised rows before the chunk and afterwards the last rows of [state ++ normed];
// stream_rows [tokens, width] += gated + silu(sum_j w[c, j] * P[t + j*dilation, c]), P = [state ++ normed].
void launch_ple_conv_prefill(const float* gated, const float* normed, const uint16_t* conv_weight, int32_t kernel,
                             int32_t dilation, float* state, int32_t tokens, int32_t width, float* stream_rows,
                             cudaStream_t stream);

}  // namespace imp::cuda
