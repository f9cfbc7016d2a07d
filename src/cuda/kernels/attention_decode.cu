#include "cuda/kernels/attention_decode.h"
#include "cuda/kernels/attention_decode_partial.h"
#include "cuda/kernels/attention_phase.cuh"

#include <cfloat>

#include "cuda/check.h"
#include "cuda/launch.h"
#include "cuda/kernels/device_math.cuh"
#include "cuda/kernels/fp_codes.cuh"
#include "cuda/kernels/kv_pages.cuh"

#include <cuda_bf16.h>

namespace imp::cuda {
namespace {

using namespace attention;

template <bool Bf16>
__device__ __forceinline__ float load_cache(const void* base, size_t index) {
  if constexpr (Bf16) {
    return bf16_bits_to_float(static_cast<const uint16_t*>(base)[index]);
  } else {
    return static_cast<const float*>(base)[index];
  }
}

// Flash-decoding. With bf16 pages of the usual shapes the partial kernel is attention_decode_mma.cu's (tensor
// cores); this CUDA-core one takes fp32 pages and the rest. Partial kernel: block (split, kv head x head chunk, row) takes one contiguous slice of
// the row's token list (the count is read on the device, so every split derives its own range; a split past
// the end writes neutral stats) and serves up to kMaxGroup query heads of one KV head from each K/V load.
// A tile of `tile` tokens: `lanes` threads per token, each loading its Vec-element chunks of K (kept in
// registers) and V (staged in shared memory) with 16-byte loads; per query head a sub-warp dot + shuffle
// reduction gives the scores, one warp per head updates the online softmax, and each thread accumulates
// its value column(s) for every head of the chunk. Partials: unnormalised acc [hd], running max m and sum l
// per (row, head, split). The combine kernel rescales the splits to the common max and applies the gate.
constexpr int kThreads = 256;
constexpr int kMaxGroup = 16;  // query heads sharing one block's K/V loads
constexpr int kCols = (kMaxHeadDim + kThreads - 1) / kThreads;  // value columns per thread
constexpr int kTargetBlocks = 132;  // H200 SMs: splits are chosen so the partial grid fills them once
constexpr int kMaxSplits = 128;
constexpr int kCombineThreads = 64;
constexpr size_t kSharedLimit = 48 * 1024;

// Vec consecutive elements at `at` as floats: one 16-byte load (bf16 x 8 or fp32 x 4) or scalars (Vec 1).
template <bool Bf16, int Vec>
__device__ __forceinline__ void load_chunk(const void* base, size_t at, float* out) {
  if constexpr (Bf16 && Vec == 8) {
    const uint4 u = *reinterpret_cast<const uint4*>(static_cast<const uint16_t*>(base) + at);
    const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      out[2 * i] = bf16_bits_to_float(w[i] & 0xffffu);
      out[2 * i + 1] = bf16_bits_to_float(w[i] >> 16);
    }
  } else if constexpr (!Bf16 && Vec == 4) {
    const float4 f = *reinterpret_cast<const float4*>(static_cast<const float*>(base) + at);
    out[0] = f.x;
    out[1] = f.y;
    out[2] = f.z;
    out[3] = f.w;
  } else {
    static_assert(Vec == 1, "vector width: 8 (bf16), 4 (fp32) or 1");
    out[0] = load_cache<Bf16>(base, at);
  }
}

// q_s holds query element d of a head at q_slot(d): 4 floats of padding after every 32, so the threads of a token,
// which read 8-float chunks 8 floats apart, hit distinct banks with 16-byte loads (unpadded: 4-way conflicts on
// scalar loads, ~16 of them per head and token).
__host__ __device__ constexpr int q_slot(int d) { return d + 4 * (d / 32); }
__host__ __device__ constexpr int q_row_floats(int hd) { return hd + 4 * ((hd + 31) / 32); }

// Shared memory (floats): p_s [group_chunk, tile] scores then probabilities, v_s [tile, hd], q_s
// [group_chunk, q_row_floats(hd)]. tile is a multiple of 4, so v_s and q_s stay 16-byte aligned when hd % 4 == 0.
__host__ __device__ constexpr size_t partial_shared_floats(int group_chunk, int tile, int hd) {
  return static_cast<size_t>(group_chunk) * tile + static_cast<size_t>(tile) * hd +
         static_cast<size_t>(group_chunk) * q_row_floats(hd);
}

// q_s [gn, q_row_floats(hd)] = the gn query rows at q (row stride `stride`, element d at q_slot(d)), every load of
// a thread issued before its stores: a loop of one load and one store per step made each block wait for ~12
// dependent round trips (~10 us).
constexpr int kQueryLoads = kMaxGroup * kMaxHeadDim / 4 / kThreads;  // float4 loads per thread at most
__device__ __forceinline__ void load_queries(const float* q, int stride, int gn, int hd, float* q_s) {
  const int tid = threadIdx.x;
  if (hd % 4 == 0 && stride % 4 == 0 && reinterpret_cast<uintptr_t>(q) % 16 == 0) {
    const int quads = hd / 4, total = gn * quads;
    float4 v[kQueryLoads];
#pragma unroll
    for (int u = 0; u < kQueryLoads; ++u) {
      const int e = tid + u * kThreads;
      if (e < total) v[u] = *reinterpret_cast<const float4*>(q + static_cast<size_t>(e / quads) * stride + (e % quads) * 4);
    }
#pragma unroll
    for (int u = 0; u < kQueryLoads; ++u) {
      const int e = tid + u * kThreads;
      if (e < total) {  // 16-byte aligned: q_row_floats(hd) and q_slot(4 c) are multiples of 4
        *reinterpret_cast<float4*>(q_s + (e / quads) * q_row_floats(hd) + q_slot((e % quads) * 4)) = v[u];
      }
    }
    return;
  }
  for (int i = tid; i < gn * hd; i += kThreads) {
    q_s[(i / hd) * q_row_floats(hd) + q_slot(i % hd)] = q[static_cast<size_t>(i / hd) * stride + i % hd];
  }
}

template <bool Bf16, int D, int Vec>
__global__ void __launch_bounds__(kThreads) attention_decode_partial_kernel(
    KvPages cache, const float* q, int head_stride, const int32_t* positions, const int32_t* selected,
    const int32_t* selected_count, int max_selected, int heads, int kv_heads, int hd, int group_chunk, int lanes,
    int tile, int splits, float* partial_acc, float* partial_stats) {
  static_assert(D % Vec == 0, "a thread's dims are whole chunks");
  constexpr int kChunks = D / Vec;
  extern __shared__ __align__(16) float smem[];
  __shared__ float m_s[kMaxGroup], l_s[kMaxGroup], corr_s[kMaxGroup];
  const int tid = threadIdx.x, lane = tid % kWarp, warp = tid / kWarp;
  const int split = blockIdx.x, row = blockIdx.z;
  const int group = heads / kv_heads, chunks_per_kv = (group + group_chunk - 1) / group_chunk;
  const int kvh = blockIdx.y / chunks_per_kv, chunk = blockIdx.y % chunks_per_kv;
  const int head0 = kvh * group + chunk * group_chunk;
  const int gn = min(group_chunk, group - chunk * group_chunk);  // heads of this block
  // Partial slot of head head0 + g: part0 + g * splits.
  const size_t part0 = (static_cast<size_t>(row) * heads + head0) * splits + split;

  float* p_s = smem;
  float* v_s = p_s + group_chunk * tile;
  float* q_s = v_s + tile * hd;
  const int t_local = tid / lanes, slice = tid % lanes;  // lanes * tile == kThreads
  const int width = kv_heads * hd;
  // This thread's K and V chunks of its token in the current tile (zeros for tokens past the end).
  float kreg[D], vreg[D];
  auto load_tile = [&](int start, int valid, int count, int visible) {
    const bool has = t_local < valid;
    size_t base = 0;
    if (has) {
      const int n = start + t_local;
      // A selection of every visible token is 0 .. visible - 1 in order (sorted and distinct): no list lookup.
      const int token = count < visible ? selected[static_cast<size_t>(row) * max_selected + n] : n;
      base = cache_index(cache, row, token, kvh * hd, width);
    }
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      const int d0 = (slice + c * lanes) * Vec;
      if (has && d0 < hd) {
        load_chunk<Bf16, Vec>(cache.keys, base + d0, kreg + c * Vec);
        load_chunk<Bf16, Vec>(cache.values, base + d0, vreg + c * Vec);
      } else {
#pragma unroll
        for (int j = 0; j < Vec; ++j) kreg[c * Vec + j] = vreg[c * Vec + j] = 0.0f;
      }
    }
  };
  auto block_range = [&](int count, int& begin, int& end) { split_range(count, splits, split, tile, begin, end); };
  // The queries go out in the same round trip as the token count.
  phase(0, 0);
  pdl_begin();
  const int visible = positions[row] + 1;
  load_queries(q + (static_cast<size_t>(row) * heads + head0) * head_stride, head_stride, gn, hd, q_s);
  phase(0, 1);
  const int count = selected ? selected_count[row] : visible;
  int begin = 0, end = 0;
  block_range(count, begin, end);
  if (begin >= end) {  // nothing here: neutral stats (the combine skips l == 0 and never reads this acc)
    if (tid < gn) {
      partial_stats[2 * (part0 + static_cast<size_t>(tid) * splits)] = -FLT_MAX;
      partial_stats[2 * (part0 + static_cast<size_t>(tid) * splits) + 1] = 0.0f;
    }
    return;
  }

