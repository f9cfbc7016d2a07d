#include "cuda/kernels/qsa.h"

#include <cooperative_groups.h>

#include "cuda/check.h"
#include "cuda/launch.h"
#include "cuda/kernels/device_math.cuh"
#include "cuda/kernels/fp_codes.cuh"
#include "cuda/kernels/head_norm_rope.cuh"
#include "cuda/kernels/qsa_block_key.cuh"

namespace imp::cuda {
namespace {

constexpr int kThreads = 1024;

// Per-block timestamps (globaltimer, thread 0) for bench/experiments/qsa_select_phase_probe.cu, which compiles this
// file with IMP_PHASE_PROBE: rows 0..7 the cluster selection's blocks (step i), rows 8.. the score kernel's blocks
// (step 0: its end); no-ops otherwise.
#ifdef IMP_PHASE_PROBE
__device__ unsigned long long g_qsa_phase[8 + 128][8];
__device__ __forceinline__ void qsa_phase(int row, int i) {
  if (threadIdx.x != 0) return;
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  g_qsa_phase[row][i] = t;
}
#else
__device__ __forceinline__ void qsa_phase(int, int) {}
#endif
constexpr int kScoreThreads = 256;
constexpr int kScoreBlocks = 128;  // 1024 warps: 8 block keys each at 32K context (two batches)

// One warp per block key.
__global__ void qsa_block_keys_kernel(const float* raw_keys, int first_block, int last_block, int ratio, int dim,
                                      const uint16_t* k_norm, float eps, int rotary_dim, const float* inv_freq,
                                      float* block_keys) {
  pdl_begin();
  const int lane = threadIdx.x % kWarp;
  const int b = first_block + blockIdx.x * (blockDim.x / kWarp) + threadIdx.x / kWarp;
  if (b >= last_block) return;
  write_block_key(raw_keys, b, ratio, dim, k_norm, eps, rotary_dim, inv_freq, block_keys, lane);
}

// Order-preserving map of a float to an unsigned key (larger float -> larger key).
__device__ __forceinline__ uint32_t order_key(float f) {
  const uint32_t bits = __float_as_uint(f);
  return (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
}

constexpr int kMaxIndexHeads = kQsaMaxIndexHeads;
static_assert(kMaxIndexHeads <= kScoreThreads / kWarp, "the decode score kernel norms one query head per warp");
constexpr int kKeyLanes = kQsaMaxIndexDim / kWarp;  // a lane's elements of a key: lane, lane + 32, ...
static_assert(kKeyLanes * kWarp == kQsaMaxIndexDim, "whole lanes");

// A lane's elements of an index vector (zero past dim).
__device__ __forceinline__ void load_lanes(const float* v, int dim, int lane, float (&out)[kKeyLanes]) {
#pragma unroll
  for (int j = 0; j < kKeyLanes; ++j) out[j] = lane + j * kWarp < dim ? v[lane + j * kWarp] : 0.0f;
}
__device__ __forceinline__ void load_query_lanes(const float* queries, int heads, int dim, int lane,
                                                 float (&q)[kMaxIndexHeads][kKeyLanes]) {
#pragma unroll
  for (int h = 0; h < kMaxIndexHeads; ++h) {
    if (h < heads) load_lanes(queries + h * dim, dim, lane, q[h]);
  }
}

// One block key's score before the 1/sqrt(dim) scale, by one warp from the lanes' elements: lane-strided dot
// per head, warp sum, relu, sum over heads (decode).
__device__ __forceinline__ float block_score(const float (&q)[kMaxIndexHeads][kKeyLanes], int heads, int dim,
                                             const float (&key)[kKeyLanes], int lane) {
  float score = 0.0f;
#pragma unroll
  for (int h = 0; h < kMaxIndexHeads; ++h) {
    if (h >= heads) break;
    float dot = 0.0f;
#pragma unroll
    for (int j = 0; j < kKeyLanes; ++j) {
      if (lane + j * kWarp < dim) dot += q[h][j] * key[j];
    }
    score += fmaxf(0.0f, warp_sum(dot));
  }
  return score;
}

// The scores of block keys first, first + stride, ... < blocks by one warp, kScoreBatch keys loaded together
// (a loop of one key per round trip took ~13 us at 32K context): store(b, score before the 1/sqrt(dim) scale).
// 4 rather than 8: the decode kernel's 109 -> 80 registers, decode at 1K +0.1% in four visits (its 127 blocks that
// exit at once within the budget become resident sooner beside the in-projection GEMV), 32K unchanged (session 37).
constexpr int kScoreBatch = 4;
template <class Store>
__device__ __forceinline__ void score_blocks(const float (&q)[kMaxIndexHeads][kKeyLanes], int heads, int dim,
                                             const float* block_keys, int first, int stride, int blocks, int lane,
                                             Store store) {
  for (int b0 = first; b0 < blocks; b0 += stride * kScoreBatch) {
    float key[kScoreBatch][kKeyLanes];
#pragma unroll
    for (int u = 0; u < kScoreBatch; ++u) {
      if (b0 + u * stride < blocks) load_lanes(block_keys + static_cast<size_t>(b0 + u * stride) * dim, dim, lane, key[u]);
    }
#pragma unroll
    for (int u = 0; u < kScoreBatch; ++u) {
      if (b0 + u * stride >= blocks) break;
      store(b0 + u * stride, block_score(q, heads, dim, key[u], lane));
    }
  }
}

// Scores, spread over the grid: one warp per block key (warp-strided over every warp of the grid: 8 keys per
// warp, two batches, at 32K context), queries in registers. Prefill's per-row selection (launch_qsa_select); the
// first batch of keys is loaded before the PDL wait, which is a no-op there, and every key but the newest is final
// at launch in any case.
__global__ void __launch_bounds__(kScoreThreads) qsa_score_kernel(const float* queries, int heads, int dim,
                                                                  const float* block_keys, const int32_t* positions,
                                                                  int ratio, int block_topk, float* scores) {
  const int blocks = (positions[0] + 1) / ratio;
  const int lane = threadIdx.x % kWarp;
  const int warps = gridDim.x * (kScoreThreads / kWarp);
  const int first = blockIdx.x * (kScoreThreads / kWarp) + static_cast<int>(threadIdx.x) / kWarp;
  float key[kScoreBatch][kKeyLanes];
  const bool scoring = blocks > block_topk;  // else every block is kept: the selection reads no score
#pragma unroll
  for (int u = 0; u < kScoreBatch; ++u) {
    const int b = first + u * warps;
    if (scoring && b < blocks - 1) load_lanes(block_keys + static_cast<size_t>(b) * dim, dim, lane, key[u]);
  }
  pdl_wait();  // every thread, so the kernels after this one still find every earlier kernel complete
  pdl_trigger();
  if (!scoring) return;
  const float inv_sqrt_dim = rsqrtf(static_cast<float>(dim));
  float q[kMaxIndexHeads][kKeyLanes];
  load_query_lanes(queries, heads, dim, lane, q);
  auto store = [&](int b, float score) {
    if (lane == 0) scores[b] = score * inv_sqrt_dim;
  };
#pragma unroll
  for (int u = 0; u < kScoreBatch; ++u) {
    const int b = first + u * warps;
    if (b == blocks - 1) load_lanes(block_keys + static_cast<size_t>(b) * dim, dim, lane, key[u]);
  }
#pragma unroll
  for (int u = 0; u < kScoreBatch; ++u) {
    const int b = first + u * warps;
    if (b >= blocks) break;
    store(b, block_score(q, heads, dim, key[u], lane));
  }
  score_blocks(q, heads, dim, block_keys, first + kScoreBatch * warps, warps, blocks, lane, store);  // longer contexts
  if (blockIdx.x < 128) qsa_phase(8 + blockIdx.x, 0);
}

// Decode: the token's index prep folded into the scores (launch_qsa_decode_select). Every block's warps h < heads
// normalise and rotate query head h into shared memory (norm_rope_head: the bits of launch_head_norm_rope); block
// 0's warp `heads` (warp 0, after its query head, at 8 heads) appends the raw key and, when this token completes a
// block, writes that block's key, which block 0's warp 0 scores after the barrier (the other blocks skip it). Keys
// of older blocks are final at launch (this kernel follows the index GEMV), so the first batch is loaded before the
// wait. Within the budget no score is read: only block 0 runs, for the raw key and the block key (the other
// blocks' prep cost 0.5% of decode at 1K).
__global__ void __launch_bounds__(kScoreThreads) qsa_prep_score_kernel(QsaDecodeIndex p, int block_topk,
                                                                       float* scores) {
  __shared__ float q_s[kMaxIndexHeads][kQsaMaxIndexDim], gain_s[kMaxIndexHeads][kQsaMaxIndexDim];
  const int dim = p.dim, heads = p.heads;
  const int position = p.positions[0], blocks = (position + 1) / p.ratio;
  const bool completes = (position + 1) % p.ratio == 0;
  const int newest = completes ? blocks - 1 : -1;  // the block whose key this kernel writes
  const int lane = threadIdx.x % kWarp, warp = static_cast<int>(threadIdx.x) / kWarp;
  const int warps = gridDim.x * (kScoreThreads / kWarp);
  const int first = blockIdx.x * (kScoreThreads / kWarp) + warp;
  float key[kScoreBatch][kKeyLanes];
  const bool scoring = blocks > block_topk;  // else every block is kept: the selection reads no score
  if (!scoring && blockIdx.x != 0) return;  // block 0 still appends the raw key and writes the newest block key
#pragma unroll
  for (int u = 0; u < kScoreBatch; ++u) {
    const int b = first + u * warps;
    if (scoring && b < blocks && b != newest) load_lanes(p.block_keys + static_cast<size_t>(b) * dim, dim, lane, key[u]);
  }
  pdl_wait();  // the index GEMV's output
  pdl_trigger();
  if (scoring && warp < heads) {
    norm_rope_head(p.index + static_cast<size_t>(warp) * dim, p.q_norm, dim, p.rotary_dim, static_cast<float>(position),
                   p.inv_freq, p.eps, q_s[warp], gain_s[warp], lane);
  }
  if (blockIdx.x == 0 && warp == heads % (kScoreThreads / kWarp)) {  // with 8 heads warp 0, after its query head
    float raw[kHeadLanes];
    load_head_lanes(p.index + static_cast<size_t>(heads) * dim, dim, lane, raw);
#pragma unroll
    for (int j = 0; j < kHeadLanes; ++j) {
      if (lane + j * kWarp < dim) p.raw_keys[static_cast<size_t>(position) * dim + lane + j * kWarp] = raw[j];
    }
    __syncwarp();  // the block key reads the row just written by the other lanes
    if (completes) {
      write_block_key(p.raw_keys, newest, p.ratio, dim, p.k_norm, p.eps, p.rotary_dim, p.inv_freq, p.block_keys, lane);
    }
  }
  __syncthreads();  // the queries in shared memory, block 0's newest key in global memory
  if (!scoring) return;
  const float inv_sqrt_dim = rsqrtf(static_cast<float>(dim));
  float q[kMaxIndexHeads][kKeyLanes];
#pragma unroll
  for (int h = 0; h < kMaxIndexHeads; ++h) {
    if (h < heads) load_lanes(q_s[h], dim, lane, q[h]);
  }
  auto store = [&](int b, float score) {
    if (lane == 0 && b != newest) scores[b] = score * inv_sqrt_dim;
  };
#pragma unroll
  for (int u = 0; u < kScoreBatch; ++u) {
    const int b = first + u * warps;
    if (b >= blocks) break;
    if (b != newest) store(b, block_score(q, heads, dim, key[u], lane));
  }
  score_blocks(q, heads, dim, p.block_keys, first + kScoreBatch * warps, warps, blocks, lane, store);  // longer contexts
  if (blockIdx.x == 0 && warp == 0 && completes) {
    float k_new[kKeyLanes];
    load_lanes(p.block_keys + static_cast<size_t>(newest) * dim, dim, lane, k_new);
    const float score = block_score(q, heads, dim, k_new, lane);
    if (lane == 0) scores[newest] = score * inv_sqrt_dim;
  }
}

// kVec floats at p (16-byte aligned for kVec = 4).
template <int kVec>
__device__ __forceinline__ void load_vec(const float* p, float (&out)[kVec]) {
  if constexpr (kVec == 4) {
    const float4 v = *reinterpret_cast<const float4*>(p);
    out[0] = v.x, out[1] = v.y, out[2] = v.z, out[3] = v.w;
  } else {
    out[0] = *p;
  }
}

// The prefill rows kernel scores a lane per block key: per head the dot product over the key's elements in
// order (one fmaf each), relu, the sum over the heads in order. One lane holding a whole dot product needs no
// cross-lane sums: block_score's warp per key with shuffle sums took ~125 warp instructions per (row, key) there,
// a short-scoreboard stall on the shuffles its top stall (session 17, Nsight Compute: 497 us per layer at 4096
// tokens). Decode keeps block_score: a lane per key there, its 32 loads and 512 fmaf in one lane's chain, made
// decode at 32K context 1.9% slower (session 17). The two orders of summation may differ in the last bits of a
// score, so the two paths' selections may differ only where the CPU's may too, at near-exact ties.
// dot[h] += q[h, e0 .. e1) . key[e0 .. e1) (e0, e1 multiples of kVec; q [heads][dim] in shared memory, every lane
// reading the same address: a broadcast); key(e, k) loads the key's elements e .. e + kVec into k.
template <int kVec, class Key>
__device__ __forceinline__ void accumulate_dots(const float* q, int heads, int dim, int e0, int e1, Key key,
                                                float (&dot)[kMaxIndexHeads]) {
  for (int e = e0; e < e1; e += kVec) {
    float k[kVec];
    key(e, k);
#pragma unroll
    for (int h = 0; h < kMaxIndexHeads; ++h) {
      if (h < heads) {
        float v[kVec];
        load_vec<kVec>(q + h * dim + e, v);
#pragma unroll
        for (int i = 0; i < kVec; ++i) dot[h] = fmaf(v[i], k[i], dot[h]);
      }
    }
  }
}
// The score before the 1/sqrt(dim) scale.
__device__ __forceinline__ float heads_score(const float (&dot)[kMaxIndexHeads], int heads) {
  float score = 0.0f;
#pragma unroll
  for (int h = 0; h < kMaxIndexHeads; ++h) {
    if (h < heads) score += fmaxf(0.0f, dot[h]);
  }
  return score;
}

// Exclusive prefix sum of v over the block (blockDim.x == kBlockThreads); total gets the block's sum.
// scratch: kBlockThreads / kWarp + 1 ints. Every thread must call it.
template <int kBlockThreads>
__device__ __forceinline__ int block_exclusive_scan(int v, int* scratch, int& total) {
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  int inclusive = v;
  for (int o = 1; o < kWarp; o *= 2) {
    const int t = __shfl_up_sync(0xffffffffu, inclusive, o);
    if (lane >= o) inclusive += t;
  }
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == kWarp - 1) scratch[warp] = inclusive;
  __syncthreads();
  if (warp == 0) {
    const int w = lane < kBlockThreads / kWarp ? scratch[lane] : 0;
    int wi = w;
    for (int o = 1; o < kWarp; o *= 2) {
      const int t = __shfl_up_sync(0xffffffffu, wi, o);
      if (lane >= o) wi += t;
    }
    __syncwarp();
    if (lane < kBlockThreads / kWarp) scratch[lane] = wi - w;
    if (lane == kWarp - 1) scratch[kBlockThreads / kWarp] = wi;
  }
  __syncthreads();
  total = scratch[kBlockThreads / kWarp];
  return scratch[warp] + inclusive - v;
}

// One radix pass's choice, by warp 0 once the pass's histogram (the digits at bit `shift` of the keys matching
// prefix) is complete: the highest digit whose count from the top reaches `remaining` (as a walk down from digit
// 255 would find) goes into prefix, and remaining becomes the count still needed within it. Lane l holds digits
// 255 - 8l .. 248 - 8l; a warp scan gives the counts above each lane.
__device__ __forceinline__ void pick_digit(const uint32_t* histogram, int shift, uint32_t& prefix,
                                           uint32_t& remaining, uint32_t* whole = nullptr) {
  const int lane = threadIdx.x % kWarp;
  const uint32_t need = remaining;
  __syncwarp();
  uint32_t local[8], sum = 0;
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    local[j] = histogram[255 - (lane * 8 + j)];
    sum += local[j];
  }
  uint32_t inclusive = sum;
  for (int o = 1; o < kWarp; o *= 2) {
    const uint32_t t = __shfl_up_sync(0xffffffffu, inclusive, o);
    if (lane >= o) inclusive += t;
  }
  const uint32_t before = inclusive - sum;
  if (before < need && need <= inclusive) {  // exactly one lane
    uint32_t n = need - before;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      if (local[j] >= n) {
        prefix |= static_cast<uint32_t>(255 - (lane * 8 + j)) << shift;
        remaining = n;
        if (whole != nullptr) *whole = local[j] == n;  // every key of the digit is kept: no further pass needed
        break;
      }
      n -= local[j];
    }
  }
}

