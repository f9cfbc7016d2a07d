#include "cuda/kernels/moe_router.h"

#include "cuda/check.h"
#include "cuda/launch.h"
#include "cuda/kernels/device_math.cuh"
#include "cuda/kernels/moe_router.cuh"

namespace imp::cuda {
namespace {

using namespace moe;

// Router of many rows for k above kMaxTopK or more than 512 experts. One block of kRouterThreads per row:
// 1. Every thread loads its experts (tid + 256 i), builds keys and a local (max, sum of exp) softmax pair.
// 2. Each warp takes the top k of its experts in k rounds of two 32-bit redux.sync max (high, then low word);
//    only the winning lane rescans its few keys. The rounds write the warp's candidates in descending order.
// 3. Every candidate counts the candidates of the other warps above it (its rank; its own list is sorted):
//    the k of rank < k are the answer, in order. (A global top-k key has all larger keys among the candidates,
//    so its count is its exact rank; any other candidate has the k winners above it.)
// 4. Warp 0 combines the softmax pairs and writes ids and weights.
constexpr int kRouterThreads = 256;
constexpr int kRouterWarps = kRouterThreads / kWarp;
constexpr int kRouterMaxK = 64;

// Combines two partial softmax pairs (max, sum of exp(v - max)); (-inf, 0) is the identity. Symmetric.
__device__ __forceinline__ void softmax_combine(float& m, float& s, float om, float os) {
  const float nm = fmaxf(m, om);
  s = s * (m == nm ? 1.0f : expf(m - nm)) + os * (om == nm ? 1.0f : expf(om - nm));
  m = nm;
}

// k rounds of a warp's top-k over its lanes' keys (all distinct, 0 = none), descending: each round takes the
// warp's largest key with two 32-bit redux.sync max (high, then low word) and calls on_win(j, win); only the
// winning lane rescans its keys for its next best.
template <int kPer, class OnWin>
__device__ __forceinline__ void warp_topk_rounds(const uint64_t (&keys)[kPer], uint64_t best, int k, OnWin on_win) {
  for (int j = 0; j < k; ++j) {
    const uint32_t hi = __reduce_max_sync(kFull, static_cast<uint32_t>(best >> 32));
    const uint32_t lo = __reduce_max_sync(kFull, static_cast<uint32_t>(best >> 32) == hi ? static_cast<uint32_t>(best) : 0u);
    const uint64_t win = (static_cast<uint64_t>(hi) << 32) | lo;
    on_win(j, win);
    if (win != 0 && best == win) {
      best = 0;
#pragma unroll
      for (int i = 0; i < kPer; ++i) best = keys[i] < win && keys[i] > best ? keys[i] : best;
    }
  }
}

template <int kPer>  // experts per thread: ceil(experts / 256), a power of two
__global__ void __launch_bounds__(kRouterThreads) router_topk_kernel(const float* logits, int experts, int k,
                                                                     bool renormalize, int32_t* top_experts,
                                                                     float* top_weights) {
  pdl_begin();
  __shared__ uint64_t cand[kRouterWarps * kRouterMaxK];
  __shared__ uint64_t chosen[kRouterMaxK];
  __shared__ float2 stats[kRouterWarps];
  const int row = blockIdx.x, lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  const float* in = logits + static_cast<size_t>(row) * experts;

  float v[kPer];
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    const int e = threadIdx.x + i * kRouterThreads;
    v[i] = e < experts ? in[e] : 0.0f;
  }
  uint64_t keys[kPer];
  uint64_t best = 0;  // 0: no key (every real key has a nonzero low word)
  float m = -INFINITY, s = 0.0f;
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    const int e = threadIdx.x + i * kRouterThreads;
    keys[i] = e < experts ? router_key(v[i], e) : 0;
    best = keys[i] > best ? keys[i] : best;
    if (e < experts) m = fmaxf(m, v[i]);
  }
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    if (threadIdx.x + i * kRouterThreads < experts) s += expf(v[i] - m);
  }

  // Warp top-k, descending.
  warp_topk_rounds(keys, best, k, [&](int j, uint64_t win) {
    if (lane == 0) cand[warp * k + j] = win;
  });
  for (int o = kWarp / 2; o > 0; o /= 2) {
    softmax_combine(m, s, __shfl_xor_sync(kFull, m, o), __shfl_xor_sync(kFull, s, o));
  }
  if (lane == 0) stats[warp] = make_float2(m, s);
  __syncthreads();

  // Ranks of the candidates.
  for (int t = threadIdx.x; t < kRouterWarps * k; t += kRouterThreads) {
    const uint64_t key = cand[t];
    if (key == 0) continue;
    const int own = t / k;
    int rank = t - own * k;  // the keys before it in its own (descending) list
    for (int w = 0; w < kRouterWarps; ++w) {
      if (w == own) continue;
      const uint64_t* list = cand + w * k;
#pragma unroll 5
      for (int p = 0; p < k; ++p) rank += list[p] > key ? 1 : 0;
    }
    if (rank < k) chosen[rank] = key;
  }
  __syncthreads();

  if (warp != 0) return;
  m = lane < kRouterWarps ? stats[lane].x : -INFINITY;
  s = lane < kRouterWarps ? stats[lane].y : 0.0f;
  for (int o = kWarp / 2; o > 0; o /= 2) {
    softmax_combine(m, s, __shfl_xor_sync(kFull, m, o), __shfl_xor_sync(kFull, s, o));
  }
  float p[kRouterMaxK / kWarp];
  float total = 0.0f;