  if (tid < kMaxGroup) {
    m_s[tid] = -FLT_MAX;
    l_s[tid] = 0.0f;
    corr_s[tid] = 1.0f;
  }
  __syncthreads();

  const float scale = rsqrtf(static_cast<float>(hd));
  float acc[kMaxGroup][kCols];
#pragma unroll
  for (int g = 0; g < kMaxGroup; ++g) {
#pragma unroll
    for (int c = 0; c < kCols; ++c) acc[g][c] = 0.0f;
  }

  for (int start = begin; start < end; start += tile) {
    const int valid = min(tile, end - start);
    // K chunks into registers, V chunks into v_s.
    load_tile(start, valid, count, visible);
    phase(0, 2);
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      const int d0 = (slice + c * lanes) * Vec;
      if (d0 < hd) {
#pragma unroll
        for (int j = 0; j < Vec; ++j) v_s[t_local * hd + d0 + j] = vreg[c * Vec + j];
      }
    }

    // Scores: for each head, a dot over the token's `lanes` threads (aligned power-of-two sub-warps).
    for (int g = 0; g < gn; ++g) {
      const float* qh = q_s + g * q_row_floats(hd);
      float dot = 0.0f;
#pragma unroll
      for (int c = 0; c < kChunks; ++c) {
        const int d0 = (slice + c * lanes) * Vec;
        if (d0 < hd) {
          float qv[Vec];  // a chunk never crosses a padding gap (Vec divides 32)
          if constexpr (Vec % 4 == 0) {
#pragma unroll
            for (int j = 0; j < Vec; j += 4) *reinterpret_cast<float4*>(qv + j) = *reinterpret_cast<const float4*>(qh + q_slot(d0) + j);
          } else {
            qv[0] = qh[q_slot(d0)];
          }
#pragma unroll
          for (int j = 0; j < Vec; ++j) dot += qv[j] * kreg[c * Vec + j];
        }
      }
      for (int offset = lanes / 2; offset > 0; offset /= 2) dot += __shfl_xor_sync(0xffffffffu, dot, offset);
      if (slice == 0) p_s[g * tile + t_local] = dot * scale;
    }
    __syncthreads();
    phase(0, 3);

