#include "cuda/kernels/sampling.h"

#include <cfloat>
#include <climits>
#include <cstdint>
#include <mutex>

#include <cooperative_groups.h>

#include "cuda/check.h"
#include "cuda/kernels/device_math.cuh"
#include "runtime/sampling_rule.h"

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

// The block's best (value, index): the warps' bests meet in best_v / best_i; thread 0 ends with the block's best
// in v / idx and in best_v[0] / best_i[0].
__device__ __forceinline__ void block_best(float& v, int& idx, float* best_v, int* best_i) {
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
  block_best(v, idx, best_v, best_i);
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

// ---- Sampling: runtime::sample_token's rule (runtime/sampler.cpp) without a sort ----------------------------
//
// One cluster of kClusterBlocks blocks per row, each block owning a contiguous slice. Every token's key (the
// bits of its weight e, sampling_rule::weight_key) orders the row; the kept set after min-p, top-k and top-p is
// always a prefix of the order (key descending, index ascending), written as (theta, r): every token with
// key > theta, and the first r tokens (lowest indices) with key == theta. The cuts are radix selects on the
// 31 key bits in three levels (bits 30..20, 19..9, 8..0): each level is a histogram pass (count and integer
// weight per bin, in shared memory), the cluster's histograms merged through distributed shared memory, and a
// scan from the highest bin down to the bin where the running count (top-k) or weight (top-p) reaches its
// target. Every block merges and decides the same (exact integer sums, no order dependence). The draw then
// scans the kept weights in index order: per-thread runs, a block scan, a cluster exchange of block sums, and
// one thread walks the run holding the target. Histograms are double buffered, so a pass needs one cluster
// barrier. The slice's keys are cached in shared memory when they fit (vocab up to ~350k on an H200), else
// recomputed from the logits each pass.

namespace rule = imp::runtime::sampling_rule;

constexpr int kSampleBins = 2048;  // bins of the widest level (11 bits)
static_assert(kSampleBins == 2 * kThreads, "select_bin gives each thread two bins");
static_assert(kThreads / kWarp == kWarp, "block_scan2 scans the warp totals with one warp");
// Two histogram buffers: mass (u64) then count (u32) per bin.
constexpr size_t kHistBytes = 2 * kSampleBins * (sizeof(unsigned long long) + sizeof(uint32_t));

struct Row {
  const float* logits;     // the row
  int lo, hi;              // this block's slice
  const uint32_t* keys;    // the slice's cached keys (index - lo), or nullptr: recompute
  float max_logit, scale;  // weight_key's arguments
};

__device__ __forceinline__ uint32_t key_at(const Row& row, int i) {
  return row.keys ? row.keys[i - row.lo] : rule::weight_key(row.logits[i], row.max_logit, row.scale);
}

// Exclusive prefix sums of a and b over the block's threads in thread order; the block totals in total_a/b.
__device__ void block_scan2(uint64_t& a, uint64_t& b, uint64_t& total_a, uint64_t& total_b) {
  __shared__ uint64_t warp_a[kWarp], warp_b[kWarp], sum_a, sum_b;
  const int lane = static_cast<int>(threadIdx.x) % kWarp, warp = static_cast<int>(threadIdx.x) / kWarp;
  uint64_t ia = a, ib = b;
  for (int o = 1; o < kWarp; o *= 2) {
    const uint64_t na = __shfl_up_sync(0xffffffffu, ia, o), nb = __shfl_up_sync(0xffffffffu, ib, o);
    if (lane >= o) {
      ia += na;
      ib += nb;
    }
  }
  __syncthreads();  // an earlier call's readers are done with warp_a / warp_b
  if (lane == kWarp - 1) {
    warp_a[warp] = ia;
    warp_b[warp] = ib;
  }
  __syncthreads();
  if (warp == 0) {
    const uint64_t va = warp_a[lane], vb = warp_b[lane];
    uint64_t sa = va, sb = vb;
    for (int o = 1; o < kWarp; o *= 2) {
      const uint64_t na = __shfl_up_sync(0xffffffffu, sa, o), nb = __shfl_up_sync(0xffffffffu, sb, o);
      if (lane >= o) {
        sa += na;
        sb += nb;
      }
    }
    warp_a[lane] = sa - va;
    warp_b[lane] = sb - vb;
    if (lane == kWarp - 1) {
      sum_a = sa;
      sum_b = sb;
    }
  }
  __syncthreads();
  a = warp_a[warp] + ia - a;
  b = warp_b[warp] + ib - b;
  total_a = sum_a;
  total_b = sum_b;
}

// Clears this block's histogram and adds its slice: tokens with key >= floor and (key >> match_shift) == match,
// in bin (key >> bin_shift) & (bins - 1). With `store`, also writes every key of the slice there (the cache).
__device__ void histogram_pass(const Row& row, uint32_t* count, unsigned long long* mass, int bins, uint32_t floor,
                               int match_shift, uint32_t match, int bin_shift, uint32_t* store) {
  for (int b = static_cast<int>(threadIdx.x); b < bins; b += kThreads) {
    count[b] = 0;
    mass[b] = 0;
  }
  __syncthreads();
  // Each warp's lanes that fall in the same bin add once, through their lowest lane: narrow rows (most tokens in
  // a few bins) would otherwise serialize on the same shared-memory words.
  __shared__ unsigned long long lane_mass[kThreads];
  const unsigned lane = threadIdx.x % kWarp, lane_bit = 1u << lane;
  unsigned long long* warp_mass = lane_mass + (threadIdx.x - lane);
  for (int base = row.lo; base < row.hi; base += kThreads) {  // the same trip count in every thread
    const int i = base + static_cast<int>(threadIdx.x);
    uint32_t key = 0;
    if (i < row.hi) {
      if (store) {
        key = rule::weight_key(row.logits[i], row.max_logit, row.scale);
        store[i - row.lo] = key;
      } else {
        key = key_at(row, i);
      }
    }
    const bool take = i < row.hi && key >= floor && (key >> match_shift) == match;
    const uint32_t bin = (key >> bin_shift) & static_cast<uint32_t>(bins - 1);
    lane_mass[threadIdx.x] = take ? rule::key_weight(key) : 0;
    const unsigned takers = __ballot_sync(0xffffffffu, take);
    __syncwarp();
    if (take) {
      const unsigned group = __match_any_sync(takers, bin);
      if ((group & (lane_bit - 1)) == 0) {
        unsigned long long sum = 0;
        for (unsigned rest = group; rest != 0; rest &= rest - 1) sum += warp_mass[__ffs(rest) - 1];
        atomicAdd(&count[bin], static_cast<unsigned>(__popc(group)));
        atomicAdd(&mass[bin], sum);
      }
    }
    __syncwarp();  // the sums have read lane_mass before the next round writes it
  }
}

// One level's choice: the bin, what the higher bins hold, what it holds, and the level's totals.
struct Pick {
  uint32_t bin;
  uint64_t count_above, mass_above, bin_count, bin_mass, total_count, total_mass;
};

// Merges the cluster's histograms (`count` / `mass` of every block) and walks the bins from the highest down to
// the one where the running count (or mass) first reaches `target` (target 0: totals only). Into `pick`
// (shared memory), read after the closing barrier.
__device__ void select_bin(const cg::cluster_group& cluster, uint32_t* count, unsigned long long* mass, int bins,
                           bool by_mass, uint64_t target, Pick& pick) {
  uint64_t c[2] = {0, 0}, m[2] = {0, 0};
  const int first = 2 * static_cast<int>(threadIdx.x);  // positions first, first + 1; position 0: the highest bin
  const uint32_t bin[2] = {static_cast<uint32_t>(bins - 1 - first), static_cast<uint32_t>(bins - 2 - first)};
  if (first < bins) {  // bins is even
    for (int r = 0; r < kClusterBlocks; ++r) {
      const uint32_t* counts = cluster.map_shared_rank(count, r);
      const unsigned long long* masses = cluster.map_shared_rank(mass, r);
      for (int j = 0; j < 2; ++j) {
        c[j] += counts[bin[j]];
        m[j] += masses[bin[j]];
      }
    }
  }
  uint64_t count_before = c[0] + c[1], mass_before = m[0] + m[1], total_count, total_mass;
  block_scan2(count_before, mass_before, total_count, total_mass);
  if (threadIdx.x == 0) {
    pick.total_count = total_count;
    pick.total_mass = total_mass;
  }
  if (target > 0) {
    for (int j = 0; j < 2; ++j) {
      const uint64_t before = by_mass ? mass_before : count_before, here = by_mass ? m[j] : c[j];
      if (before < target && target <= before + here) {  // exactly one bin of the block matches
        pick.bin = bin[j];
        pick.count_above = count_before;
        pick.mass_above = mass_before;
        pick.bin_count = c[j];
        pick.bin_mass = m[j];
      }
      count_before += c[j];
      mass_before += m[j];
    }
  }
  __syncthreads();
}

struct Histograms {
  uint32_t* count[2];
  unsigned long long* mass[2];
  int parity;  // the buffer the latest pass wrote
};

// The token (in the order key descending, index ascending, among tokens with key >= floor) at which the running
// count (or weight) reaches `target`, as its key and what lies above it. level1: the current buffer already holds
// level 1 for this floor (0: run the pass; 1: histogram ready; 2: also picked for this target, in `pick`).
struct Cut {
  uint32_t key;
  uint64_t count_above, mass_above, count_equal;
};

__device__ Cut radix_select(const cg::cluster_group& cluster, const Row& row, Histograms& hist, uint32_t floor,
                            bool by_mass, uint64_t target, int level1, Pick& pick) {
  constexpr int kMatchShift[3] = {31, 20, 9}, kBinShift[3] = {20, 9, 0}, kBins[3] = {2048, 2048, 512};
  Cut cut{0, 0, 0, 0};
  uint32_t prefix = 0;  // the bins chosen so far: the key's bits above kMatchShift
  for (int level = 0; level < 3; ++level) {
    const bool ready = level == 0 && level1 >= 1, picked = level == 0 && level1 == 2;
    if (!ready) {
      hist.parity ^= 1;
      histogram_pass(row, hist.count[hist.parity], hist.mass[hist.parity], kBins[level], floor, kMatchShift[level],
                     prefix, kBinShift[level], nullptr);
      cluster.sync();
    }
    if (!picked) {
      select_bin(cluster, hist.count[hist.parity], hist.mass[hist.parity], kBins[level], by_mass, target, pick);
    }
    cut.count_above += pick.count_above;
    cut.mass_above += pick.mass_above;
    target -= by_mass ? pick.mass_above : pick.count_above;
    prefix = (prefix << (kMatchShift[level] - kBinShift[level])) | pick.bin;
    cut.count_equal = pick.bin_count;
  }
  cut.key = prefix;
  return cut;
}

__global__ void __cluster_dims__(kClusterBlocks, 1, 1) __launch_bounds__(kThreads)
    sample_kernel(const float* logits, int vocab, const SampleParams* params, int32_t* tokens, bool cache_keys) {
  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ float best_v[kThreads / kWarp];
  __shared__ int best_i[kThreads / kWarp];
  __shared__ float row_max;
  __shared__ int row_argmax;
  __shared__ Pick pick;
  __shared__ uint64_t block_equal, block_above, equal_before, above_before, equal_total, above_total;
  cg::cluster_group cluster = cg::this_cluster();
  const int rank = static_cast<int>(cluster.block_rank());
  const SampleParams p = params[blockIdx.y];
  const int per_block = (vocab + kClusterBlocks - 1) / kClusterBlocks;
  Row row;
  row.logits = logits + static_cast<size_t>(blockIdx.y) * vocab;
  row.lo = min(vocab, rank * per_block);
  row.hi = min(vocab, row.lo + per_block);
  row.keys = nullptr;

  // Pass 0: the row's maximum and argmax (ties to the lowest index), as launch_argmax.
  float v = -INFINITY;
  int idx = INT_MAX;
  for (int i = row.lo + static_cast<int>(threadIdx.x); i < row.hi; i += kThreads) keep_better(v, idx, row.logits[i], i);
  block_best(v, idx, best_v, best_i);
  cluster.sync();
  if (threadIdx.x == 0) {
    for (int r = 0; r < kClusterBlocks; ++r) {
      keep_better(v, idx, cluster.map_shared_rank(best_v, r)[0], cluster.map_shared_rank(best_i, r)[0]);
    }
    row_max = v;
    row_argmax = idx == INT_MAX ? 0 : idx;  // a row of NaN
  }
  __syncthreads();
  const bool leader = rank == 0 && threadIdx.x == 0;

  if (!(p.temperature > 0.0f)) {
    if (leader) tokens[blockIdx.y] = row_argmax;
  } else {
    row.max_logit = row_max;
    row.scale = rule::temperature_scale(p.temperature);
    const uint32_t floor_key = rule::candidate_floor_key(p.min_p);
    Histograms hist;
    hist.mass[0] = reinterpret_cast<unsigned long long*>(smem);
    hist.mass[1] = hist.mass[0] + kSampleBins;
    hist.count[0] = reinterpret_cast<uint32_t*>(hist.mass[1] + kSampleBins);
    hist.count[1] = hist.count[0] + kSampleBins;
    hist.parity = 0;
    uint32_t* cache = cache_keys ? hist.count[1] + kSampleBins : nullptr;

    // Level 1 over the candidates (key >= floor): their count and weight, and top-k's first level.
    histogram_pass(row, hist.count[0], hist.mass[0], kSampleBins, floor_key, 31, 0, 20, cache);
    cluster.sync();
    row.keys = cache;
    const uint64_t k = p.top_k > 0 ? static_cast<uint64_t>(p.top_k) : 0;
    select_bin(cluster, hist.count[0], hist.mass[0], kSampleBins, false, k, pick);
    const uint64_t candidates = pick.total_count, candidate_mass = pick.total_mass;
    if (candidates == 0) {  // NaN or infinite logits: the argmax
      if (leader) tokens[blockIdx.y] = row_argmax;
    } else {
      // The kept prefix: key > theta, and the first `ties` tokens with key == theta.
      uint32_t theta = floor_key;
      uint64_t ties = UINT64_MAX, kept_mass = candidate_mass;
      const bool cut_k = k > 0 && k < candidates;
      if (cut_k) {
        const Cut cut = radix_select(cluster, row, hist, floor_key, false, k, 2, pick);
        theta = cut.key;
        ties = k - cut.count_above;
        kept_mass = cut.mass_above + ties * rule::key_weight(theta);
      }
      if (p.top_p < 1.0f) {
        const uint64_t target = rule::top_p_target(p.top_p, kept_mass);
        // Tokens tied at top-k's theta beyond its `ties` lie after the target: the weight of what precedes them
        // is kept_mass >= target.
        const Cut cut = radix_select(cluster, row, hist, theta, true, target, cut_k ? 0 : 1, pick);
        theta = cut.key;
        const uint64_t w = rule::key_weight(theta);
        ties = (target - cut.mass_above + w - 1) / w;
      }

      // The draw: the kept weights in index order. Each thread sums a contiguous run of the slice.
      const int run = (row.hi - row.lo + kThreads - 1) / kThreads;
      const int a = min(row.hi, row.lo + static_cast<int>(threadIdx.x) * run), b = min(row.hi, a + run);
      uint64_t equal = 0, above = 0;
      for (int i = a; i < b; ++i) {
        const uint32_t key = key_at(row, i);
        if (key > theta) above += rule::key_weight(key);
        else if (key == theta) ++equal;
      }
      uint64_t equal_prefix = equal, above_prefix = above, equal_block, above_block;
      block_scan2(equal_prefix, above_prefix, equal_block, above_block);
      if (threadIdx.x == 0) {
        block_equal = equal_block;
        block_above = above_block;
      }
      cluster.sync();
      if (threadIdx.x == 0) {
        uint64_t eb = 0, ab = 0, et = 0, at = 0;
        for (int r = 0; r < kClusterBlocks; ++r) {
          const uint64_t e = *cluster.map_shared_rank(&block_equal, r), m = *cluster.map_shared_rank(&block_above, r);
          if (r < rank) {
            eb += e;
            ab += m;
          }
          et += e;
          at += m;
        }
        equal_before = eb;
        above_before = ab;
        equal_total = et;
        above_total = at;
      }
      __syncthreads();
      const uint64_t w = rule::key_weight(theta);
      const uint64_t total = above_total + min(equal_total, ties) * w;
      const uint64_t t = rule::draw_target(p.u, total);
      uint64_t seen = equal_before + equal_prefix;  // ties before this run
      uint64_t cum = above_before + above_prefix + min(seen, ties) * w;
      const uint64_t mine = above + (min(seen + equal, ties) - min(seen, ties)) * w;
      if (cum <= t && t < cum + mine) {
        for (int i = a; i < b; ++i) {
          const uint32_t key = key_at(row, i);
          uint64_t add = 0;
          if (key > theta) {
            add = rule::key_weight(key);
          } else if (key == theta) {
            if (seen < ties) add = w;
            ++seen;
          }
          cum += add;
          if (add > 0 && cum > t) {
            tokens[blockIdx.y] = i;
            break;
          }
        }
      }
    }
  }
  cluster.sync();  // keep every block's shared memory alive until the others have read it
}

__global__ void advance_positions_kernel(int32_t* positions, int rows) {
  const int row = blockIdx.x * blockDim.x + threadIdx.x;
  if (row < rows) positions[row] += 1;
}

}  // namespace