#pragma unroll
  for (int h = 0; h < kRouterMaxK / kWarp; ++h) {
    const int j = lane + h * kWarp;
    p[h] = j < k ? expf(key_logit(chosen[j]) - m) / s : 0.0f;
    total += p[h];
  }
  total = warp_sum(total);
#pragma unroll
  for (int h = 0; h < kRouterMaxK / kWarp; ++h) {
    const int j = lane + h * kWarp;
    if (j < k) {
      top_experts[static_cast<size_t>(row) * k + j] = key_expert(chosen[j]);
      top_weights[static_cast<size_t>(row) * k + j] = renormalize ? p[h] / total : p[h];
    }
  }
}

// Router rows for prefill: warp_router (with the softmax) on one row per warp, eight rows per block. The block
// per row of router_topk_kernel took 40.6 us per layer for 4096 rows of 512 experts (prefill timeline 7881f24):
// its 4096 blocks ran in ~4 waves, each a chain of k warp rounds and two block barriers.
constexpr int kRouterRowWarps = 8;
template <int kPer>
__global__ void __launch_bounds__(kRouterRowWarps * kWarp)
    router_rows_kernel(const float* logits, int rows, int experts, int k, bool renormalize, int32_t* top_experts,
                       float* top_weights) {
  pdl_begin();
  __shared__ uint64_t scratch[kRouterRowWarps][kRouterScratchBytes<kPer> / sizeof(uint64_t)];
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int row = blockIdx.x * kRouterRowWarps + warp;
  if (row >= rows) return;
  int expert = 0;
  float weight = 0.0f;
  warp_router<kPer, true>(logits + static_cast<size_t>(row) * experts, experts, k, renormalize, scratch[warp], expert,
                          weight);
  if (lane < k) {
    top_experts[static_cast<size_t>(row) * k + lane] = expert;
    top_weights[static_cast<size_t>(row) * k + lane] = weight;
  }
}

}  // namespace

void launch_router_topk(const float* logits, int32_t rows, int32_t experts, int32_t k, bool renormalize,
                        int32_t* top_experts, float* top_weights, cudaStream_t stream) {
  if (experts > kMaxExperts || k > kRouterMaxK || k < 1 || k > experts) {
    throw_invalid_launch("router: more than 4096 experts or top-k above 64");
  }
  if (rows <= 0) return;
  if (k <= kMaxTopK && experts <= 16 * kWarp) {  // a warp per row
    const unsigned blocks = static_cast<unsigned>((rows + kRouterRowWarps - 1) / kRouterRowWarps);
    if (experts <= 4 * kWarp) {
      launch_kernel(router_rows_kernel<4>, blocks, kRouterRowWarps * kWarp, 0, stream, 1, logits, rows, experts, k,
                    renormalize, top_experts, top_weights);
    } else {
      launch_kernel(router_rows_kernel<16>, blocks, kRouterRowWarps * kWarp, 0, stream, 1, logits, rows, experts, k,
                    renormalize, top_experts, top_weights);
    }
    return;
  }
  const int per = (experts + kRouterThreads - 1) / kRouterThreads;
  if (per <= 1) {
    launch_kernel(router_topk_kernel<1>, rows, kRouterThreads, 0, stream, 1,
                  logits, experts, k, renormalize, top_experts, top_weights);
  } else if (per <= 2) {
    launch_kernel(router_topk_kernel<2>, rows, kRouterThreads, 0, stream, 1,
                  logits, experts, k, renormalize, top_experts, top_weights);
  } else if (per <= 4) {
    launch_kernel(router_topk_kernel<4>, rows, kRouterThreads, 0, stream, 1,
                  logits, experts, k, renormalize, top_experts, top_weights);
  } else if (per <= 8) {
    launch_kernel(router_topk_kernel<8>, rows, kRouterThreads, 0, stream, 1,
                  logits, experts, k, renormalize, top_experts, top_weights);
  } else {
    launch_kernel(router_topk_kernel<16>, rows, kRouterThreads, 0, stream, 1,
                  logits, experts, k, renormalize, top_experts, top_weights);
  }
}

}  // namespace imp::cuda
