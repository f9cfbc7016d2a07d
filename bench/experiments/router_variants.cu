// Why did the decode router take 5.1-5.5 us per layer inside the fused gate/up kernel (moe_phase_probe, session 5)?
// It was one warp per block: 16 logits per lane, ten rounds of two redux.sync, and the winning lane rescans its 16
// keys for its next best (a chain of dependent 64-bit compares). Times, per launch of the fused kernel's grid (400
// blocks of 256 threads, warp 0 routing, the rest idle as in moe_decode_gate_up_kernel), in a graph of 48 launches
// over 48 layers' logits:
//   empty      the grid alone
//   loads      warp 0 loads its 16 logits (ldcg) and sums them: the memory part
//   rounds     the session-5 router: warp_topk_rounds (k rounds, the winner rescans its keys)
//   top3       each lane keeps its top 3 keys sorted (one pass); a round's winner shifts them, rescanning its 16
//              keys only when all 3 are used (rare: ~10 wins spread over 32 lanes)
//   tree       the winner's rescan as a 4-level max tree instead of a 16-long chain
//   current    warp_router<16> of moe_router.cuh (this file includes moe_router.cu): threshold from the lanes' maxima, the
//              candidates above it ranked in shared memory, no serial rounds
// Every variant's choices and weights are checked against `rounds` bit for bit on the same logits.
// Build: nvcc -O3 -std=c++20 -gencode=arch=compute_90a,code=sm_90a --expt-relaxed-constexpr -Isrc \
//   bench/experiments/router_variants.cu build/cuda/libimp_cuda.a build/cuda/libimp_lib.a -lcuda -o build/exp/router_variants
#include "cuda/kernels/moe_router.cu"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "cuda/memory/device_buffer.h"

using imp::cuda::DeviceBuffer;
namespace ic = imp::cuda;

namespace {

constexpr int kExperts = 512, kK = 10, kPer = 16, kLayers = 48, kBlocks = 400, kThreads = 256;

// The softmax and output of warp_router, shared by the variants (mine: lane j < k holds choice j).
__device__ __forceinline__ void finish(const float (&v)[kPer], uint64_t mine, int& expert, float& weight) {
  const int lane = threadIdx.x % ic::kWarp;
  const float m = ic::key_logit(__shfl_sync(0xffffffffu, mine, 0));
  float s = 0.0f;
#pragma unroll
  for (int i = 0; i < kPer; ++i) s += expf(v[i] - m);
  s = ic::warp_sum(s);
  const float p = lane < kK ? expf(ic::key_logit(mine) - m) / s : 0.0f;
  const float total = ic::warp_sum(p);
  expert = lane < kK ? ic::key_expert(mine) : 0;
  weight = p / total;
}

__device__ __forceinline__ void load_keys(const float* logits, float (&v)[kPer], uint64_t (&keys)[kPer]) {
  const int lane = threadIdx.x % ic::kWarp;
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    v[i] = __ldcg(logits + lane + i * ic::kWarp);
    keys[i] = ic::router_key(v[i], lane + i * ic::kWarp);
  }
}

__device__ __forceinline__ uint64_t warp_max_key(uint64_t best) {
  const uint32_t hi = __reduce_max_sync(0xffffffffu, static_cast<uint32_t>(best >> 32));
  const uint32_t lo = __reduce_max_sync(0xffffffffu, static_cast<uint32_t>(best >> 32) == hi ? static_cast<uint32_t>(best) : 0u);
  return (static_cast<uint64_t>(hi) << 32) | lo;
}

__device__ void route_rounds(const float* logits, int& expert, float& weight) {
  const int lane = threadIdx.x % ic::kWarp;
  float v[kPer];
  uint64_t keys[kPer];
  load_keys(logits, v, keys);
  uint64_t best = 0;
#pragma unroll
  for (int i = 0; i < kPer; ++i) best = keys[i] > best ? keys[i] : best;
  uint64_t mine = 0;
  ic::warp_topk_rounds(keys, best, kK, [&](int j, uint64_t win) {
    if (lane == j) mine = win;
  });
  finish(v, mine, expert, weight);
}

__device__ void route_top3(const float* logits, int& expert, float& weight) {
  const int lane = threadIdx.x % ic::kWarp;
  float v[kPer];
  uint64_t keys[kPer];
  load_keys(logits, v, keys);
  uint64_t a = 0, b = 0, c = 0;  // a > b > c: the lane's three largest keys
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    const uint64_t x = keys[i];
    const bool ga = x > a, gb = x > b, gc = x > c;
    c = gb ? b : (gc ? x : c);
    b = ga ? a : (gb ? x : b);
    a = ga ? x : a;
  }
  uint64_t mine = 0;
  for (int j = 0; j < kK; ++j) {
    const uint64_t win = warp_max_key(a);
    if (lane == j) mine = win;
    if (win != 0 && a == win) {
      a = b;
      b = c;
      c = 0;
      if (a == 0) {  // all three used: rescan for the largest key below win
#pragma unroll
        for (int i = 0; i < kPer; ++i) a = keys[i] < win && keys[i] > a ? keys[i] : a;
      }
    }
  }
  finish(v, mine, expert, weight);
}

__device__ void route_tree(const float* logits, int& expert, float& weight) {
  const int lane = threadIdx.x % ic::kWarp;
  float v[kPer];
  uint64_t keys[kPer];
  load_keys(logits, v, keys);
  uint64_t best = 0;
#pragma unroll
  for (int i = 0; i < kPer; ++i) best = keys[i] > best ? keys[i] : best;
  uint64_t mine = 0;
  for (int j = 0; j < kK; ++j) {
    const uint64_t win = warp_max_key(best);
    if (lane == j) mine = win;
    if (win != 0 && best == win) {
      uint64_t t[kPer];
#pragma unroll
      for (int i = 0; i < kPer; ++i) t[i] = keys[i] < win ? keys[i] : 0;
#pragma unroll
      for (int w = kPer / 2; w > 0; w /= 2) {
#pragma unroll
        for (int i = 0; i < w; ++i) t[i] = t[i] > t[i + w] ? t[i] : t[i + w];
      }
      best = t[0];
    }
  }
  finish(v, mine, expert, weight);
}

