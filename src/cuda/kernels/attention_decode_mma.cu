// The decode attention's partial kernel on tensor cores (bf16 pages): per tile of 16 tokens, the scores of the
// block's query heads (M = 16 rows, the GQA group padded) against the tile's keys, and P V, as m16n8k16 MMAs.
// The CUDA-core kernel (attention_decode.cu) spent most of its time in per-head chains (a shuffle reduction per
// head and token, Nsight Compute, session 20); here a tile is a few MMAs per warp. fp32-grade inputs: the
// queries and the probabilities enter as two bf16 terms each (hi + lo, ~2^-17 relative), the pages are bf16.
#include "cuda/kernels/attention_decode_partial.h"
#include "cuda/kernels/attention_phase.cuh"

#include <cfloat>

#include "cuda/launch.h"
#include "cuda/kernels/device_math.cuh"
#include "cuda/kernels/kv_pages.cuh"
#include "cuda/kernels/prefill_common.cuh"
#include "cuda/kernels/split_bf16_mma.cuh"

namespace imp::cuda::attention {
namespace {

constexpr int kThreads = 256, kWarps = kThreads / kWarp;
constexpr int kMmaTile = 16;  // tokens per tile: the scores' two n8 tiles, P V's one k16 step
constexpr int kRows = 16;  // query heads per block, padded to the MMA's M
constexpr int kMaxHd = 256;
constexpr int kChunksPerThread = kMmaTile * kMaxHd / 8 / kThreads;  // 16-byte K (and V) chunks of a tile per thread
constexpr int kMaxKsteps = kMaxHd / 16 / kWarps;                    // k16 steps of the scores per warp
constexpr int kMaxPairs = kMaxHd / 16 / kWarps;                      // P V column pairs (two n8 tiles) per warp

// bf16 elements per shared row of q, k and v: 16 bytes of skew per row, so ldmatrix's 8 rows hit distinct banks.
__host__ __device__ constexpr int row_elems(int hd) { return hd + 8; }

// k_s, v_s [kMmaTile][row] (bf16), the warps' partial scores [kWarps][kRows][kMmaTile] and the scores /
// probabilities p_s [kRows][kMmaTile] (fp32). The queries stay in registers (each warp's A fragments).
__host__ __device__ constexpr size_t shared_bytes(int hd) {
  return static_cast<size_t>(2 * kMmaTile) * row_elems(hd) * 2 +
         static_cast<size_t>(kWarps + 1) * kRows * kMmaTile * sizeof(float);
}

// Block (split, KV head x head chunk, row), as attention_decode_partial_kernel: the same token ranges (tiles of
// kMmaTile), the same partials.
__global__ void __launch_bounds__(kThreads) attention_decode_partial_mma_kernel(PartialArgs a) {
  extern __shared__ __align__(16) uint8_t smem[];
  __shared__ float m_s[kRows], l_s[kRows], corr_s[kRows];
  const int hd = a.hd, re = row_elems(hd), row_chunks = hd / 8;
  uint16_t* const k_s = reinterpret_cast<uint16_t*>(smem);
  uint16_t* const v_s = k_s + kMmaTile * re;
  float* const s_part = reinterpret_cast<float*>(v_s + kMmaTile * re);
  float* const p_s = s_part + kWarps * kRows * kMmaTile;
  const int tid = threadIdx.x, lane = tid % kWarp, warp = tid / kWarp, g = lane / 4, c = lane % 4;
  const int split = blockIdx.x, row = blockIdx.z;
  const int group = a.heads / a.kv_heads, chunks_per_kv = (group + a.group_chunk - 1) / a.group_chunk;
  const int kvh = blockIdx.y / chunks_per_kv, chunk = blockIdx.y % chunks_per_kv;
  const int head0 = kvh * group + chunk * a.group_chunk;
  const int gn = min(a.group_chunk, group - chunk * a.group_chunk);
  const size_t part0 = (static_cast<size_t>(row) * a.heads + head0) * a.splits + split;
  const int width = a.kv_heads * hd;
  const auto* keys = static_cast<const uint16_t*>(a.cache.keys);
  const auto* values = static_cast<const uint16_t*>(a.cache.values);

  // A tile's K and V: chunk e = tid + i * kThreads is token e / row_chunks, elements 8 (e % row_chunks) on; zeros
  // past `valid` (their scores are masked, their values meet p = 0).
  uint4 kraw[kChunksPerThread], vraw[kChunksPerThread];
  auto load_tile = [&](int start, int valid, int count, int visible) {
#pragma unroll
    for (int i = 0; i < kChunksPerThread; ++i) {
      const int e = tid + i * kThreads, t = e / row_chunks;
      kraw[i] = vraw[i] = make_uint4(0, 0, 0, 0);
      if (t < valid) {
        const int n = start + t;
        const int token = count < visible ? a.selected[static_cast<size_t>(row) * a.max_selected + n] : n;
        const size_t at = cache_index(a.cache, row, token, kvh * hd + 8 * (e % row_chunks), width);
        kraw[i] = *reinterpret_cast<const uint4*>(keys + at);
        vraw[i] = *reinterpret_cast<const uint4*>(values + at);
      }
    }
  };
  auto store_tile = [&]() {
#pragma unroll
    for (int i = 0; i < kChunksPerThread; ++i) {
      const int e = tid + i * kThreads, t = e / row_chunks;
      if (t < kMmaTile) {
        *reinterpret_cast<uint4*>(k_s + t * re + 8 * (e % row_chunks)) = kraw[i];
        *reinterpret_cast<uint4*>(v_s + t * re + 8 * (e % row_chunks)) = vraw[i];
      }
    }
  };
  // The warp's A fragments of the block's query rows (its k16 steps warp, warp + kWarps, ...) as hi and lo bf16
  // terms, rows >= gn zero; every load before any split. Lane (g, c) holds rows g and g + 8, columns 2c, 2c + 1
  // and 2c + 8, 2c + 9 of each step: the registers ldmatrix_x4 gave from a shared copy before session 34.
  uint32_t q_hi[kMaxKsteps][4], q_lo[kMaxKsteps][4];
  auto load_queries = [&]() {
    float2 v[kMaxKsteps][4];
#pragma unroll
    for (int i = 0; i < kMaxKsteps; ++i) {
      const int ks = warp + i * kWarps;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int r = g + 8 * (j % 2), col = 16 * ks + 2 * c + 8 * (j / 2);
        v[i][j] = make_float2(0.0f, 0.0f);
        if (ks < hd / 16 && r < gn) {
          const float* q_row = a.q + (static_cast<size_t>(row) * a.heads + head0 + r) * a.head_stride;
          v[i][j] = *reinterpret_cast<const float2*>(q_row + col);
        }
      }
    }
#pragma unroll
    for (int i = 0; i < kMaxKsteps; ++i) {
#pragma unroll
      for (int j = 0; j < 4; ++j) split_bf16_mma::split_bf16(v[i][j], q_hi[i][j], q_lo[i][j]);
    }
  };

