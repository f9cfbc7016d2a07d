#include "cuda/kernels/moe_prefill.h"

#include <algorithm>

#include "cuda/check.h"
#include "cuda/kernels/prefill_common.cuh"

namespace imp::cuda {
namespace {

using namespace prefill;

constexpr int kTileTokens = 128;  // (token, choice) pairs per tile: 16 mma n-tiles of 8
constexpr int kWarps = 8;         // one 16-row strip of weights (gate/up: one of each) per warp
constexpr int kThreads = kWarps * 32;
constexpr int kStages = 4;        // cp.async stages of 64-input chunks (activations and raw NVFP4 weights)
constexpr int kXStride = 72;      // bf16 per activation row in shared memory (144 bytes: conflict-free ldmatrix)
constexpr int kXStageBytes = kTileTokens * kXStride * 2;  // 18 KB
constexpr int kStripBytes = 576;  // one (strip, supertile) of an NVFP4 slot: 512 bytes of codes, 64 of scales

// Weight strips per warp: gate and up (the SwiGLU needs both; one activation fragment feeds both) or down.
template <bool kGateUp>
constexpr int strips_per_warp() {
  return kGateUp ? 2 : 1;
}
template <bool kGateUp>
constexpr int stage_bytes() {
  return kXStageBytes + kWarps * strips_per_warp<kGateUp>() * kStripBytes;
}
template <bool kGateUp>
constexpr int smem_bytes() {
  return kStages * stage_bytes<kGateUp>();
}
static_assert(smem_bytes<true>() == 110592 && smem_bytes<false>() == 92160, "stage sizes");
static_assert(kWarps * kTileTokens * 24 * 2 <= smem_bytes<true>(), "gate/up epilogue fits");
static_assert(kWarps * kTileTokens * 20 * 4 <= smem_bytes<false>(), "down epilogue fits");
static_assert(2 * (smem_bytes<false>() + 2 * kTileTokens * 4 + 1024) <= 228 * 1024, "two down blocks per SM");

struct Plan {
  size_t counts = 0, cursor = 0, tiles = 0, num_tiles = 0, sorted = 0, x16 = 0, act = 0, partial = 0;
  size_t bytes = 0;
  int64_t max_tiles = 0;
};

Plan make_plan(const model::ExpertSlotLayout& layout, int64_t tokens, int64_t k, int64_t num_slots) {
  Plan p;
  const int64_t pairs = tokens * k;
  // A slot with c pairs gets ceil(c / kTileTokens) tiles.
  p.max_tiles = (pairs + kTileTokens - 1) / kTileTokens + std::min(num_slots, pairs);
  size_t offset = 0;
  auto take = [&](int64_t bytes) {
    const size_t at = offset;
    offset += (static_cast<size_t>(bytes) + 255) / 256 * 256;
    return at;
  };
  p.counts = take(num_slots * 4);
  p.cursor = take(num_slots * 4);
  p.tiles = take(p.max_tiles * 16);
  p.num_tiles = take(4);
  p.sorted = take(pairs * 4);
  p.x16 = take(tokens * layout.hidden * 2);
  p.act = take(pairs * layout.padded_intermediate * 2);
  p.partial = take(pairs * layout.hidden * 4);
  p.bytes = offset;
  return p;
}

__global__ void count_kernel(const int32_t* slots, int pairs, int32_t* counts) {
  const int p = blockIdx.x * blockDim.x + threadIdx.x;
  if (p < pairs) atomicAdd(&counts[slots[p]], 1);
}

// One block: exclusive offsets of each slot's pairs (cursor) and the tile list, slot by slot, in slot order.
// A slot with c pairs gets n = ceil(c / 128) tiles of the same size (rounded up to 16; the last one smaller):
// e.g. 130 pairs make tiles of 80 and 50 rather than 128 and 2.
constexpr int kPlanThreads = 1024;
__global__ void __launch_bounds__(kPlanThreads) plan_kernel(const int32_t* counts, int num_slots, int32_t* cursor,
                                                            int4* tiles, int32_t* num_tiles) {
  __shared__ int s_pairs[kPlanThreads], s_tiles[kPlanThreads];
  const int tid = threadIdx.x;
  const int per = (num_slots + kPlanThreads - 1) / kPlanThreads;
  const int begin = min(tid * per, num_slots), end = min(begin + per, num_slots);
  int pairs = 0, tl = 0;
  for (int s = begin; s < end; ++s) {
    const int c = counts[s];
    pairs += c;
    tl += (c + kTileTokens - 1) / kTileTokens;
  }
  s_pairs[tid] = pairs;
  s_tiles[tid] = tl;
  __syncthreads();
  for (int off = 1; off < kPlanThreads; off <<= 1) {  // inclusive scan (Hillis-Steele)
    const int a = tid >= off ? s_pairs[tid - off] : 0, b = tid >= off ? s_tiles[tid - off] : 0;
    __syncthreads();
    s_pairs[tid] += a;
    s_tiles[tid] += b;
    __syncthreads();
  }
  int pair_off = s_pairs[tid] - pairs, tile_off = s_tiles[tid] - tl;
  for (int s = begin; s < end; ++s) {
    const int c = counts[s];
    cursor[s] = pair_off;
    const int n = (c + kTileTokens - 1) / kTileTokens;
    if (n > 0) {
      // size <= 128 (c <= 128 n) and (n - 1) * size < c (c > 128 (n - 1)): every tile has 1..128 pairs.
      const int size = ((c + n - 1) / n + 15) / 16 * 16;
      for (int i = 0; i < n; ++i) tiles[tile_off++] = make_int4(s, pair_off + i * size, min(size, c - i * size), 0);
    }
    pair_off += c;
  }
  if (tid == kPlanThreads - 1) *num_tiles = s_tiles[tid];
}

// Pairs grouped by slot. The order inside a slot's bucket depends on atomics, which is harmless: a pair's
// results never depend on the other pairs of its tile.
__global__ void scatter_kernel(const int32_t* slots, int pairs, int32_t* cursor, int32_t* sorted) {
  const int p = blockIdx.x * blockDim.x + threadIdx.x;
  if (p >= pairs) return;
  const int pos = atomicAdd(&cursor[slots[p]], 1);
  sorted[pos] = p;
}

__global__ void to_bf16_kernel(const float* x, size_t quads, uint16_t* out) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < quads; i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const float4 v = reinterpret_cast<const float4*>(x)[i];
    reinterpret_cast<uint2*>(out)[i] = make_uint2(pack_bf16x2(v.x, v.y), pack_bf16x2(v.z, v.w));
  }
}