    // Online softmax per head (one warp per head): p_s becomes exp(score - m_new), 0 past the end.
    for (int g = warp; g < gn; g += kThreads / kWarp) {
      float* ph = p_s + g * tile;
      float tile_max = -FLT_MAX;
      for (int t = lane; t < valid; t += kWarp) tile_max = fmaxf(tile_max, ph[t]);
      tile_max = warp_max(tile_max);
      const float m_old = m_s[g];
      const float m_new = fmaxf(m_old, tile_max);
      float sum = 0.0f;
      for (int t = lane; t < tile; t += kWarp) {
        const float p = t < valid ? expf(ph[t] - m_new) : 0.0f;
        ph[t] = p;
        sum += p;
      }
      sum = warp_sum(sum);
      __syncwarp();
      if (lane == 0) {
        const float correction = expf(m_old - m_new);
        corr_s[g] = correction;
        l_s[g] = l_s[g] * correction + sum;
        m_s[g] = m_new;
      }
    }
    __syncthreads();
    phase(0, 4);

    // Values: thread owns columns tid + c * kThreads of every head; 4 tokens per step (tile % 4 == 0,
    // rows past `valid` are zero with p = 0).
#pragma unroll
    for (int g = 0; g < kMaxGroup; ++g) {
      if (g < gn) {
        const float correction = corr_s[g];
#pragma unroll
        for (int c = 0; c < kCols; ++c) acc[g][c] *= correction;
      }
    }
    for (int t = 0; t < valid; t += 4) {
      float v[kCols][4];
#pragma unroll
      for (int c = 0; c < kCols; ++c) {
        const int i = tid + c * kThreads;
#pragma unroll
        for (int u = 0; u < 4; ++u) v[c][u] = i < hd ? v_s[(t + u) * hd + i] : 0.0f;
      }
#pragma unroll
      for (int g = 0; g < kMaxGroup; ++g) {
        if (g < gn) {
          const float4 p = *reinterpret_cast<const float4*>(p_s + g * tile + t);
#pragma unroll
          for (int c = 0; c < kCols; ++c) acc[g][c] += p.x * v[c][0] + p.y * v[c][1] + p.z * v[c][2] + p.w * v[c][3];
        }
      }
    }
    __syncthreads();  // v_s, p_s and the stats are rewritten by the next tile
    phase(0, 5);
  }