// Radix select over count keys (key(i): order-preserving uint32) of the keep-th largest, 8 bits at a time
// from the top. On return (all threads, after a barrier) prefix is that key and remaining the number of
// keys equal to it that belong to the keep largest (the rest of them being larger). Every thread must call
// it; histogram: 256 shared words; prefix, remaining: shared.
template <class Key>
__device__ __forceinline__ void radix_threshold(Key key, int count, int keep, uint32_t* histogram, uint32_t& prefix,
                                                uint32_t& remaining) {
  const int warp = threadIdx.x / kWarp;
  if (threadIdx.x == 0) {
    prefix = 0;
    remaining = static_cast<uint32_t>(keep);
  }
  for (int shift = 24; shift >= 0 && keep > 0; shift -= 8) {
    for (int i = threadIdx.x; i < 256; i += blockDim.x) histogram[i] = 0;
    __syncthreads();
    const uint32_t mask = shift == 24 ? 0u : (0xffffffffu << (shift + 8));
    for (int b = threadIdx.x; b < count; b += blockDim.x) {
      const uint32_t k = key(b);
      if ((k & mask) == (prefix & mask)) atomicAdd(&histogram[(k >> shift) & 0xffu], 1u);
    }
    __syncthreads();
    if (warp == 0) pick_digit(histogram, shift, prefix, remaining);
    __syncthreads();
  }
  __syncthreads();  // prefix and remaining as set by thread 0 when keep == 0
}