// NVFP4 A fragments of one 16-row strip for tile q of a 64-input supertile: E2M1 decoded and multiplied by
// the E4M3 block scale (times 2^-8) in bf16, exactly.
__device__ __forceinline__ void nvfp4_fragment(uint32_t word, uint32_t scales_row_g, uint32_t scales_row_g8, int q,
                                               uint32_t (&a)[4]) {
  decode_e2m1x8(word, a);
  const float f0 = e4m3_to_float_scaled((scales_row_g >> (8 * q)) & 0xffu);
  const float f1 = e4m3_to_float_scaled((scales_row_g8 >> (8 * q)) & 0xffu);
  const uint32_t s0 = pack_bf16x2(f0, f0), s1 = pack_bf16x2(f1, f1);
  a[0] = bf16x2_mul(a[0], s0);  // row g
  a[2] = bf16x2_mul(a[2], s0);
  a[1] = bf16x2_mul(a[1], s1);  // row g + 8
  a[3] = bf16x2_mul(a[3], s1);
}

// BF16 A fragments straight from a row-major [rows, cols] projection, zero outside it.
__device__ __forceinline__ void bf16_fragment(const uint16_t* w, int rows, int cols, int row0, int k0, uint32_t (&a)[4]) {
  const int g = (threadIdx.x & 31) >> 2, c = threadIdx.x & 3;
  const int r0 = row0 + g, r1 = r0 + 8, kk = k0 + 2 * c;
  auto at = [&](int r, int kx) -> uint32_t {
    return (r < rows && kx < cols) ? __ldg(reinterpret_cast<const uint32_t*>(w + static_cast<size_t>(r) * cols + kx)) : 0u;
  };
  a[0] = at(r0, kk);
  a[1] = at(r1, kk);
  a[2] = at(r0, kk + 8);
  a[3] = at(r1, kk + 8);
}

__device__ __forceinline__ uint32_t word_of(const uint4& v, int q) {
  return q == 0 ? v.x : q == 1 ? v.y : q == 2 ? v.z : v.w;
}

