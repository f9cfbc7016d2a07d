#include "cuda/kernels/sampling.h"

#include <cfloat>
#include <climits>

#include <cooperative_groups.h>

#include "cuda/check.h"
#include "cuda/kernels/device_math.cuh"

namespace imp::cuda {
namespace {

namespace cg = cooperative_groups;

constexpr int kThreads = 1024;
constexpr int kClusterBlocks = 8;  // portable cluster size

__device__ __forceinline__ void keep_better(float& v, int& i, float ov, int oi) {
  if (ov > v || (ov == v && oi < i)) {
    v = ov;
    i = oi;
  }
}

// Two stages in one launch: a cluster of kClusterBlocks blocks per row (one per SM), each reducing a
// contiguous slice of the row; block rank 0 then merges the blocks' winners through distributed shared
// memory. No scratch in global memory, so the launcher's signature and graph capture are unchanged.
// (value, index) ordered by value, then lower index: a total order, so merge order does not matter.
__global__ void __cluster_dims__(kClusterBlocks, 1, 1) __launch_bounds__(kThreads)
    argmax_kernel(const float* logits, int vocab, int32_t* tokens) {
  __shared__ float best_v[kThreads / kWarp];
  __shared__ int best_i[kThreads / kWarp];
  cg::cluster_group cluster = cg::this_cluster();
  const int rank = static_cast<int>(cluster.block_rank());
  const float* row = logits + static_cast<size_t>(blockIdx.y) * vocab;
  const int per_block = (vocab + kClusterBlocks - 1) / kClusterBlocks;
  const int lo = min(vocab, rank * per_block), hi = min(vocab, lo + per_block);
  float v = -FLT_MAX;
  int idx = INT_MAX;
  int i = lo + static_cast<int>(threadIdx.x);
  for (; i + 3 * kThreads < hi; i += 4 * kThreads) {  // four independent loads in flight per thread
    const float a = row[i], b = row[i + kThreads], c = row[i + 2 * kThreads], d = row[i + 3 * kThreads];
    keep_better(v, idx, a, i);
    keep_better(v, idx, b, i + kThreads);
    keep_better(v, idx, c, i + 2 * kThreads);
    keep_better(v, idx, d, i + 3 * kThreads);
  }
  for (; i < hi; i += kThreads) keep_better(v, idx, row[i], i);
  for (int o = kWarp / 2; o > 0; o /= 2) {
    keep_better(v, idx, __shfl_xor_sync(0xffffffffu, v, o), __shfl_xor_sync(0xffffffffu, idx, o));
  }
  if (threadIdx.x % kWarp == 0) {
    best_v[threadIdx.x / kWarp] = v;
    best_i[threadIdx.x / kWarp] = idx;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < kThreads / kWarp; ++w) keep_better(v, idx, best_v[w], best_i[w]);
    best_v[0] = v;
    best_i[0] = idx;
  }
  cluster.sync();  // every block's winner is in its best_v[0] / best_i[0]
  if (rank == 0 && threadIdx.x == 0) {
    for (int r = 1; r < kClusterBlocks; ++r) {
      const float* rv = cluster.map_shared_rank(best_v, r);
      const int* ri = cluster.map_shared_rank(best_i, r);
      keep_better(v, idx, rv[0], ri[0]);
    }
    tokens[blockIdx.y] = idx;
  }
  cluster.sync();  // keep every block's shared memory alive until rank 0 has read it
}

__global__ void advance_positions_kernel(int32_t* positions, int rows) {
  const int row = blockIdx.x * blockDim.x + threadIdx.x;
  if (row < rows) positions[row] += 1;
}

}  // namespace

void launch_advance_positions(int32_t* positions, int32_t rows, cudaStream_t stream) {
  advance_positions_kernel<<<(rows + 127) / 128, 128, 0, stream>>>(positions, rows);
  IMP_CUDA_CHECK_LAUNCH();
}

void launch_argmax(const float* logits, int32_t rows, int32_t vocab, int32_t* tokens, cudaStream_t stream) {
  if (rows < 1) return;
  argmax_kernel<<<dim3(kClusterBlocks, rows), kThreads, 0, stream>>>(logits, vocab, tokens);
  IMP_CUDA_CHECK_LAUNCH();
}

}  // namespace imp::cuda
