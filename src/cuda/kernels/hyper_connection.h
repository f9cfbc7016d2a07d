// Hyper-connection read and write for decode rows, the math of cpu::hyper_connection_read/_write:
// read:  N = grouped (1+w) RMSNorm(H); l = silu((N W_down^T) / S); m = sigmoid(l W_up^T);
//        x_j = mean_s m[s, j] * N[s, j]; inject_s = 2 sigmoid((N W_inject^T)_s / S)
// write: H[s, j] += inject_s * y_j
// The norm and the three projections run on the dense kernels; these are the element-wise steps.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace imp::cuda {

// v = silu(v / streams), in place, [count].
void launch_silu_div(float* v, int64_t count, float streams, cudaStream_t stream);
// x [rows, d] = mean over the S streams of sigmoid(mix) * normed; mix and normed [rows, S*d].
void launch_hc_mix(const float* mix, const float* normed, int32_t rows, int32_t streams, int32_t d, float* x,
                   cudaStream_t stream);
// inject [rows, S] = 2 sigmoid(inject / S), in place.
void launch_hc_inject(float* inject, int32_t rows, int32_t streams, cudaStream_t stream);
// stream [rows, S*d] += inject[row, s] * y[row, j].
void launch_hc_write(const float* y, const float* inject, int32_t rows, int32_t streams, int32_t d, float* stream_rows,
                     cudaStream_t stream);

}  // namespace imp::cuda