// Grouped expert GEMM over one tile (<= 128 pairs of one slot) x 8 strips of 16 weight rows (one per warp;
// blockIdx.y picks the strips). Weights are the mma A operand (16 rows per warp, NVFP4 fragments decoded
// in registers, reused over all the tile's pairs), the tile's activations the B operand (ldmatrix from
// shared memory, shared by the 8 warps). One cp.async pipeline of kStages stages carries, per 64-input
// chunk, the activation rows and (NVFP4) each warp's raw codes and scales, so weight loads overlap the MMAs.
//   kGateUp: in = x16 (gathered by token), strips of gate and up together, SwiGLU -> act [bucket order,
//            padded_intermediate] bf16.
//   down:    in = act (bucket order), strips of down -> weighted fp32 partial [t*k + j, hidden].
template <bool kNvfp4, bool kGateUp>
__global__ void __launch_bounds__(kThreads, kGateUp ? 1 : 2)
    moe_gemm_kernel(const uint8_t* __restrict__ pool, const model::SlotScales* __restrict__ scales,
                    model::ExpertSlotLayout layout, const uint16_t* __restrict__ in, const int32_t* __restrict__ sorted,
                    const float* __restrict__ weights, const int4* __restrict__ tiles, const int32_t* __restrict__ num_tiles,
                    int k, uint16_t* __restrict__ act, float* __restrict__ partial) {
  constexpr int NS = strips_per_warp<kGateUp>();
  constexpr int kStageBytes = stage_bytes<kGateUp>();
  extern __shared__ __align__(16) uint8_t smem[];
  __shared__ int s_row[kTileTokens];    // gate/up: token of each pair (-1 beyond the tile); down: pair index t*k + j
  __shared__ float s_w[kTileTokens];    // down: routing weight of each pair
  if (static_cast<int>(blockIdx.x) >= *num_tiles) return;  // block-uniform, before any barrier
  const int4 tile = tiles[blockIdx.x];
  const int slot = tile.x, start = tile.y, count = tile.z;
  const int H = layout.hidden, I = layout.intermediate, Ipad = layout.padded_intermediate;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, c = lane & 3;
  if (tid < kTileTokens) {
    const int p = tid < count ? sorted[start + tid] : -1;
    if constexpr (kGateUp) {
      s_row[tid] = p >= 0 ? p / k : -1;
    } else {
      s_row[tid] = p;
      s_w[tid] = p >= 0 ? weights[p] : 0.0f;
    }
  }
  __syncthreads();

  // Input rows: x16 [tokens, H] by token, or act [pairs, Ipad] by bucket position; zero beyond in_cols.
  const int in_stride = kGateUp ? H : Ipad;
  const int in_cols = kGateUp ? H : (kNvfp4 ? Ipad : I);
  const int w_rows = kGateUp ? I : H, w_cols = kGateUp ? H : I;  // BF16 projections [w_rows, w_cols]
  const model::SlotProjection& p0 = kGateUp ? layout.gate : layout.down;
  const model::SlotProjection& p1 = kGateUp ? layout.up : layout.down;
  const int chunks = kNvfp4 ? p0.supertiles() : (w_cols + 63) / 64;
  const int strips = kNvfp4 ? p0.rows / 16 : (w_rows + 15) / 16;
  const int strip = blockIdx.y * kWarps + warp;
  const bool active = strip < strips;  // warp-uniform
  const uint8_t* base = pool + static_cast<size_t>(slot) * layout.slot_bytes;
  const uint8_t* w_codes[NS];
  const uint8_t* w_scales[NS];
#pragma unroll
  for (int s = 0; s < NS; ++s) {
    const model::SlotProjection& pr = s == 0 ? p0 : p1;
    w_codes[s] = base + pr.codes + static_cast<size_t>(strip) * chunks * 512;
    w_scales[s] = base + pr.scales + static_cast<size_t>(strip) * chunks * 64;
  }

  auto load_stage = [&](int st, int stage) {
    uint8_t* sb = smem + stage * kStageBytes;
    uint16_t* dst = reinterpret_cast<uint16_t*>(sb);
#pragma unroll
    for (int i = 0; i < kTileTokens * 8 / kThreads; ++i) {
      const int id = tid + i * kThreads, r = id >> 3, cc = (id & 7) * 8;
      const int row = kGateUp ? s_row[r] : (r < count ? start + r : -1);
      const int gk = st * 64 + cc;
      const bool ok = row >= 0 && gk < in_cols;
      cp_async16(dst + r * kXStride + cc, ok ? in + static_cast<size_t>(row) * in_stride + gk : in, ok);
    }
    if constexpr (kNvfp4) {
      if (active) {
        uint8_t* wdst = sb + kXStageBytes + warp * (NS * kStripBytes);
#pragma unroll
        for (int s = 0; s < NS; ++s) {
          cp_async16(wdst + s * kStripBytes + lane * 16, w_codes[s] + static_cast<size_t>(st) * 512 + lane * 16, true);
          if (lane < 4) {
            cp_async16(wdst + s * kStripBytes + 512 + lane * 16, w_scales[s] + static_cast<size_t>(st) * 64 + lane * 16, true);
          }
        }
      }
    }
  };

  float acc[NS][2 * kTileTokens / 16][4];
#pragma unroll
  for (int s = 0; s < NS; ++s)
#pragma unroll
    for (int i = 0; i < 2 * kTileTokens / 16; ++i)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[s][i][e] = 0.0f;

#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < chunks) load_stage(s, s);
    cp_async_commit();
  }
  for (int st = 0; st < chunks; ++st) {
    cp_async_wait<kStages - 2>();
    __syncthreads();  // stage st is visible to all; everyone is done with stage st - 1, which is refilled now
    const int next = st + kStages - 1;
    if (next < chunks) load_stage(next, next % kStages);
    cp_async_commit();
    if (!active) continue;
    const uint8_t* sb = smem + (st % kStages) * kStageBytes;
    const uint16_t* xst = reinterpret_cast<const uint16_t*>(sb);
    uint4 code[NS];
    uint32_t sc0[NS], sc1[NS];
    if constexpr (kNvfp4) {
      const uint8_t* wsrc = sb + kXStageBytes + warp * (NS * kStripBytes);
#pragma unroll
      for (int s = 0; s < NS; ++s) {
        code[s] = *reinterpret_cast<const uint4*>(wsrc + s * kStripBytes + lane * 16);
        sc0[s] = *reinterpret_cast<const uint32_t*>(wsrc + s * kStripBytes + 512 + g * 4);
        sc1[s] = *reinterpret_cast<const uint32_t*>(wsrc + s * kStripBytes + 512 + (g + 8) * 4);
      }
    }
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      uint32_t a[NS][4];
#pragma unroll
      for (int s = 0; s < NS; ++s) {
        if constexpr (kNvfp4) {
          nvfp4_fragment(word_of(code[s], q), sc0[s], sc1[s], q, a[s]);
        } else {
          bf16_fragment(reinterpret_cast<const uint16_t*>(base + (s == 0 ? p0 : p1).codes), w_rows, w_cols, strip * 16,
                        st * 64 + q * 16, a[s]);
        }
      }
#pragma unroll
      for (int nj = 0; nj < kTileTokens / 16; ++nj) {
        if (nj * 16 < count) {  // block-uniform
          uint32_t r[4];
          ldmatrix_x4(r, xst + (nj * 16 + (lane & 7) + ((lane >> 4) << 3)) * kXStride + q * 16 + ((lane >> 3) & 1) * 8);
#pragma unroll
          for (int s = 0; s < NS; ++s) mma_16816(acc[s][2 * nj], a[s], r[0], r[1]);
          if (nj * 16 + 8 < count) {
#pragma unroll
            for (int s = 0; s < NS; ++s) mma_16816(acc[s][2 * nj + 1], a[s], r[2], r[3]);
          }
        }
      }
    }
  }
  cp_async_wait<0>();
  __syncthreads();  // every warp is done with the pipeline: it becomes the epilogue scratch
  if (!active) return;

  const model::SlotScales sl = scales[slot];
  const float fold = kNvfp4 ? kScaleFold : 1.0f;
  if constexpr (kGateUp) {
    // SwiGLU into a per-warp [128 pairs][16 rows] bf16 scratch (row stride 24), then 16-byte stores.
    uint16_t* scr = reinterpret_cast<uint16_t*>(smem) + warp * (kTileTokens * 24);
    const float fg = sl.gate * fold, fu = sl.up * fold;
#pragma unroll
    for (int ni = 0; ni < 2 * kTileTokens / 16; ++ni) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int pair = ni * 8 + 2 * c + (e & 1), row = g + 8 * (e >> 1);
        const float gate = acc[0][ni][e] * fg, up = acc[NS - 1][ni][e] * fu;
        scr[pair * 24 + row] = bf16_bits(gate / (1.0f + __expf(-gate)) * up);
      }
    }
    __syncwarp();
    const int cols = kNvfp4 ? Ipad : I;
