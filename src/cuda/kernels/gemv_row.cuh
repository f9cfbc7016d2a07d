// One warp's dot products of one BF16 weight row with Rows fp32 vectors, for the decode GEMV kernels. Each
// lane takes 8 weights (16 bytes) at a time, coalesced across the warp, and issues Batch loads (kGemvBatch unless
// the caller picks another) before it uses any of them. load_x(r, c, xv) supplies x[r, c .. c + 8), so fused
// kernels can compute their input on the fly. Returns the warp-summed dots in every lane.
#pragma once

#include <cstdint>

#include "cuda/kernels/device_math.cuh"
#include "cuda/kernels/fp_codes.cuh"

namespace imp::cuda {

constexpr int kGemvBatch = 2;
constexpr int kGemvThreads = 128;  // 4 warps per block
constexpr int kGemvWarps = kGemvThreads / kWarp;
// Measured on the H200, decode of the full-scale dummy model (tg 128 at 1K, session 10, once the first batch really
// went out before the PDL wait): 2 loads per lane 205.8 tok/s, 3: 204.5, 4: 203.1, 6: 189.2, 8: 190.1; the GEMVs
// are bound by how many blocks are resident (registers), not by loads per lane. Earlier (session 3, loads then after
// the wait): streaming (.cs) loads or 512-thread blocks were up to 15% slower on the mid-size projections.

// PDL: the first batch of weight loads goes out before pdl_wait(); load_x runs after it (see device_math.cuh).
// Chunks (8 inputs each) [first, last) of the row; bf16_row_dots covers all of it.
template <int Rows, class LoadX, int Batch = kGemvBatch>
__device__ __forceinline__ void bf16_row_dots_range(const uint16_t* row, int first, int last, LoadX load_x,
                                                    float (&acc)[Rows]) {
  const int lane = threadIdx.x % kWarp;
  const uint4* w = reinterpret_cast<const uint4*>(row);
#pragma unroll
  for (int r = 0; r < Rows; ++r) acc[r] = 0.0f;
  uint4 packed[Batch];
  auto load_batch = [&](int c0) {
#pragma unroll
    for (int b = 0; b < Batch; ++b) {
      if (c0 + b * kWarp < last) packed[b] = load_weight16(w + c0 + b * kWarp);
    }
  };
  load_batch(first + lane);
  pdl_wait();
  for (int c0 = first + lane; c0 < last; c0 += kWarp * Batch) {
    if (c0 != first + lane) load_batch(c0);
#pragma unroll
    for (int b = 0; b < Batch; ++b) {
      if (c0 + b * kWarp >= last) break;
      const int c = 8 * (c0 + b * kWarp);
      const uint32_t words[4] = {packed[b].x, packed[b].y, packed[b].z, packed[b].w};
      float wf[8];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        wf[2 * i] = bf16_bits_to_float(words[i] & 0xffffu);
        wf[2 * i + 1] = bf16_bits_to_float(words[i] >> 16);
      }
#pragma unroll
      for (int r = 0; r < Rows; ++r) {
        float xv[8];
        load_x(r, c, xv);
        acc[r] += wf[0] * xv[0] + wf[1] * xv[1] + wf[2] * xv[2] + wf[3] * xv[3] + wf[4] * xv[4] + wf[5] * xv[5] +
                  wf[6] * xv[6] + wf[7] * xv[7];
      }
    }
  }
#pragma unroll
  for (int r = 0; r < Rows; ++r) acc[r] = warp_sum(acc[r]);
}

template <int Rows, class LoadX>
__device__ __forceinline__ void bf16_row_dots(const uint16_t* row, int k, LoadX load_x, float (&acc)[Rows]) {
  bf16_row_dots_range<Rows>(row, 0, k / 8, load_x, acc);
}

// Split-K decode GEMV: each row's K split over `split` warps of a 4-warp block (1, 2 or 4; 4 / split rows per
// block), the partial dots added in part order in shared memory. Only GEMVs with few rows gain: decode on the
// H200 (full-scale dummy model, tg 128 at 1K, medians of 5) ran 174.1 tok/s with 2 warps per row below 8192 rows
// (the 2560 x 6144 output projections, the 1793 x 2560 MoE input), 170.5 with 2 for every GEMV with K >= 2048,
// 167.9 with 4 for the 8192+ row input projections. A/B of single GEMVs with cold weights:
// bench/experiments/gemv_split_k.cu, bench/results/2026-11-29_gemv_split_k_ab.txt.
inline int gemv_split(int rows, int k) { return k >= 2048 && rows < 8192 ? 2 : 1; }
inline unsigned gemv_split_blocks(int rows, int split) {
  const int per_block = kGemvWarps / split;
  return static_cast<unsigned>((rows + per_block - 1) / per_block);
}

// Weight rows by output index: all of them in order.
struct AllRows {
  __device__ __forceinline__ int operator()(int row) const { return row; }
};

// Weight rows by output index with [from, from + count) left out (a part another kernel computes).
struct SkipRows {
  int from, count;
  __device__ __forceinline__ int operator()(int row) const { return row < from ? row : row + count; }
};

