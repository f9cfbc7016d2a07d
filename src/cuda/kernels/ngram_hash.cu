#include "cuda/kernels/ngram_hash.h"

#include "cuda/check.h"

namespace imp::cuda {
namespace {

__device__ __forceinline__ int64_t floor_mod(int64_t a, int64_t m) {
  const int64_t r = a % m;
  return r < 0 ? r + m : r;
}

// One thread per row: the row's history is its context plus the token.
__global__ void ngram_ids_step_kernel(NgramHashDevice hash, const int32_t* tokens, int64_t* context, int rows,
                                      int64_t* ids) {
  const int row = blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= rows) return;
  const int n = hash.ngram_size, ctx = n - 1, heads = ctx * hash.heads_per_ngram;
  int64_t history[kMaxNgram];
  for (int i = 0; i < ctx; ++i) history[i] = context[static_cast<size_t>(row) * ctx + i];
  history[ctx] = tokens[row];
  int segment_start = 0;  // just after the last EOS before the token
  for (int i = 0; i < ctx; ++i) {
    if (history[i] == hash.eos) segment_start = i + 1;
  }
  uint64_t key = 0;
  for (int s = 0; s < n; ++s) {
    const bool valid = ctx - segment_start >= s;
    const uint64_t shifted = static_cast<uint64_t>(valid ? history[ctx - s] : hash.eos);
    const uint64_t term = shifted * static_cast<uint64_t>(hash.multipliers[s]);
    key = s == 0 ? term : key ^ term;
    if (s == 0) continue;
    for (int j = 0; j < hash.heads_per_ngram; ++j) {
      const int h = (s - 1) * hash.heads_per_ngram + j;
      ids[static_cast<size_t>(row) * heads + h] = floor_mod(static_cast<int64_t>(key), hash.vocab_sizes[h]) + hash.offsets[h];
    }
  }
  for (int i = 0; i < ctx; ++i) context[static_cast<size_t>(row) * ctx + i] = history[i + 1];
}

}  // namespace

void launch_ngram_ids_step(const NgramHashDevice& hash, const int32_t* tokens, int64_t* context, int32_t rows,
                           int64_t* ids, cudaStream_t stream) {
  if (hash.ngram_size < 2 || hash.ngram_size > kMaxNgram || (hash.ngram_size - 1) * hash.heads_per_ngram > kMaxNgramHeads) {
    throw_invalid_launch("ngram_ids_step: n-gram size or head count beyond the kernel's limits");
  }
  ngram_ids_step_kernel<<<(rows + 127) / 128, 128, 0, stream>>>(hash, tokens, context, rows, ids);
  IMP_CUDA_CHECK_LAUNCH();
}

}  // namespace imp::cuda
