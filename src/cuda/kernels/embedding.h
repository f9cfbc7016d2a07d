// Token embedding for decode rows: the embedding row (bf16, unscaled) copied into each of the S streams,
// as cpu::Model::forward starts the stream.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace imp::cuda {

// stream_rows [rows, S*d] fp32: every stream s of row r = table[tokens[r]] (bf16 [vocab, d]).
void launch_embed_streams(const uint16_t* table, const int32_t* tokens, int32_t rows, int32_t d, int32_t streams,
                          float* stream_rows, cudaStream_t stream);

}  // namespace imp::cuda