#pragma unroll
  for (int c = 0; c < kCols; ++c) {
    const int i = tid + c * kThreads;
    if (i < hd) {
#pragma unroll
      for (int g = 0; g < kMaxGroup; ++g) {
        if (g < gn) partial_acc[(part0 + static_cast<size_t>(g) * splits) * hd + i] = acc[g][c];
      }
    }
  }
  if (tid < gn) {
    partial_stats[2 * (part0 + static_cast<size_t>(tid) * splits)] = m_s[tid];
    partial_stats[2 * (part0 + static_cast<size_t>(tid) * splits) + 1] = l_s[tid];
  }
  phase(0, 6);
}

// Block (column chunk, head, row): rescale the non-empty splits to the common max, normalise, gate.
__global__ void __launch_bounds__(kCombineThreads) attention_decode_combine_kernel(
    const float* gate, int head_stride, int heads, int hd, int splits, const float* partial_acc,
    const float* partial_stats, float* out) {
  phase(1, 0);
  pdl_begin();
  phase(1, 1);
  __shared__ float weight_s[kMaxSplits];
  __shared__ float total_s;
  const int head = blockIdx.y, row = blockIdx.z;
  const size_t part0 = (static_cast<size_t>(row) * heads + head) * splits;
  if (threadIdx.x < kWarp) {  // every split's stats in one round of loads, then the same per-lane order as before
    const int lane = threadIdx.x;
    constexpr int kPerLane = kMaxSplits / kWarp;
    float mv[kPerLane], lv[kPerLane];
#pragma unroll
    for (int u = 0; u < kPerLane; ++u) {
      const int s = lane + u * kWarp;
      mv[u] = s < splits ? partial_stats[2 * (part0 + s)] : -FLT_MAX;
      lv[u] = s < splits ? partial_stats[2 * (part0 + s) + 1] : 0.0f;
    }
    float m = -FLT_MAX;
#pragma unroll
    for (int u = 0; u < kPerLane; ++u) {
      if (lv[u] > 0.0f) m = fmaxf(m, mv[u]);
    }
    m = warp_max(m);
    float total = 0.0f;
#pragma unroll
    for (int u = 0; u < kPerLane; ++u) {
      const int s = lane + u * kWarp;
      if (s >= splits) break;
      const float w = lv[u] > 0.0f ? expf(mv[u] - m) : 0.0f;
      weight_s[s] = w;
      total += lv[u] * w;
    }
    total = warp_sum(total);
    if (lane == 0) total_s = total;
  }
  __syncthreads();
  phase(1, 2);
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= hd) return;
  const float g = gate ? gate[(static_cast<size_t>(row) * heads + head) * head_stride + i] : 0.0f;
  // Every split's accumulator loaded before any is added, unconditionally (the workspace holds all splits; an
  // empty split's stale words are never added): batches of 16 behind a branch on each weight were one dependent
  // L2 round trip per batch, five at 1K context (~66 splits). The sum still runs in split order.
  float a[kMaxSplits];