// Every block and the tail: all visible tokens, in order (no scores were written when blocks <= block_topk).
__device__ __forceinline__ void select_all_tokens(int visible, int32_t* selected, int32_t* selected_count) {
  for (int t = threadIdx.x; t < visible; t += blockDim.x) selected[t] = t;
  if (threadIdx.x == 0) *selected_count = visible;
}

// The selection over the scores written by qsa_score_kernel spread over a cluster of kSelectCluster blocks (one
// block alone, qsa_select_kernel, took 12.8 us at 32K context under Nsight Compute, session 27: 44K warp
// instructions on one SM at ~2 per cycle, ~40% of them the passes' count loop with a dependent L2 load per
// key). Block `rank` owns the rank-th contiguous range of blocks, its order keys in shared memory (loaded once, all
// loads of a thread in flight together); each pass counts the block's keys into its histogram, the cluster
// barrier completes them all, and every block sums the kSelectCluster histograms through distributed shared memory
// and picks the digit itself (the same sums, so the same prefix everywhere). The output slots: exclusive scans
// within the block plus the lower ranks' totals, exchanged the same way. The same result as qsa_select_kernel
// (decode at 32K context +0.5%, session 27).
constexpr int kSelectCluster = 8;        // the portable cluster limit
constexpr int kClusterThreads = 256;     // one histogram bin per thread
constexpr int kClusterKeys = 2048;       // keys per block: 16384 blocks per cluster (64K tokens at ratio 4)
static_assert(kClusterThreads == 256, "one histogram bin per thread");
__global__ void __cluster_dims__(kSelectCluster, 1, 1) __launch_bounds__(kClusterThreads)
    qsa_select_cluster_kernel(const int32_t* positions, int ratio, int block_topk, const float* scores,
                              int32_t* selected, int32_t* selected_count) {
  qsa_phase(blockIdx.x % 8, 0);
  pdl_begin();
  qsa_phase(blockIdx.x % 8, 1);
  namespace cg = cooperative_groups;
  __shared__ uint32_t keys[kClusterKeys];
  __shared__ uint32_t histogram[2][256], merged[256];  // histograms by pass parity: see the clear below
  __shared__ uint32_t prefix, remaining, whole;
  __shared__ int totals[2];  // this block's ties and kept blocks, read by the higher ranks
  __shared__ int scan_scratch[kClusterThreads / kWarp + 1];
  const cg::cluster_group cluster = cg::this_cluster();
  const int rank = static_cast<int>(cluster.block_rank()), tid = threadIdx.x, warp = tid / kWarp;
  const int visible = positions[0] + 1, blocks = visible / ratio;
  const int keep = min(block_topk, blocks);  // blocks kept before the tail
  if (blocks <= block_topk) {  // uniform over the cluster, which then touches no shared memory of another block
    if (rank == 0) select_all_tokens(visible, selected, selected_count);
    return;
  }
  const int chunk = (blocks + kSelectCluster - 1) / kSelectCluster;  // <= kClusterKeys (launch_qsa_select)
  const int first = min(blocks, rank * chunk), count = min(blocks, first + chunk) - first;
  {
    constexpr int kPer = kClusterKeys / kClusterThreads;
    float v[kPer];
#pragma unroll
    for (int u = 0; u < kPer; ++u) {
      const int i = tid + u * kClusterThreads;
      v[u] = i < count ? scores[first + i] : 0.0f;
    }
#pragma unroll
    for (int u = 0; u < kPer; ++u) {
      const int i = tid + u * kClusterThreads;
      if (i < count) keys[i] = order_key(v[u]);
    }
  }
  qsa_phase(rank, 2);
  if (tid == 0) {
    prefix = 0;
    remaining = static_cast<uint32_t>(keep);
    whole = 0;
  }
  // The bits of a key the threshold covers: all 32 after the last pass, fewer when a pass's digit is kept whole
  // (its count is exactly `remaining`): then every key matching the prefix so far is kept and no tie remains. The
  // same kept set and order as the full passes; every block of the cluster sees the same histogram, so all stop
  // together.
  uint32_t decided = 0xffffffffu;
  for (int shift = 24, pass = 0; shift >= 0 && keep > 0; shift -= 8, ++pass) {
    // The other blocks read this histogram two passes ago, before the last pass's cluster barrier, which this
    // block has passed: clearing it now is safe.
    uint32_t* hist = histogram[pass & 1];
    hist[tid] = 0;
    __syncthreads();  // also the keys and prefix
    const uint32_t mask = shift == 24 ? 0u : (0xffffffffu << (shift + 8)), want = prefix & mask;
    for (int i = tid; i < count; i += kClusterThreads) {
      const uint32_t k = keys[i];
      if ((k & mask) == want) atomicAdd(&hist[(k >> shift) & 0xffu], 1u);
    }
    cluster.sync();  // every block's histogram of this pass is complete
    uint32_t sum = 0;
#pragma unroll
    for (int r = 0; r < kSelectCluster; ++r) sum += cluster.map_shared_rank(hist, r)[tid];
    merged[tid] = sum;
    __syncthreads();
    if (warp == 0) pick_digit(merged, shift, prefix, remaining, &whole);
    __syncthreads();
    qsa_phase(rank, 3 + pass);
    if (whole) {
      decided = 0xffffffffu << shift;
      break;
    }
  }
  // prefix is the threshold key; `remaining` ties at it are kept, lowest block first. Each thread owns a
  // contiguous run of the block's range; the runs and ranks are in block order.
  const uint32_t threshold = prefix;
  const int per = (count + kClusterThreads - 1) / kClusterThreads;
  const int b_begin = min(count, tid * per), b_end = min(count, b_begin + per);
  int above = 0, ties = 0;
  for (int i = b_begin; i < b_end && keep > 0; ++i) {
    above += (keys[i] & decided) > threshold;
    ties += (keys[i] & decided) == threshold;
  }
  int block_ties = 0, block_kept = 0;
  int ties_before = block_exclusive_scan<kClusterThreads>(ties, scan_scratch, block_ties);
  if (tid == 0) totals[0] = block_ties;
  cluster.sync();
  for (int r = 0; r < rank; ++r) ties_before += *cluster.map_shared_rank(&totals[0], r);
  int allowed = max(0, min(ties, static_cast<int>(remaining) - ties_before));
  int slot = block_exclusive_scan<kClusterThreads>(above + allowed, scan_scratch, block_kept);
  if (tid == 0) totals[1] = block_kept;
  cluster.sync();
  int kept_total = 0;
#pragma unroll
  for (int r = 0; r < kSelectCluster; ++r) {
    const int t = *cluster.map_shared_rank(&totals[1], r);
    if (r < rank) slot += t;
    kept_total += t;
  }
  if (rank == 0 && tid == 0) {
    const int tail = visible - blocks * ratio;
    for (int p = 0; p < tail; ++p) selected[kept_total * ratio + p] = blocks * ratio + p;
    *selected_count = kept_total * ratio + tail;
  }
  for (int i = b_begin; i < b_end && keep > 0; ++i) {
    const uint32_t key = keys[i] & decided;
    if (key > threshold || (key == threshold && allowed-- > 0)) {
      for (int r = 0; r < ratio; ++r) selected[slot * ratio + r] = (first + i) * ratio + r;
      ++slot;
    }
  }
  cluster.sync();  // the remote reads are done before any block exits
  qsa_phase(rank, 7);
}