enum Variant { kEmpty, kLoads, kRounds, kCurrent, kTop3, kTree };

template <Variant V>
__global__ void __launch_bounds__(kThreads, 4) router_grid(const float* logits, int32_t* experts, float* weights) {
  __shared__ int chosen;
  __shared__ uint64_t scratch[ic::kRouterScratchBytes<kPer> / sizeof(uint64_t)];
  if (threadIdx.x < ic::kWarp) {
    int e = 0;
    float w = 0.0f;
    if constexpr (V == kLoads) {
      float s = 0.0f;
      for (int i = 0; i < kPer; ++i) s += __ldcg(logits + threadIdx.x + i * ic::kWarp);
      e = static_cast<int>(ic::warp_sum(s));
    } else if constexpr (V == kRounds) {
      route_rounds(logits, e, w);
    } else if constexpr (V == kCurrent) {
      ic::warp_router<kPer, true>(logits, kExperts, kK, true, scratch, e, w);
    } else if constexpr (V == kTop3) {
      route_top3(logits, e, w);
    } else if constexpr (V == kTree) {
      route_tree(logits, e, w);
    }
    if (threadIdx.x == blockIdx.y) chosen = e;
    if (blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x < kK) {
      experts[threadIdx.x] = e;
      weights[threadIdx.x] = w;
    }
  }
  __syncthreads();
  if (threadIdx.x == 0 && chosen == -1) experts[kK] = chosen;  // keeps the block's wait on the router
}

template <Variant V>
double us_per_launch(const float* logits, int32_t* experts, float* weights, cudaStream_t stream) {
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  IMP_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  for (int l = 0; l < kLayers; ++l) {
    router_grid<V><<<dim3(kBlocks / kK, kK), kThreads, 0, stream>>>(logits + static_cast<size_t>(l) * kExperts,
                                                                    experts + static_cast<size_t>(l) * (kK + 1),
                                                                    weights + static_cast<size_t>(l) * kK);
  }
  IMP_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  IMP_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  cudaEvent_t a, b;
  IMP_CUDA_CHECK(cudaEventCreate(&a));
  IMP_CUDA_CHECK(cudaEventCreate(&b));
  std::vector<float> times;
  for (int r = 0; r < 7; ++r) {
    IMP_CUDA_CHECK(cudaEventRecord(a, stream));
    IMP_CUDA_CHECK(cudaGraphLaunch(exec, stream));
    IMP_CUDA_CHECK(cudaEventRecord(b, stream));
    IMP_CUDA_CHECK(cudaEventSynchronize(b));
    float ms = 0;
    IMP_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    if (r > 0) times.push_back(ms * 1000.0f / kLayers);
  }
  std::sort(times.begin(), times.end());
  IMP_CUDA_CHECK(cudaGraphExecDestroy(exec));
  IMP_CUDA_CHECK(cudaGraphDestroy(graph));
  return times[times.size() / 2];
}

}  // namespace

int main() {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> host(static_cast<size_t>(kLayers) * kExperts);
  for (float& v : host) v = normal(rng);
  for (int l = 1; l < kLayers; l += 2) {  // odd layers: integer logits, so many keys tie on the logit
    for (int e = 0; e < kExperts; ++e) host[static_cast<size_t>(l) * kExperts + e] = std::round(host[static_cast<size_t>(l) * kExperts + e]);
  }
  DeviceBuffer<float> logits(host);
  DeviceBuffer<int32_t> experts(static_cast<size_t>(kLayers) * (kK + 1)), want_e(static_cast<size_t>(kLayers) * (kK + 1));
  DeviceBuffer<float> weights(static_cast<size_t>(kLayers) * kK), want_w(static_cast<size_t>(kLayers) * kK);
  for (int32_t* p : {experts.data(), want_e.data()}) IMP_CUDA_CHECK(cudaMemset(p, 0, experts.size() * sizeof(int32_t)));
  cudaStream_t stream;
  IMP_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  std::printf("empty   %.2f us\n", us_per_launch<kEmpty>(logits.data(), experts.data(), weights.data(), stream));
  std::printf("loads   %.2f us\n", us_per_launch<kLoads>(logits.data(), experts.data(), weights.data(), stream));
  std::printf("rounds  %.2f us\n", us_per_launch<kRounds>(logits.data(), want_e.data(), want_w.data(), stream));
  const std::vector<int32_t> ref_e = want_e.download();
  const std::vector<float> ref_w = want_w.download();
  auto check = [&](const char* name) {
    const bool same = experts.download() == ref_e && weights.download() == ref_w;
    std::printf("%-7s choices and weights %s\n", name, same ? "identical to rounds" : "DIFFER from rounds");
    return same;
  };
  std::printf("top3    %.2f us\n", us_per_launch<kTop3>(logits.data(), experts.data(), weights.data(), stream));
  bool ok = check("top3");
  std::printf("tree    %.2f us\n", us_per_launch<kTree>(logits.data(), experts.data(), weights.data(), stream));
  ok = check("tree") && ok;
  std::printf("current %.2f us\n", us_per_launch<kCurrent>(logits.data(), experts.data(), weights.data(), stream));
  ok = check("current") && ok;
  return ok ? 0 : 1;
}