#pragma unroll
  for (int s = 0; s < kMaxSplits; ++s) {
    if (s < splits) a[s] = partial_acc[(part0 + s) * hd + i];
  }
  float sum = 0.0f;
#pragma unroll
  for (int s = 0; s < kMaxSplits; ++s) {
    if (s < splits && weight_s[s] != 0.0f) sum += weight_s[s] * a[s];
  }
  const float mean = sum / total_s;  // without a gate, the output projection multiplies it in (GatedX)
  out[(static_cast<size_t>(row) * heads + head) * hd + i] = gate ? mean * (1.0f / (1.0f + expf(-g))) : mean;
  phase(1, 3);
}

int max_splits_for_rows(int rows) {
  const int splits = (kTargetBlocks + rows - 1) / rows;
  return splits < 1 ? 1 : (splits > kMaxSplits ? kMaxSplits : splits);
}

}  // namespace

size_t attention_decode_workspace_floats(int32_t rows, int32_t heads, int32_t head_dim) {
  // Enough for any launch of UP TO `rows` rows (prefill sizes this once for its largest chunk, then launches
  // fewer rows, e.g. the QSA-sparse tail or a short chunk): r rows use at most ceil(kTargetBlocks / r)
  // splits, and r * ceil(kTargetBlocks / r) <= r + kTargetBlocks - 1. (rows * max_splits_for_rows(rows)
  // was not monotonic: sized for 66 rows it held 132 split slots, but 65 rows with one KV head use 195.)
  return (static_cast<size_t>(rows) + kTargetBlocks) * heads * (static_cast<size_t>(head_dim) + 2);
}

namespace {

template <bool Bf16, int D, int Vec>
void launch_partial(const PartialArgs& a, dim3 grid, size_t shared, cudaStream_t stream) {
  launch_kernel(attention_decode_partial_kernel<Bf16, D, Vec>, grid, kThreads, shared, stream, 1,
      a.cache, a.q, a.head_stride, a.positions, a.selected, a.selected_count, a.max_selected, a.heads, a.kv_heads, a.hd,
      a.group_chunk, a.lanes, a.tile, a.splits, a.partial_acc, a.partial_stats);
}

template <bool Bf16, int Vec>
void launch_partial_d(int d, const PartialArgs& a, dim3 grid, size_t shared, cudaStream_t stream) {
  if (d == 8) {
    launch_partial<Bf16, 8, Vec>(a, grid, shared, stream);
  } else if (d == 16) {
    launch_partial<Bf16, 16, Vec>(a, grid, shared, stream);
  } else {
    launch_partial<Bf16, 32, Vec>(a, grid, shared, stream);
  }
}

}  // namespace

