#include "cuda/kernels/ngram_hash.h"

#include "cuda/check.h"
#include "cuda/launch.h"
#include "cuda/kernels/device_math.cuh"

namespace imp::cuda {
namespace {

__device__ __forceinline__ int64_t floor_mod(int64_t a, int64_t m) {
  const int64_t r = a % m;
  return r < 0 ? r + m : r;
}

// History h = context ++ tokens; token t sits at h[ctx + t].
__device__ __forceinline__ int64_t history_at(const int64_t* context, const int32_t* tokens, int ctx, int i) {
  return i < ctx ? context[i] : tokens[i - ctx];
}

// One thread per token: shift s is valid while no EOS lies in h[n - s .. n - 1].
__global__ void ngram_ids_kernel(NgramHashDevice hash, const int32_t* tokens, int count, const int64_t* context,
                                 int64_t* ids) {
  pdl_begin();
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= count) return;
  const int n_size = hash.ngram_size, ctx = n_size - 1, heads = ctx * hash.heads_per_ngram, n = ctx + t;
  uint64_t key = 0;
  // The nearest EOS before the token, looking back only as far as the longest shift reaches.
  int nearest_eos = -1;
  for (int i = n - 1; i >= n - (n_size - 1) && i >= 0; --i) {
    if (history_at(context, tokens, ctx, i) == hash.eos) {
      nearest_eos = i;
      break;
    }
  }
  for (int s = 0; s < n_size; ++s) {
    const bool valid = nearest_eos < n - s;
    const uint64_t shifted = static_cast<uint64_t>(valid ? history_at(context, tokens, ctx, n - s) : hash.eos);
    const uint64_t term = shifted * static_cast<uint64_t>(hash.multipliers[s]);
    key = s == 0 ? term : key ^ term;
    if (s == 0) continue;
    for (int j = 0; j < hash.heads_per_ngram; ++j) {
      const int h = (s - 1) * hash.heads_per_ngram + j;
      ids[static_cast<size_t>(t) * heads + h] = floor_mod(static_cast<int64_t>(key), hash.vocab_sizes[h]) + hash.offsets[h];
    }
  }
}

// After every token has read it: the context becomes the last n - 1 ids of context ++ tokens.
__global__ void ngram_advance_kernel(int ctx, const int32_t* tokens, int count, int64_t* context) {
  pdl_begin();
  if (threadIdx.x != 0) return;
  int64_t next[kMaxNgram];
  for (int i = 0; i < ctx; ++i) {
    const int at = count + i;  // index into context ++ tokens, of the last ctx entries
    next[i] = at < ctx ? context[at] : tokens[at - ctx];
  }
  for (int i = 0; i < ctx; ++i) context[i] = next[i];
}

}  // namespace

void launch_ngram_ids(const NgramHashDevice& hash, const int32_t* tokens, int32_t count, int64_t* context, int64_t* ids,
                      cudaStream_t stream) {
  if (hash.ngram_size < 2 || hash.ngram_size > kMaxNgram || (hash.ngram_size - 1) * hash.heads_per_ngram > kMaxNgramHeads) {
    throw_invalid_launch("ngram_ids: n-gram size or head count beyond the kernel's limits");
  }
  launch_kernel(ngram_ids_kernel, (count + 127) / 128, 128, 0, stream, 1, hash, tokens, count, context, ids);
  launch_kernel(ngram_advance_kernel, 1, 32, 0, stream, 1, hash.ngram_size - 1, tokens, count, context);
}

}  // namespace imp::cuda