void launch_sample_tokens(const float* logits, int32_t rows, int32_t vocab, const SampleParams* params, int32_t* tokens,
                          cudaStream_t stream) {
  if (rows < 1) return;
  if (rows > 65535) throw_invalid_launch("launch_sample_tokens: more than 65535 rows");
  if (vocab < 1 || vocab > rule::kMaxVocab) throw_invalid_launch("launch_sample_tokens: vocab must be in [1, 2^22]");
  // The dynamic shared memory this device allows beside the kernel's static shared memory, found once.
  static size_t room = 0;
  static std::once_flag once;
  std::call_once(once, [] {
    int device = 0, optin = 0;
    IMP_CUDA_CHECK(cudaGetDevice(&device));
    IMP_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    cudaFuncAttributes attributes{};
    IMP_CUDA_CHECK(cudaFuncGetAttributes(&attributes, sample_kernel));
    room = static_cast<size_t>(optin) - attributes.sharedSizeBytes;
    IMP_CUDA_CHECK(cudaFuncSetAttribute(sample_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(room)));
  });
  const size_t cache_bytes = static_cast<size_t>((vocab + kClusterBlocks - 1) / kClusterBlocks) * sizeof(uint32_t);
  const bool cache_keys = kHistBytes + cache_bytes <= room;
  const size_t bytes = kHistBytes + (cache_keys ? cache_bytes : 0);
  sample_kernel<<<dim3(kClusterBlocks, rows), kThreads, bytes, stream>>>(logits, vocab, params, tokens, cache_keys);
  IMP_CUDA_CHECK_LAUNCH();
}

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