void launch_attention_decode(const KvPages& cache, const float* q, const float* gate, int32_t head_stride,
                             const int32_t* positions,
                             const int32_t* selected, const int32_t* selected_count, int32_t max_selected,
                             int32_t rows, int32_t heads, int32_t kv_heads, int32_t head_dim, float* workspace,
                             float* out, cudaStream_t stream) {
  if (head_dim < 1 || head_dim > kMaxHeadDim || kv_heads < 1 || heads % kv_heads != 0) {
    throw_invalid_launch("attention decode: head_dim outside [1, 512] or heads not a multiple of kv heads");
  }
  if (rows < 1) return;
  if (workspace == nullptr) throw_invalid_launch("attention decode: no workspace");
  // Threads per token: the power of two covering head_dim in D-element slices (at most 16 per token).
  const int d = head_dim <= 128 ? 8 : (head_dim <= 256 ? 16 : 32);
  int lanes = 1;
  while (lanes * d < head_dim) lanes *= 2;
  const int tile = kThreads / lanes;
  // 16-byte loads when every chunk is whole and the pools are aligned; scalar loads otherwise.
  const int vec_elems = cache.bf16 ? 8 : 4;
  const bool aligned = reinterpret_cast<uintptr_t>(cache.keys) % 16 == 0 && reinterpret_cast<uintptr_t>(cache.values) % 16 == 0;
  const bool vector = aligned && head_dim % vec_elems == 0;
  // bf16 pages of the usual shapes: the tensor-core kernel (attention_decode_mma.cu), whole GQA groups up to 16.
  const bool mma = partial_mma_supported(cache, q, head_stride, head_dim, vector);
  // Query heads per block: the whole GQA group (up to 16) while the shared memory stays within 48 KB.
  const int group = heads / kv_heads;
  int group_chunk = group < kMaxGroup ? group : kMaxGroup;
  while (!mma && group_chunk > 1 &&
         partial_shared_floats(group_chunk, tile, head_dim) * sizeof(float) > kSharedLimit) {
    group_chunk = (group_chunk + 1) / 2;
  }
  const size_t shared = partial_shared_floats(group_chunk, tile, head_dim) * sizeof(float);
  const int chunks_per_kv = (group + group_chunk - 1) / group_chunk;
  const int base_blocks = rows * kv_heads * chunks_per_kv;
  int splits = (kTargetBlocks + base_blocks - 1) / base_blocks;
  splits = splits < 1 ? 1 : (splits > max_splits_for_rows(rows) ? max_splits_for_rows(rows) : splits);

  PartialArgs a{cache, q, head_stride, positions, selected, selected_count, max_selected, heads, kv_heads, head_dim,
                group_chunk, lanes, tile, splits, workspace,
                workspace + static_cast<size_t>(rows) * heads * splits * head_dim};
  const dim3 grid(splits, kv_heads * chunks_per_kv, rows);
  if (mma) {
    launch_partial_mma(a, grid, stream);
  } else if (cache.bf16) {
    if (vector) {
      launch_partial_d<true, 8>(d, a, grid, shared, stream);
    } else {
      launch_partial_d<true, 1>(d, a, grid, shared, stream);
    }
  } else {
    if (vector) {
      launch_partial_d<false, 4>(d, a, grid, shared, stream);
    } else {
      launch_partial_d<false, 1>(d, a, grid, shared, stream);
    }
  }
  const dim3 combine_grid((head_dim + kCombineThreads - 1) / kCombineThreads, heads, rows);
  launch_kernel(attention_decode_combine_kernel, combine_grid, kCombineThreads, 0, stream, 1,
                gate, head_stride, heads, head_dim, splits,
                                                                                 a.partial_acc, a.partial_stats, out);
}

}  // namespace imp::cuda
