// PLE (hashed n-gram embedding) for decode rows, the math of cpu::ple_block for one token; the row ids come
// from model::NgramHash on the host before the step. Steps around these kernels run on the dense kernels:
//   emb = gather(table, ids)                         launch_ple_gather (the table may live in mapped host memory)
//   K = norm_key(emb W_key^T), V = emb W_value^T, Q = norm_query(H)
//   G[s, j] = sigmoid(signed_sqrt(K_s . Q_s / sqrt(d))) * V[j]          launch_ple_gate
//   N = norm_conv(G); D = dilated causal conv over [state ++ N]; H += G + silu(D)   launch_ple_conv_step
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace imp::cuda {

struct PleTableDevice {
  const uint8_t* rows = nullptr;  // [table_rows, head_dim] elements of `fp8` ? 1 : 2 bytes
  bool fp8 = true;                // E4M3 times `scale`, rounded to bf16 (as the reference); else bf16
  float scale = 1.0f;
  int32_t head_dim = 0;
  int64_t row_count = 1;  // rows in the table; ids wrap modulo it (only dummy tables are smaller than the hash range)
};

// emb [rows, heads * head_dim] from ids [rows, heads].
void launch_ple_gather(const PleTableDevice& table, const int64_t* ids, int32_t rows, int32_t heads, float* emb,
                       cudaStream_t stream);

// gated [rows, S*d] from key and query [rows, S*d] (both normalised) and value [rows, d].
void launch_ple_gate(const float* key, const float* query, const float* value, int32_t rows, int32_t streams,
                     int32_t d, float* gated, cudaStream_t stream);

// normed [rows, S*d] = norm_conv(gated); state [rows, (kernel-1)*dilation, S*d] shifts by one row;
// conv weight bf16 [S*d, kernel]; stream [rows, S*d] += gated + silu(conv).
void launch_ple_conv_step(const float* gated, const float* normed, const uint16_t* conv_weight, int32_t kernel,
                          int32_t dilation, float* state, int32_t rows, int32_t width, float* stream_rows,
                          cudaStream_t stream);

}  // namespace imp::cuda
