// The PLE n-gram row ids of new tokens on the device, so neither a decode step nor a prefill chunk needs
// host work: the same arithmetic as model::NgramHash::row_ids (XOR of shifted id * multiplier, mod the
// head's prime, plus its offset; a shift never reaches back across an EOS). The sequence's context (the raw
// last ngram_size - 1 ids) lives in device memory and advances by the tokens.
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

// ids [count, heads] for `count` consecutive tokens of one sequence; context [n - 1] is read, then advanced.
void launch_ngram_ids(const NgramHashDevice& hash, const int32_t* tokens, int32_t count, int64_t* context, int64_t* ids,
                      cudaStream_t stream);

}  // namespace imp::cuda
