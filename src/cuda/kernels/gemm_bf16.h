// Dense prefill GEMM on tensor cores: the BF16 projections (and the LM head) for many token rows at once.
//
// Contract (launch_gemm_bf16):
//   y[t, n] = sum_k bf16(x[t, k]) * W[n, k]     for t < rows, n < n_out
//   x: fp32 [rows, k] row-major (each value rounded to bf16 as it is loaded, as the reference model stores
//      activations); W: bf16 bits [n_out, k] row-major (checkpoint layout); y: fp32 [rows, n_out], overwritten.
//   Products are exact (bf16 x bf16), sums fp32 (mma.m16n8k16), in a fixed order: deterministic.
//   Requirements: k % 8 == 0, x and W 16-byte aligned, y 8-byte aligned; rows and n_out arbitrary (tails are
//   zero-filled in the tiles and masked on store). y must not alias x or W. rows == 0 is a no-op.
//   No allocation; 178 KB of dynamic shared memory per block (the opt-in is set once, on first use).
//   Tiles: 128 rows x 128 outputs x 64 inputs, 8 warps (64 x 32 each), 3-stage cp.async pipeline, block
//   order swizzled in groups of 8 row tiles for L2 reuse.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace imp::cuda {

void launch_gemm_bf16(const float* x, const uint16_t* weight, int32_t rows, int32_t n_out, int32_t k, float* y,
                      cudaStream_t stream);

}  // namespace imp::cuda