#pragma unroll
    for (int i = 0; i < kTileTokens * 2 / 32; ++i) {
      const int id = lane + 32 * i, pair = id >> 1, half = id & 1, col = strip * 16 + half * 8;
      if (pair < count && col < cols) {
        *reinterpret_cast<uint4*>(act + static_cast<size_t>(start + pair) * Ipad + col) =
            *reinterpret_cast<const uint4*>(scr + pair * 24 + half * 8);
      }
    }
  } else {
    // Weighted partials into a per-warp [128 pairs][16 rows] fp32 scratch (row stride 20), then float4 stores
    // to the pair's own row t*k + j.
    float* scr = reinterpret_cast<float*>(smem) + warp * (kTileTokens * 20);
    const float fd = sl.down * fold;
#pragma unroll
    for (int ni = 0; ni < 2 * kTileTokens / 16; ++ni) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int pair = ni * 8 + 2 * c + (e & 1), row = g + 8 * (e >> 1);
        scr[pair * 20 + row] = acc[0][ni][e] * fd * s_w[pair];
      }
    }
    __syncwarp();
#pragma unroll
    for (int i = 0; i < kTileTokens * 4 / 32; ++i) {
      const int id = lane + 32 * i, pair = id >> 2, q4 = id & 3, row = strip * 16 + q4 * 4;
      if (pair < count && row < H) {
        *reinterpret_cast<float4*>(partial + static_cast<size_t>(s_row[pair]) * H + row) =
            *reinterpret_cast<const float4*>(scr + pair * 20 + q4 * 4);
      }
    }
  }
}