// The selection for contexts beyond the cluster's keys (one block, the scores read from L2 in every pass).
__global__ void __launch_bounds__(kThreads) qsa_select_kernel(const int32_t* positions, int ratio, int block_topk,
                                                             const float* scores, int32_t* selected,
                                                             int32_t* selected_count) {
  pdl_begin();
  __shared__ uint32_t histogram[256];
  __shared__ uint32_t prefix, remaining;
  __shared__ int scan_scratch[kThreads / kWarp + 1];
  const int visible = positions[0] + 1, blocks = visible / ratio;
  const int keep = min(block_topk, blocks);  // blocks kept before the tail
  if (blocks <= block_topk) {
    select_all_tokens(visible, selected, selected_count);
    return;
  }

  radix_threshold([&](int b) { return order_key(scores[b]); }, blocks, keep, histogram, prefix, remaining);
  // prefix is the threshold key; `remaining` ties at it are kept, lowest block first. Each thread owns a
  // contiguous run of blocks; prefix sums over the runs give every kept block its output slot.
  const int per_thread = (blocks + blockDim.x - 1) / blockDim.x;
  const int b_begin = min(blocks, static_cast<int>(threadIdx.x) * per_thread), b_end = min(blocks, b_begin + per_thread);
  int above = 0, ties = 0;
  for (int b = b_begin; b < b_end && keep > 0; ++b) {
    const uint32_t key = order_key(scores[b]);
    above += key > prefix;
    ties += key == prefix;
  }
  // Exclusive scans; ties become "ties this thread may keep" (the first `remaining` ties in block order).
  int ties_total = 0, kept_total = 0;
  const int ties_before = block_exclusive_scan<kThreads>(ties, scan_scratch, ties_total);
  int allowed = max(0, min(ties, static_cast<int>(remaining) - ties_before));
  int slot = block_exclusive_scan<kThreads>(above + allowed, scan_scratch, kept_total);
  if (threadIdx.x == 0) {
    const int tail = visible - blocks * ratio;
    for (int p = 0; p < tail; ++p) selected[kept_total * ratio + p] = blocks * ratio + p;
    *selected_count = kept_total * ratio + tail;
  }
  for (int b = b_begin; b < b_end && keep > 0; ++b) {
    const uint32_t key = order_key(scores[b]);
    if (key > prefix || (key == prefix && allowed-- > 0)) {
      for (int r = 0; r < ratio; ++r) selected[slot * ratio + r] = b * ratio + r;
      ++slot;
    }
  }
}

