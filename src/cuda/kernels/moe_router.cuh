// Device pieces of the MoE router shared by the router kernels (moe_router.cu) and the fused decode gate/up kernel
// (moe_decode.cu): the selection keys and warp_router, one warp's top-k and softmax of one row.
#pragma once

#include <cstddef>
#include <cstdint>

#include "cuda/kernels/device_math.cuh"

namespace imp::cuda::moe {

// Internal linkage, as when these lived in one .cu file: each kernel file compiles its own copy, and the
// compiler keeps the freedom (calling convention of the noinline router, inlining) the kernels were tuned with.
namespace {

constexpr int kMaxExperts = 4096;
constexpr int kMaxTopK = 16;  // the warp router's and the expert kernels' top-k bound

// Selection runs on logits (softmax is monotonic) with unique 64-bit keys (orderable logit bits << 32 |
// ~expert): a larger key is a larger logit, then a lower expert id, so key order is exactly the reference's
// order (equal logits give equal probabilities; ties to the lower id).
__device__ __forceinline__ uint64_t router_key(float v, int e) {
  uint32_t u = __float_as_uint(v);
  if (u == 0x80000000u) u = 0u;  // -0 == +0, as the reference compares probabilities
  const uint32_t ordered = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
  return (static_cast<uint64_t>(ordered) << 32) | static_cast<uint32_t>(~static_cast<uint32_t>(e));
}

__device__ __forceinline__ float key_logit(uint64_t key) {
  const uint32_t ordered = static_cast<uint32_t>(key >> 32);
  return __uint_as_float((ordered & 0x80000000u) ? (ordered & 0x7fffffffu) : ~ordered);
}

__device__ __forceinline__ int key_expert(uint64_t key) { return static_cast<int>(~static_cast<uint32_t>(key)); }

// The largest of a lane's keys: four interleaved chains, then their maximum (a short dependent chain in few
// registers; a full tree would double the keys' registers and spill at the kernel's 64-register cap).
template <int kPer>
__device__ __forceinline__ uint64_t key_max(const uint64_t (&keys)[kPer]) {
  constexpr int kChains = kPer < 4 ? kPer : 4;
  uint64_t t[kChains];
#pragma unroll
  for (int c = 0; c < kChains; ++c) t[c] = keys[c];
#pragma unroll
  for (int i = kChains; i < kPer; ++i) t[i % kChains] = keys[i] > t[i % kChains] ? keys[i] : t[i % kChains];
#pragma unroll
  for (int c = 1; c < kChains; ++c) t[0] = t[c] > t[0] ? t[c] : t[0];
  return t[0];
}

// Shared memory a warp_router<kPer> needs: 32 lane maxima, kMaxTopK winners, k * kPer candidates.
template <int kPer>
constexpr size_t kRouterScratchBytes = (kWarp + kMaxTopK + kMaxTopK * kPer) * sizeof(uint64_t);

// The router of one row, computed by one warp of every block that needs the choice, so the decode step has
// no router launch. The same keys, order and softmax as router_topk_kernel (the softmax sums combine in another
// order: weights may differ in the last bits). Lane j < k returns choice j (k <= kMaxTopK). The logits are read
// through L2 (__ldcg): they come from the previous kernel. No k serial rounds: tau, the k-th largest of the
// lanes' maxima, is at most the k-th largest key (the k lanes with the largest maxima hold k keys >= tau), so the
// top k are among the keys >= tau (at most k * kPer: only those k lanes have any); they are compacted into
// `scratch` and each is ranked by counting the larger ones. experts >= k, so at least k lanes hold keys.
// kWeights false: the choices only (`weight` is left as it is): the softmax is ~1/4 of the router's time (the phase
// probe, session 15), and only one block of the gate/up kernel needs it (moe_decode_gate_up_kernel).
// Not inlined: inlined, its registers made the gate/up strip's weight loop spill (measured slower, session 6).
template <int kPer, bool kWeights>  // experts per lane: experts <= 32 * kPer
__device__ __noinline__ void warp_router(const float* logits, int experts, int k, bool renormalize, uint64_t* scratch,
                                         int& expert, float& weight) {
  const int lane = threadIdx.x % kWarp;
  uint64_t* const maxima = scratch;       // [32]
  uint64_t* const top = scratch + kWarp;  // [k]
  uint64_t* const cand = top + kMaxTopK;  // [k * kPer]
  // Every load issued before any is used: one round trip to L2, not one per few loads (the keys' selects
  // interleaved with predicated loads made ptxas wait on them in turns, ~3 us of routing per layer).
  float v[kPer];
#pragma unroll
  for (int i = 0; i < kPer; ++i) v[i] = __ldcg(logits + min(lane + i * kWarp, experts - 1));
  uint64_t keys[kPer];  // 0: no key (every real key has a nonzero low word); key_logit gives the logit back
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    const int e = lane + i * kWarp;
    keys[i] = e < experts ? router_key(v[i], e) : 0;
  }
  const uint64_t best = key_max(keys);
  maxima[lane] = best;
  __syncwarp();
  int rank = 0;
#pragma unroll
  for (int o = 0; o < kWarp; ++o) rank += maxima[o] > best;
  const uint64_t tau = __shfl_sync(kFull, best, __ffs(__ballot_sync(kFull, rank == k - 1)) - 1);
  int mine_count = 0;
#pragma unroll
  for (int i = 0; i < kPer; ++i) mine_count += keys[i] >= tau ? 1 : 0;
  int end = mine_count;  // inclusive prefix sum over the lanes
#pragma unroll
  for (int o = 1; o < kWarp; o *= 2) {
    const int t = __shfl_up_sync(kFull, end, o);
    if (lane >= o) end += t;
  }
  const int total = __shfl_sync(kFull, end, kWarp - 1);
  int at = end - mine_count;
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    if (keys[i] >= tau) cand[at++] = keys[i];
  }
  __syncwarp();
  for (int c = lane; c < total; c += kWarp) {
    const uint64_t key = cand[c];
    int above = 0;
    for (int o = 0; o < total; ++o) above += cand[o] > key ? 1 : 0;
    if (above < k) top[above] = key;
  }
  __syncwarp();
  const uint64_t mine = lane < k ? top[lane] : 0;
  expert = lane < k ? key_expert(mine) : 0;
  if constexpr (!kWeights) return;
  // Softmax over every expert: the maximum logit is the first choice's (lane 0), then one sum of exp.
  const float m = key_logit(__shfl_sync(kFull, mine, 0));
  float s = 0.0f;
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    if (keys[i] != 0) s += expf(key_logit(keys[i]) - m);  // -0 came back as +0: the same exp
  }
  s = warp_sum(s);
  const float p = lane < k ? expf(key_logit(mine) - m) / s : 0.0f;
  const float total_p = warp_sum(p);
  weight = renormalize ? p / total_p : p;
}

}  // namespace
}  // namespace imp::cuda::moe