// The kernel body: epilogue(row, acc, early) runs once per output row with the full dots, where early =
// prepare(row) was called by the same thread as soon as its own dots were done (it has waited): loads the epilogue
// needs go out there, before the split-K reduction, instead of after it. The n outputs are the weight rows
// rows(0) .. rows(n - 1); prepare and epilogue get those weight row indices.
template <int Rows, class LoadX, class Prepare, class Epilogue, class RowMap = AllRows, int Batch = kGemvBatch>
__device__ __forceinline__ void gemv_rows_prepared(const uint16_t* weight, int n, int k, int split, LoadX load_x,
                                                   Prepare prepare, Epilogue epilogue, RowMap rows = {}) {
  __shared__ float partial[kGemvWarps][Rows];
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int per_block = kGemvWarps / split, part = warp % split;
  const int row = blockIdx.x * per_block + warp / split;
  const int chunks = k / 8, per = (chunks + split - 1) / split;
  const int first = min(chunks, part * per), last = min(chunks, first + per);
  float acc[Rows];
  if (row < n) bf16_row_dots_range<Rows, LoadX, Batch>(weight + static_cast<size_t>(rows(row)) * k, first, last, load_x, acc);
  if (split == 1) {
    if (row < n && lane == 0) epilogue(rows(row), acc, prepare(rows(row)));
    return;
  }
  // warp 0's lanes finish the block's rows; warp 0 holds the block's first row, so it has waited
  const int t = static_cast<int>(threadIdx.x), out = blockIdx.x * per_block + t;
  const bool finisher = t < per_block && out < n;
  decltype(prepare(0)) early{};
  if (finisher) early = prepare(rows(out));
  if (row < n && lane == 0) {
#pragma unroll
    for (int r = 0; r < Rows; ++r) partial[warp][r] = acc[r];
  }
  __syncthreads();
  if (finisher) {
    float sum[Rows];
#pragma unroll
    for (int r = 0; r < Rows; ++r) {
      sum[r] = 0.0f;
      for (int p = 0; p < split; ++p) sum[r] += partial[t * split + p][r];
    }
    epilogue(rows(out), sum, early);
  }
}

struct NoEarlyLoads {};
struct NoPrepare {
  __device__ __forceinline__ NoEarlyLoads operator()(int) const { return {}; }
};

// The weight row this thread finishes in gemv_rows (its epilogue runs here), or -1: lane 0 of each warp without
// split-K, warp 0's first lanes with it.
template <class RowMap = AllRows>
__device__ __forceinline__ int gemv_finisher_row(int n, int split, RowMap rows = {}) {
  const int per_block = kGemvWarps / split, t = static_cast<int>(threadIdx.x);
  const int first = static_cast<int>(blockIdx.x) * per_block;
  const int row = split == 1 ? (t % kWarp == 0 ? first + t / kWarp : -1) : (t < per_block ? first + t : -1);
  return row >= 0 && row < n ? rows(row) : -1;
}

// gemv_rows_prepared with nothing to load early: epilogue(row, acc).
template <int Rows, class LoadX, class Epilogue, class RowMap = AllRows, int Batch = kGemvBatch>
__device__ __forceinline__ void gemv_rows(const uint16_t* weight, int n, int k, int split, LoadX load_x,
                                          Epilogue epilogue, RowMap rows = {}) {
  auto finish = [&](int row, const float (&acc)[Rows], NoEarlyLoads) { epilogue(row, acc); };
  gemv_rows_prepared<Rows, LoadX, NoPrepare, decltype(finish), RowMap, Batch>(weight, n, k, split, load_x, {}, finish,
                                                                                rows);
}

// load_x for plain fp32 rows [Rows, k].
struct PlainX {
  const float* x;
  int k;
  __device__ __forceinline__ void operator()(int r, int c, float (&xv)[8]) const {
    const float4 x0 = *reinterpret_cast<const float4*>(x + static_cast<size_t>(r) * k + c);
    const float4 x1 = *reinterpret_cast<const float4*>(x + static_cast<size_t>(r) * k + c + 4);
    xv[0] = x0.x, xv[1] = x0.y, xv[2] = x0.z, xv[3] = x0.w, xv[4] = x1.x, xv[5] = x1.y, xv[6] = x1.z, xv[7] = x1.w;
  }
};

// x[i] = x[i] * gate[i] for one row: an output gate applied where the GEMV reads its input.
struct GatedX {
  const float* x;
  const float* gate;
  __device__ __forceinline__ void operator()(int, int c, float (&xv)[8]) const {
    PlainX{x, 0}(0, c, xv);
    float gv[8];
    PlainX{gate, 0}(0, c, gv);
#pragma unroll
    for (int i = 0; i < 8; ++i) xv[i] *= gv[i];
  }
};

// x[i] = silu(gate[i]) * up[i], computed where the GEMV reads it.
struct SwigluX {
  const float* gate;
  const float* up;
  __device__ __forceinline__ void operator()(int, int c, float (&xv)[8]) const {
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const float g = gate[c + i];
      xv[i] = g * sigmoidf(g) * up[c + i];
    }
  }
};

}  // namespace imp::cuda