constexpr int kRowThreads = 512;
// The most dynamic shared memory a select-rows block takes: of the H200's 227 KB per block, the kernel's static
// arrays take ~1 KB (227 KB of dynamic memory on top is refused).
constexpr int kRowSmemBytes = 220 * 1024;
// Keys are staged a warp at a time: 32 keys (a lane each) x 32 elements, loaded coalesced; a staged key takes
// kStageStride floats, so a lane's 16-byte reads of its own key fall in distinct banks in each phase of 8 lanes.
constexpr int kStageElements = 32, kStageStride = kStageElements + 4;
constexpr int kStageFloats = (kRowThreads / kWarp) * kWarp * kStageStride;

// Many rows (prefill), one block of threads per row: the row's queries, its blocks' order keys and the warps'
// key stages in shared memory; the scores a lane per key (accumulate_dots), the radix select of
// qsa_select_kernel, written as the row's bitmap (launch_qsa_select_rows).
__global__ void __launch_bounds__(kRowThreads) qsa_select_rows_kernel(const float* queries, int heads, int dim,
                                                                      const float* block_keys, const int32_t* positions,
                                                                      int ratio, int block_topk, uint32_t* mask,
                                                                      int mask_words) {
  pdl_begin();
  // Key stages [warps][32][kStageStride], queries [heads * dim], order keys [blocks].
  extern __shared__ __align__(16) float row_smem[];
  float* stage = row_smem + (threadIdx.x / kWarp) * kWarp * kStageStride;
  float* q = row_smem + kStageFloats;
  uint32_t* keys = reinterpret_cast<uint32_t*>(q + heads * dim);
  __shared__ uint32_t histogram[256];
  __shared__ uint32_t prefix, remaining;
  __shared__ int scan_scratch[kRowThreads / kWarp + 1];
  const int row = blockIdx.x, lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  const int visible = positions[row] + 1, blocks = visible / ratio;
  const int keep = min(block_topk, blocks);  // blocks kept before the tail

  const float* row_q = queries + static_cast<size_t>(row) * heads * dim;
  for (int i = threadIdx.x; i < heads * dim; i += kRowThreads) q[i] = row_q[i];
  __syncthreads();
  const float inv_sqrt_dim = rsqrtf(static_cast<float>(dim));
  for (int b0 = warp * kWarp; b0 < blocks; b0 += kRowThreads) {  // warp-uniform: the stages are per warp
    const int b = b0 + lane;
    float dot[kMaxIndexHeads] = {};
    if (dim % 4 == 0) {
      for (int e0 = 0; e0 < dim; e0 += kStageElements) {
        const int quads = min(kStageElements, dim - e0) / 4;  // of each key in this stage
#pragma unroll 8
        for (int i = lane; i < kWarp * quads; i += kWarp) {
          const int r = i / quads, c = i % quads;
          const float* src = block_keys + static_cast<size_t>(b0 + r) * dim + e0 + 4 * c;
          const float4 v = b0 + r < blocks ? *reinterpret_cast<const float4*>(src) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
          *reinterpret_cast<float4*>(stage + r * kStageStride + 4 * c) = v;
        }
        __syncwarp();
        const float* mine = stage + lane * kStageStride;  // this lane's key, elements e0 ..
        accumulate_dots<4>(q, heads, dim, e0, e0 + 4 * quads, [&](int e, float(&k)[4]) { load_vec<4>(mine + e - e0, k); },
                           dot);
        __syncwarp();  // the stage is refilled next
      }
    } else if (b < blocks) {
      const float* key_row = block_keys + static_cast<size_t>(b) * dim;
      accumulate_dots<1>(q, heads, dim, 0, dim, [&](int e, float(&k)[1]) { k[0] = key_row[e]; }, dot);
    }
    if (b < blocks) keys[b] = order_key(heads_score(dot, heads) * inv_sqrt_dim);
  }
  __syncthreads();
  radix_threshold([&](int b) { return keys[b]; }, blocks, keep, histogram, prefix, remaining);

  // Words 0 .. blocks / 32 (bit `blocks` is the tail's block), a contiguous run of words per thread. Blocks
  // above the threshold key are kept, and of those equal to it the first `remaining` in block order.
  const auto word_bits = [&](int w, uint32_t& above, uint32_t& ties) {
    above = ties = 0;
    for (int j = 0, b = w * 32; j < 32 && b < blocks && keep > 0; ++j, ++b) {
      above |= static_cast<uint32_t>(keys[b] > prefix) << j;
      ties |= static_cast<uint32_t>(keys[b] == prefix) << j;
    }
  };
  const int words = blocks / 32 + 1;
  const int per_thread = (words + kRowThreads - 1) / kRowThreads;
  const int w_begin = min(words, static_cast<int>(threadIdx.x) * per_thread), w_end = min(words, w_begin + per_thread);
  int ties = 0;
  for (int w = w_begin; w < w_end; ++w) {
    uint32_t above, tie_bits;
    word_bits(w, above, tie_bits);
    ties += __popc(tie_bits);
  }
  int ties_total = 0;
  const int ties_before = block_exclusive_scan<kRowThreads>(ties, scan_scratch, ties_total);
  int allowed = max(0, min(ties, static_cast<int>(remaining) - ties_before));
  uint32_t* row_mask = mask + static_cast<size_t>(row) * mask_words;
  for (int w = w_begin; w < w_end; ++w) {
    uint32_t bits, tie_bits;
    word_bits(w, bits, tie_bits);
    for (; tie_bits != 0 && allowed > 0; --allowed, tie_bits &= tie_bits - 1) bits |= tie_bits & (0u - tie_bits);
    if (w == blocks / 32 && visible % ratio != 0) bits |= 1u << (blocks % 32);  // the incomplete tail block
    row_mask[w] = bits;
  }
}