// y[t, :] = sum_j partial[t*k + j, :], in choice order.
__global__ void combine_kernel(const float* __restrict__ partial, int k, int H, float* __restrict__ y) {
  const int t = blockIdx.y, n = (blockIdx.x * blockDim.x + threadIdx.x) * 4;
  if (n >= H) return;
  float4 sum = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  const float* row = partial + static_cast<size_t>(t) * k * H + n;
  for (int j = 0; j < k; ++j) {
    const float4 v = __ldcs(reinterpret_cast<const float4*>(row + static_cast<size_t>(j) * H));  // read once
    sum.x += v.x;
    sum.y += v.y;
    sum.z += v.z;
    sum.w += v.w;
  }
  *reinterpret_cast<float4*>(y + static_cast<size_t>(t) * H + n) = sum;
}

template <bool kNvfp4, bool kGateUp>
void launch_gemm(dim3 grid, cudaStream_t stream, const uint8_t* pool, const model::SlotScales* scales,
                 const model::ExpertSlotLayout& layout, const uint16_t* in, const int32_t* sorted, const float* weights,
                 const int4* tiles, const int32_t* num_tiles, int k, uint16_t* act, float* partial) {
  constexpr int bytes = smem_bytes<kGateUp>();
  IMP_CUDA_CHECK(cudaFuncSetAttribute(moe_gemm_kernel<kNvfp4, kGateUp>, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  moe_gemm_kernel<kNvfp4, kGateUp><<<grid, kThreads, bytes, stream>>>(pool, scales, layout, in, sorted, weights, tiles,
                                                                      num_tiles, k, act, partial);
  IMP_CUDA_CHECK_LAUNCH();
}

}  // namespace

size_t moe_prefill_workspace_bytes(const model::ExpertSlotLayout& layout, int32_t tokens, int32_t k, int32_t num_slots) {
  return make_plan(layout, tokens, k, num_slots).bytes;
}

void launch_moe_prefill(const uint8_t* pool, const model::SlotScales* scales, const model::ExpertSlotLayout& layout,
                        const float* x, const int32_t* slots, const float* weights, int32_t tokens, int32_t k,
                        int32_t num_slots, void* workspace, size_t workspace_bytes, float* y, cudaStream_t stream) {
  if (tokens < 0 || k <= 0 || num_slots <= 0) throw_invalid_launch("moe prefill: bad token, choice or slot count");
  if (tokens == 0) return;
  if (tokens > 65535) throw_invalid_launch("moe prefill: at most 65535 tokens per launch");
  const int64_t pairs64 = static_cast<int64_t>(tokens) * k;
  if (pairs64 >= (1LL << 31)) throw_invalid_launch("moe prefill: tokens * k too large");
  if (layout.hidden % 8 != 0 || layout.padded_intermediate % 8 != 0) throw_invalid_launch("moe prefill: hidden and intermediate must be multiples of 8");
  if (reinterpret_cast<uintptr_t>(x) % 16 != 0 || reinterpret_cast<uintptr_t>(y) % 16 != 0 ||
      reinterpret_cast<uintptr_t>(workspace) % 256 != 0 || reinterpret_cast<uintptr_t>(pool) % 16 != 0) {
    throw_invalid_launch("moe prefill: x, y and the pool must be 16-byte aligned, the workspace 256-byte aligned");
  }
  const Plan plan = make_plan(layout, tokens, k, num_slots);
  if (workspace_bytes < plan.bytes) throw_invalid_launch("moe prefill: workspace too small");
  if (plan.max_tiles > 0x7fffffffLL) throw_invalid_launch("moe prefill: too many tiles");
  uint8_t* ws = static_cast<uint8_t*>(workspace);
  int32_t* counts = reinterpret_cast<int32_t*>(ws + plan.counts);
  int32_t* cursor = reinterpret_cast<int32_t*>(ws + plan.cursor);
  int4* tiles = reinterpret_cast<int4*>(ws + plan.tiles);
  int32_t* num_tiles = reinterpret_cast<int32_t*>(ws + plan.num_tiles);
  int32_t* sorted = reinterpret_cast<int32_t*>(ws + plan.sorted);
  uint16_t* x16 = reinterpret_cast<uint16_t*>(ws + plan.x16);
  uint16_t* act = reinterpret_cast<uint16_t*>(ws + plan.act);
  float* partial = reinterpret_cast<float*>(ws + plan.partial);
  const int pairs = static_cast<int>(pairs64);

  IMP_CUDA_CHECK(cudaMemsetAsync(counts, 0, static_cast<size_t>(num_slots) * 4, stream));
  count_kernel<<<(pairs + 255) / 256, 256, 0, stream>>>(slots, pairs, counts);
  IMP_CUDA_CHECK_LAUNCH();
  plan_kernel<<<1, kPlanThreads, 0, stream>>>(counts, num_slots, cursor, tiles, num_tiles);
  IMP_CUDA_CHECK_LAUNCH();
  scatter_kernel<<<(pairs + 255) / 256, 256, 0, stream>>>(slots, pairs, cursor, sorted);
  IMP_CUDA_CHECK_LAUNCH();
  const size_t quads = static_cast<size_t>(tokens) * layout.hidden / 4;
  to_bf16_kernel<<<static_cast<unsigned>(std::min<size_t>((quads + 255) / 256, 4096)), 256, 0, stream>>>(x, quads, x16);
  IMP_CUDA_CHECK_LAUNCH();

  const bool nvfp4 = layout.format == model::SlotFormat::kNvfp4;
  const int gu_strips = nvfp4 ? layout.gate.rows / 16 : (layout.intermediate + 15) / 16;
  const int down_strips = nvfp4 ? layout.down.rows / 16 : (layout.hidden + 15) / 16;
  const dim3 gu_grid(static_cast<unsigned>(plan.max_tiles), (gu_strips + kWarps - 1) / kWarps);
  const dim3 down_grid(static_cast<unsigned>(plan.max_tiles), (down_strips + kWarps - 1) / kWarps);
  if (nvfp4) {
    launch_gemm<true, true>(gu_grid, stream, pool, scales, layout, x16, sorted, weights, tiles, num_tiles, k, act, nullptr);
    launch_gemm<true, false>(down_grid, stream, pool, scales, layout, act, sorted, weights, tiles, num_tiles, k, nullptr, partial);
  } else {
    launch_gemm<false, true>(gu_grid, stream, pool, scales, layout, x16, sorted, weights, tiles, num_tiles, k, act, nullptr);
    launch_gemm<false, false>(down_grid, stream, pool, scales, layout, act, sorted, weights, tiles, num_tiles, k, nullptr, partial);
  }
  combine_kernel<<<dim3((layout.hidden / 4 + 127) / 128, tokens), 128, 0, stream>>>(partial, k, layout.hidden, y);
  IMP_CUDA_CHECK_LAUNCH();
}

}  // namespace imp::cuda