  phase(0, 0);
  pdl_begin();
  const int visible = a.positions[row] + 1;
  load_queries();
  phase(0, 1);
  const int count = a.selected ? a.selected_count[row] : visible;
  int begin = 0, end = 0;
  split_range(count, a.splits, split, kMmaTile, begin, end);
  if (begin >= end) {  // nothing here: neutral stats (the combine skips l == 0 and never reads this acc)
    if (tid < gn) {
      a.partial_stats[2 * (part0 + static_cast<size_t>(tid) * a.splits)] = -FLT_MAX;
      a.partial_stats[2 * (part0 + static_cast<size_t>(tid) * a.splits) + 1] = 0.0f;
    }
    return;
  }
  if (tid < kRows) {
    m_s[tid] = -FLT_MAX;
    l_s[tid] = 0.0f;
    corr_s[tid] = 1.0f;
  }

  const float scale = rsqrtf(static_cast<float>(hd));
  const int ksteps = hd / 16;
  float o[kMaxPairs][2][4];  // P V accumulators: column pair pi, n8 tile, fragment (rows g, g + 8)
#pragma unroll
  for (int pi = 0; pi < kMaxPairs; ++pi) {
#pragma unroll
    for (int nt = 0; nt < 2; ++nt) {
#pragma unroll
      for (int j = 0; j < 4; ++j) o[pi][nt][j] = 0.0f;
    }
  }