// The index shapes the register-held queries and keys cover (kQsaMaxIndexHeads x kQsaMaxIndexDim).
void check_index_shape(int32_t heads, int32_t dim) {
  if (heads < 1 || heads > kQsaMaxIndexHeads || dim < 1 || dim > kQsaMaxIndexDim) {
    throw_invalid_launch("qsa select: index heads outside [1, 8] or dim outside [1, 128]");
  }
}

}  // namespace

void launch_qsa_block_keys(const float* raw_keys, int32_t first_block, int32_t last_block, int32_t ratio, int32_t dim,
                           const uint16_t* k_norm, float eps, int32_t rotary_dim, const float* inv_freq,
                           float* block_keys, cudaStream_t stream) {
  if (last_block <= first_block) return;
  constexpr int kWarpsPerBlock = 8;
  const int count = last_block - first_block;
  launch_kernel(qsa_block_keys_kernel, (count + kWarpsPerBlock - 1) / kWarpsPerBlock, kWarpsPerBlock * kWarp, 0, stream, 1,

      raw_keys, first_block, last_block, ratio, dim, k_norm, eps, rotary_dim, inv_freq, block_keys);
}

int32_t qsa_select_cluster_max_blocks() { return kSelectCluster * kClusterKeys; }

namespace {
// The dynamic shared memory that, with the cluster kernel's static arrays, takes all a block may have: no other
// kernel's block then fits on its SMs.
size_t cluster_whole_sm_bytes() {
  static const size_t bytes = [] {
    cudaFuncAttributes attributes{};
    IMP_CUDA_CHECK(cudaFuncGetAttributes(&attributes, qsa_select_cluster_kernel));
    int optin = 0, device = 0;
    IMP_CUDA_CHECK(cudaGetDevice(&device));
    IMP_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    const size_t dynamic = static_cast<size_t>(optin) - attributes.sharedSizeBytes;
    raise_shared_limit_outside_capture(qsa_select_cluster_kernel, dynamic);
    return dynamic;
  }();
  return bytes;
}

// The selection over the scores: on the cluster while the block-key cache fits it, else on one block.
void launch_selection(const int32_t* positions, int32_t ratio, int32_t block_topk, int32_t max_blocks,
                      const float* scores, int32_t* selected, int32_t* selected_count, bool whole_sms,
                      cudaStream_t stream) {
  if (max_blocks <= qsa_select_cluster_max_blocks()) {
    const size_t shared = whole_sms ? cluster_whole_sm_bytes() : 0;
    launch_kernel(qsa_select_cluster_kernel, kSelectCluster, kClusterThreads, shared, stream, 1, positions, ratio,
                  block_topk, scores, selected, selected_count);
  } else {
    launch_kernel(qsa_select_kernel, 1, kThreads, 0, stream, 1, positions, ratio, block_topk, scores, selected,
                  selected_count);
  }
}
}  // namespace

