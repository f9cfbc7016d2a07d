// The PLE n-gram row ids of one new token per row, on the device, so a decode step needs no host work:
// the same arithmetic as model::NgramHash::row_ids (XOR of shifted id * multiplier, mod the head's prime,
// plus its offset; shifts never reach back across an EOS). The context (the raw last ngram_size - 1 ids)
// lives in device memory per row and advances by the token.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace imp::cuda {

constexpr int kMaxNgram = 8;
constexpr int kMaxNgramHeads = 64;

struct NgramHashDevice {
  int32_t ngram_size = 0;       // n (context holds n - 1 ids)
  int32_t heads_per_ngram = 0;  // heads = (n - 1) * heads_per_ngram
  int64_t eos = 0;
  int64_t multipliers[kMaxNgram] = {};
  int64_t vocab_sizes[kMaxNgramHeads] = {};
  int64_t offsets[kMaxNgramHeads] = {};
};

// ids [rows, heads] for tokens [rows]; context [rows, n - 1] is read, then advanced.
void launch_ngram_ids_step(const NgramHashDevice& hash, const int32_t* tokens, int64_t* context, int32_t rows,
                           int64_t* ids, cudaStream_t stream);

}  // namespace imp::cuda