  for (int start = begin; start < end; start += kMmaTile) {
    const int valid = min(kMmaTile, end - start);
    load_tile(start, valid, count, visible);
    store_tile();
    __syncthreads();  // the tile (and, the first time, the stats) in place
    phase(0, 2);

    // Scores: warp w takes the k16 steps w, w + 8, ... of both n8 tiles (tokens 0-7, 8-15).
    float s_acc[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
#pragma unroll
    for (int i = 0; i < kMaxKsteps; ++i) {
      const int ks = warp + i * kWarps;
      if (ks >= ksteps) break;
      const uint32_t(&ah)[4] = q_hi[i];
      const uint32_t(&al)[4] = q_lo[i];
      uint32_t b[4];
      const int b_token = lane % 8 + 8 * (lane / 16), b_col = 16 * ks + 8 * ((lane / 8) % 2);
      prefill::ldmatrix_x4(b, k_s + b_token * re + b_col);
      mma_16816(s_acc[0], ah, b[0], b[1]);
      mma_16816(s_acc[0], al, b[0], b[1]);
      mma_16816(s_acc[1], ah, b[2], b[3]);
      mma_16816(s_acc[1], al, b[2], b[3]);
    }
    float* const mine = s_part + warp * kRows * kMmaTile;
#pragma unroll
    for (int nt = 0; nt < 2; ++nt) {
      *reinterpret_cast<float2*>(mine + g * kMmaTile + 8 * nt + 2 * c) = make_float2(s_acc[nt][0], s_acc[nt][1]);
      *reinterpret_cast<float2*>(mine + (g + 8) * kMmaTile + 8 * nt + 2 * c) = make_float2(s_acc[nt][2], s_acc[nt][3]);
    }
    __syncthreads();
    {  // the warps' partial scores summed in warp order: thread (head r, token t)
      const int r = tid / kMmaTile, t = tid % kMmaTile;
      float s = 0.0f;
#pragma unroll
      for (int w = 0; w < kWarps; ++w) s += s_part[(w * kRows + r) * kMmaTile + t];
      p_s[r * kMmaTile + t] = s * scale;
    }
    __syncthreads();
    phase(0, 3);

    // Online softmax per head (a warp per head, a lane per token): p_s becomes exp(score - m_new), 0 past `valid`.
    for (int h = warp; h < gn; h += kWarps) {
      float* const ph = p_s + h * kMmaTile;
      const float score = lane < valid ? ph[lane] : -FLT_MAX;
      const float m_old = m_s[h], m_new = fmaxf(m_old, warp_max(score));
      const float p = lane < valid ? expf(score - m_new) : 0.0f;
      if (lane < kMmaTile) ph[lane] = p;
      const float sum = warp_sum(p);
      if (lane == 0) {
        const float correction = expf(m_old - m_new);
        corr_s[h] = correction;
        l_s[h] = l_s[h] * correction + sum;
        m_s[h] = m_new;
      }
    }
    __syncthreads();
    phase(0, 4);

    // P V: A = P (heads x the tile's 16 tokens) as hi + lo, B = V^T by transposed ldmatrix; warp w takes the
    // column pairs w, w + 8, ... Rows >= gn have p = 0 (zero queries score 0, and softmax leaves them alone).
    uint32_t ph4[4], pl4[4];
    split_bf16_mma::split_bf16(*reinterpret_cast<const float2*>(p_s + g * kMmaTile + 2 * c), ph4[0], pl4[0]);
    split_bf16_mma::split_bf16(*reinterpret_cast<const float2*>(p_s + (g + 8) * kMmaTile + 2 * c), ph4[1], pl4[1]);
    split_bf16_mma::split_bf16(*reinterpret_cast<const float2*>(p_s + g * kMmaTile + 2 * c + 8), ph4[2], pl4[2]);
    split_bf16_mma::split_bf16(*reinterpret_cast<const float2*>(p_s + (g + 8) * kMmaTile + 2 * c + 8), ph4[3], pl4[3]);
    const float corr_lo = corr_s[g], corr_hi = corr_s[g + 8];
#pragma unroll
    for (int pi = 0; pi < kMaxPairs; ++pi) {
      const int pair = warp + pi * kWarps;
      if (pair >= ksteps) break;
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) {
        o[pi][nt][0] *= corr_lo;
        o[pi][nt][1] *= corr_lo;
        o[pi][nt][2] *= corr_hi;
        o[pi][nt][3] *= corr_hi;
      }
      uint32_t b[4];
      const int v_token = lane % 8 + 8 * ((lane / 8) % 2), v_col = 16 * pair + 8 * (lane / 16);
      prefill::ldmatrix_x4_trans(b, v_s + v_token * re + v_col);
      mma_16816(o[pi][0], ph4, b[0], b[1]);
      mma_16816(o[pi][0], pl4, b[0], b[1]);
      mma_16816(o[pi][1], ph4, b[2], b[3]);
      mma_16816(o[pi][1], pl4, b[2], b[3]);
    }
    __syncthreads();  // k_s, v_s, p_s and corr_s are rewritten by the next tile
    phase(0, 5);
  }

#pragma unroll
  for (int pi = 0; pi < kMaxPairs; ++pi) {
    const int pair = warp + pi * kWarps;
    if (pair >= ksteps) break;
#pragma unroll
    for (int nt = 0; nt < 2; ++nt) {
      const int d = 16 * pair + 8 * nt + 2 * c;
      if (g < gn) {
        *reinterpret_cast<float2*>(a.partial_acc + (part0 + static_cast<size_t>(g) * a.splits) * hd + d) =
            make_float2(o[pi][nt][0], o[pi][nt][1]);
      }
      if (g + 8 < gn) {
        *reinterpret_cast<float2*>(a.partial_acc + (part0 + static_cast<size_t>(g + 8) * a.splits) * hd + d) =
            make_float2(o[pi][nt][2], o[pi][nt][3]);
      }
    }
  }
  if (tid < gn) {
    a.partial_stats[2 * (part0 + static_cast<size_t>(tid) * a.splits)] = m_s[tid];
    a.partial_stats[2 * (part0 + static_cast<size_t>(tid) * a.splits) + 1] = l_s[tid];
  }
  phase(0, 6);
}

}  // namespace

bool partial_mma_supported(const KvPages& cache, const float* q, int head_stride, int head_dim, bool vector) {
  return cache.bf16 && vector && head_dim % 16 == 0 && head_dim <= kMaxHd && head_stride % 4 == 0 &&
         reinterpret_cast<uintptr_t>(q) % 16 == 0;
}

void launch_partial_mma(const PartialArgs& a, dim3 grid, cudaStream_t stream) {
  launch_kernel(attention_decode_partial_mma_kernel, grid, kThreads, shared_bytes(a.hd), stream, 1, a);
}

}  // namespace imp::cuda::attention