void launch_qsa_select(const float* queries, int32_t heads, int32_t dim, const float* block_keys,
                       const int32_t* positions, int32_t ratio, int32_t block_topk, int32_t max_blocks, float* scores,
                       int32_t* selected, int32_t* selected_count, cudaStream_t stream) {
  if (max_blocks < 0) throw_invalid_launch("qsa select: max_blocks < 0");
  check_index_shape(heads, dim);
  launch_kernel(qsa_score_kernel, kScoreBlocks, kScoreThreads, 0, stream, 1,
                queries, heads, dim, block_keys, positions, ratio, block_topk, scores);
  launch_selection(positions, ratio, block_topk, max_blocks, scores, selected, selected_count, false, stream);
}

void launch_qsa_decode_select(const QsaDecodeIndex& index, int32_t block_topk, int32_t max_blocks, float* scores,
                              int32_t* selected, int32_t* selected_count, bool whole_sms, cudaStream_t stream) {
  if (max_blocks < 0) throw_invalid_launch("qsa decode select: max_blocks < 0");
  check_index_shape(index.heads, index.dim);  // heads <= kQsaMaxIndexHeads = the score block's warps
  if (index.rotary_dim > index.dim || index.ratio < 1) {
    throw_invalid_launch("qsa decode select: rotary_dim above the index dim, or ratio < 1");
  }
  launch_kernel(qsa_prep_score_kernel, kScoreBlocks, kScoreThreads, 0, stream, 1, index, block_topk, scores);
  launch_selection(index.positions, index.ratio, block_topk, max_blocks, scores, selected, selected_count, whole_sms,
                   stream);
}

int32_t qsa_select_rows_max_blocks(int32_t heads, int32_t dim) {
  return kRowSmemBytes / static_cast<int32_t>(sizeof(float)) - kStageFloats - heads * dim;
}

void launch_qsa_select_rows(const float* queries, int32_t rows, int32_t heads, int32_t dim, const float* block_keys,
                            const int32_t* positions, int32_t max_blocks, int32_t ratio, int32_t block_topk,
                            uint32_t* mask, int32_t mask_words, cudaStream_t stream) {
  check_index_shape(heads, dim);
  if (max_blocks < 0 || max_blocks > qsa_select_rows_max_blocks(heads, dim)) {
    throw_invalid_launch("qsa select rows: more blocks than fit in shared memory");
  }
  if (mask_words < max_blocks / 32 + 1) throw_invalid_launch("qsa select rows: mask_words < max_blocks / 32 + 1");
  if (rows <= 0) return;
  static const bool ready = [] {
    IMP_CUDA_CHECK(cudaFuncSetAttribute(qsa_select_rows_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kRowSmemBytes));
    return true;
  }();
  (void)ready;
  const size_t bytes = (static_cast<size_t>(kStageFloats) + static_cast<size_t>(heads) * dim + static_cast<size_t>(max_blocks)) * sizeof(float);
  launch_kernel(qsa_select_rows_kernel, rows, kRowThreads, bytes, stream, 1,
                queries, heads, dim, block_keys, positions, ratio,
                                                              block_topk, mask, mask_words);
}

}  // namespace imp::cuda
