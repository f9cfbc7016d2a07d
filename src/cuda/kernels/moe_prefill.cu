#include "cuda/kernels/moe_prefill.h"

#include <algorithm>

#include "cuda/check.h"
#include "cuda/kernels/prefill_common.cuh"

namespace imp::cuda {
namespace {

using namespace prefill;

constexpr int kTileTokens = 64;  // (token, choice) pairs per tile: 8 mma n-tiles
constexpr int kWarps = 8;        // one 16-row strip of weights per warp
constexpr int kThreads = kWarps * 32;
constexpr int kStages = 4;       // cp.async stages of 64-input activation chunks
constexpr int kXStride = 72;     // bf16 per activation row in shared memory (144 bytes: conflict-free ldmatrix)
constexpr int kStageElems = kTileTokens * kXStride;
constexpr int kSmemBytes = 40960;  // max(pipeline 36 KB, epilogue scratch 8 x 5 KB)
static_assert(kStages * kStageElems * 2 <= kSmemBytes, "pipeline fits");
static_assert(kWarps * kTileTokens * 20 * 4 <= kSmemBytes, "down epilogue fits");
static_assert(kWarps * kTileTokens * 24 * 2 <= kSmemBytes, "gate/up epilogue fits");

struct Plan {
  size_t counts = 0, cursor = 0, tiles = 0, num_tiles = 0, sorted = 0, pos_of = 0, x16 = 0, act = 0, partial = 0;
  size_t bytes = 0;
  int64_t max_tiles = 0;
};

Plan make_plan(const model::ExpertSlotLayout& layout, int64_t tokens, int64_t k, int64_t num_slots) {
  Plan p;
  const int64_t pairs = tokens * k;
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
  p.pos_of = take(pairs * 4);
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
    for (int i = 0; i < c; i += kTileTokens) tiles[tile_off++] = make_int4(s, pair_off + i, min(kTileTokens, c - i), 0);
    pair_off += c;
  }
  if (tid == kPlanThreads - 1) *num_tiles = s_tiles[tid];
}

// Pairs grouped by slot. The order inside a slot's bucket depends on atomics, which is harmless: a pair's
// results never depend on the other pairs of its tile.
__global__ void scatter_kernel(const int32_t* slots, int pairs, int32_t* cursor, int32_t* sorted, int32_t* pos_of) {
  const int p = blockIdx.x * blockDim.x + threadIdx.x;
  if (p >= pairs) return;
  const int pos = atomicAdd(&cursor[slots[p]], 1);
  sorted[pos] = p;
  pos_of[p] = pos;
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
  const float2 f = e4m3x2_to_float2_scaled(__byte_perm(scales_row_g, scales_row_g8, q | ((q + 4) << 4)));
  const uint32_t s0 = pack_bf16x2(f.x, f.x), s1 = pack_bf16x2(f.y, f.y);
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

// k_loop.operator()<NJ>() for a tile of `count` pairs, NJ = its groups of 16 pairs (1-4, block-uniform): the
// kernels' k loops are instantiated per tile size so that no group is tested inside them.
template <typename KLoop>
__device__ __forceinline__ void run_per_pair_groups(int count, KLoop& k_loop) {
  switch ((count + 15) / 16) {
    case 1: k_loop.template operator()<1>(); break;
    case 2: k_loop.template operator()<2>(); break;
    case 3: k_loop.template operator()<3>(); break;
    default: k_loop.template operator()<4>(); break;
  }
}

// Block: one tile (<= 64 pairs of one slot) x 8 strips of 16 intermediate rows, gate and up together, then
// SwiGLU; act [pairs in bucket order, padded_intermediate] bf16.
template <bool kNvfp4>
__global__ void __launch_bounds__(kThreads, 2)  // 128 registers: two blocks per SM
    moe_gate_up_kernel(const uint8_t* __restrict__ pool, const model::SlotScales* __restrict__ scales,
                       model::ExpertSlotLayout layout, const uint16_t* __restrict__ x16, const int32_t* __restrict__ sorted,
                       const int4* __restrict__ tiles, const int32_t* __restrict__ num_tiles, int k,
                       uint16_t* __restrict__ act) {
  __shared__ __align__(16) uint8_t smem[kSmemBytes];
  __shared__ int tok[kTileTokens];
  if (static_cast<int>(blockIdx.x) >= *num_tiles) return;  // block-uniform, before any barrier
  const int4 tile = tiles[blockIdx.x];
  const int slot = tile.x, start = tile.y, count = tile.z;
  const int H = layout.hidden, I = layout.intermediate, Ipad = layout.padded_intermediate;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, c = lane & 3;
  if (tid < kTileTokens) tok[tid] = tid < count ? sorted[start + tid] / k : -1;
  __syncthreads();

  uint16_t* xs = reinterpret_cast<uint16_t*>(smem);
  const int chunks = kNvfp4 ? layout.gate.supertiles() : (H + 63) / 64;
  const int strips = kNvfp4 ? layout.gate.rows / 16 : (I + 15) / 16;
  const int strip = blockIdx.y * kWarps + warp;
  const bool active = strip < strips;
  const uint8_t* base = pool + static_cast<size_t>(slot) * layout.slot_bytes;

  // Each thread copies 16 bytes of two activation rows per chunk, at the same column every chunk: the rows'
  // addresses are found once.
  static_assert(kTileTokens * 8 == 2 * kThreads, "two 16-byte copies per thread and chunk");
  const int cc = (tid & 7) * 8, r0 = tid >> 3, r1 = r0 + kThreads / 8;
  const uint16_t* src0 = tok[r0] >= 0 ? x16 + static_cast<size_t>(tok[r0]) * H + cc : nullptr;
  const uint16_t* src1 = tok[r1] >= 0 ? x16 + static_cast<size_t>(tok[r1]) * H + cc : nullptr;
  auto load_chunk = [&](int st, int stage) {
    uint16_t* dst = xs + stage * kStageElems + cc;
    const bool in = st * 64 + cc < H;
    cp_async16(dst + r0 * kXStride, src0 != nullptr && in ? src0 + st * 64 : x16, src0 != nullptr && in);
    cp_async16(dst + r1 * kXStride, src1 != nullptr && in ? src1 + st * 64 : x16, src1 != nullptr && in);
  };

  // NVFP4: the next supertile's codes and scales are fetched one step ahead.
  const uint8_t* g_codes = base + layout.gate.codes + static_cast<size_t>(strip) * chunks * 512 + lane * 16;
  const uint8_t* g_scales = base + layout.gate.scales + static_cast<size_t>(strip) * chunks * 64;
  const uint8_t* u_codes = base + layout.up.codes + static_cast<size_t>(strip) * chunks * 512 + lane * 16;
  const uint8_t* u_scales = base + layout.up.scales + static_cast<size_t>(strip) * chunks * 64;
  uint4 rg = make_uint4(0, 0, 0, 0), ru = rg;
  uint32_t sg0 = 0, sg1 = 0, su0 = 0, su1 = 0;
  auto fetch = [&](int st) {
    rg = __ldg(reinterpret_cast<const uint4*>(g_codes + static_cast<size_t>(st) * 512));
    ru = __ldg(reinterpret_cast<const uint4*>(u_codes + static_cast<size_t>(st) * 512));
    sg0 = __ldg(reinterpret_cast<const uint32_t*>(g_scales + static_cast<size_t>(st) * 64) + g);
    sg1 = __ldg(reinterpret_cast<const uint32_t*>(g_scales + static_cast<size_t>(st) * 64) + g + 8);
    su0 = __ldg(reinterpret_cast<const uint32_t*>(u_scales + static_cast<size_t>(st) * 64) + g);
    su1 = __ldg(reinterpret_cast<const uint32_t*>(u_scales + static_cast<size_t>(st) * 64) + g + 8);
  };

  float accg[8][4], accu[8][4];
#pragma unroll
  for (int i = 0; i < 8; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) accg[i][e] = accu[i][e] = 0.0f;

#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < chunks) load_chunk(s, s);
    cp_async_commit();
  }
  if constexpr (kNvfp4) {
    if (active) fetch(0);
  }
  // Activation fragments through ldmatrix: this lane's byte address in stage 0, q 0, pair group 0.
  const uint32_t xs_lane = smem_addr(xs) + 2 * (((lane & 7) + ((lane >> 4) << 3)) * kXStride + ((lane >> 3) & 1) * 8);
  // The k loop for a tile of NJ groups of 16 pairs (block-uniform), so no group is tested inside it and the
  // accumulators of absent groups stay constant zeros.
  auto k_loop = [&]<int NJ>() {
    for (int st = 0; st < chunks; ++st) {
      cp_async_wait<kStages - 2>();
      __syncthreads();
      const int next = st + kStages - 1;
      if (next < chunks) load_chunk(next, next % kStages);
      cp_async_commit();
      if (!active) continue;
      const uint32_t cg[4] = {rg.x, rg.y, rg.z, rg.w}, cu[4] = {ru.x, ru.y, ru.z, ru.w};
      const uint32_t csg0 = sg0, csg1 = sg1, csu0 = su0, csu1 = su1;
      if constexpr (kNvfp4) {
        if (st + 1 < chunks) fetch(st + 1);
      }
      const uint32_t xst = xs_lane + 2 * (st % kStages) * kStageElems;
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        uint32_t ag[4], au[4];
        if constexpr (kNvfp4) {
          nvfp4_fragment(cg[q], csg0, csg1, q, ag);
          nvfp4_fragment(cu[q], csu0, csu1, q, au);
        } else {
          bf16_fragment(reinterpret_cast<const uint16_t*>(base + layout.gate.codes), I, H, strip * 16, st * 64 + q * 16, ag);
          bf16_fragment(reinterpret_cast<const uint16_t*>(base + layout.up.codes), I, H, strip * 16, st * 64 + q * 16, au);
        }
#pragma unroll
        for (int nj = 0; nj < NJ; ++nj) {
          uint32_t r[4];
          ldmatrix_x4_at(r, xst + 2 * (nj * 16 * kXStride + q * 16));
          mma_16816(accg[2 * nj], ag, r[0], r[1]);
          mma_16816(accu[2 * nj], au, r[0], r[1]);
          mma_16816(accg[2 * nj + 1], ag, r[2], r[3]);
          mma_16816(accu[2 * nj + 1], au, r[2], r[3]);
        }
      }
    }
  };
  run_per_pair_groups(count, k_loop);
  cp_async_wait<0>();
  __syncthreads();  // every warp is done with xs: it becomes the epilogue scratch
  if (!active) return;

  // SwiGLU into a per-warp [64 pairs][16 rows] bf16 scratch (row stride 24), then 16-byte stores.
  uint16_t* scr = reinterpret_cast<uint16_t*>(smem) + warp * (kTileTokens * 24);
  const model::SlotScales s = scales[slot];
  const float fold = kNvfp4 ? kScaleFold : 1.0f;
  const float fg = s.gate * fold, fu = s.up * fold;
#pragma unroll
  for (int ni = 0; ni < 8; ++ni) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int pair = ni * 8 + 2 * c + (e & 1), row = g + 8 * (e >> 1);
      const float gate = accg[ni][e] * fg, up = accu[ni][e] * fu;
      scr[pair * 24 + row] = bf16_bits(gate / (1.0f + __expf(-gate)) * up);
    }
  }
  __syncwarp();
  const int cols = kNvfp4 ? Ipad : I;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int id = lane + 32 * i, pair = id >> 1, half = id & 1, col = strip * 16 + half * 8;
    if (pair < count && col < cols) {
      *reinterpret_cast<uint4*>(act + static_cast<size_t>(start + pair) * Ipad + col) =
          *reinterpret_cast<const uint4*>(scr + pair * 24 + half * 8);
    }
  }
}

// Block: one tile x 8 strips of 16 output rows of down; writes the weighted fp32 partial of each pair,
// partial [pairs in bucket order, hidden].
template <bool kNvfp4>
__global__ void __launch_bounds__(kThreads, 3)  // up to 80 registers: three blocks per SM
    moe_down_kernel(const uint8_t* __restrict__ pool, const model::SlotScales* __restrict__ scales,
                    model::ExpertSlotLayout layout, const uint16_t* __restrict__ act, const int32_t* __restrict__ sorted,
                    const float* __restrict__ weights, const int4* __restrict__ tiles,
                    const int32_t* __restrict__ num_tiles, float* __restrict__ partial) {
  __shared__ __align__(16) uint8_t smem[kSmemBytes];
  __shared__ float route_w[kTileTokens];
  if (static_cast<int>(blockIdx.x) >= *num_tiles) return;
  const int4 tile = tiles[blockIdx.x];
  const int slot = tile.x, start = tile.y, count = tile.z;
  const int H = layout.hidden, I = layout.intermediate, Ipad = layout.padded_intermediate;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, c = lane & 3;
  if (tid < kTileTokens) route_w[tid] = tid < count ? weights[sorted[start + tid]] : 0.0f;
  // (route_w is read only after the main loop's barriers.)

  uint16_t* xs = reinterpret_cast<uint16_t*>(smem);
  const int k_real = kNvfp4 ? Ipad : I;
  const int chunks = kNvfp4 ? layout.down.supertiles() : (I + 63) / 64;
  const int strips = kNvfp4 ? layout.down.rows / 16 : (H + 15) / 16;
  const int strip = blockIdx.y * kWarps + warp;
  const bool active = strip < strips;
  const uint8_t* base = pool + static_cast<size_t>(slot) * layout.slot_bytes;

  auto load_chunk = [&](int st, int stage) {
    uint16_t* dst = xs + stage * kStageElems;
#pragma unroll
    for (int i = 0; i < kTileTokens * 8 / kThreads; ++i) {
      const int id = tid + i * kThreads, r = id >> 3, cc = (id & 7) * 8;
      const int gk = st * 64 + cc;
      const bool ok = r < count && gk < k_real;
      cp_async16(dst + r * kXStride + cc, ok ? act + static_cast<size_t>(start + r) * Ipad + gk : act, ok);
    }
  };

  const uint8_t* d_codes = base + layout.down.codes + static_cast<size_t>(strip) * chunks * 512 + lane * 16;
  const uint8_t* d_scales = base + layout.down.scales + static_cast<size_t>(strip) * chunks * 64;
  uint4 rd = make_uint4(0, 0, 0, 0);
  uint32_t sd0 = 0, sd1 = 0;
  auto fetch = [&](int st) {
    rd = __ldg(reinterpret_cast<const uint4*>(d_codes + static_cast<size_t>(st) * 512));
    sd0 = __ldg(reinterpret_cast<const uint32_t*>(d_scales + static_cast<size_t>(st) * 64) + g);
    sd1 = __ldg(reinterpret_cast<const uint32_t*>(d_scales + static_cast<size_t>(st) * 64) + g + 8);
  };

  float acc[8][4];
#pragma unroll
  for (int i = 0; i < 8; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[i][e] = 0.0f;

#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < chunks) load_chunk(s, s);
    cp_async_commit();
  }
  if constexpr (kNvfp4) {
    if (active) fetch(0);
  }
  const uint32_t xs_lane = smem_addr(xs) + 2 * (((lane & 7) + ((lane >> 4) << 3)) * kXStride + ((lane >> 3) & 1) * 8);
  auto k_loop = [&]<int NJ>() {  // as in moe_gate_up_kernel
    for (int st = 0; st < chunks; ++st) {
      cp_async_wait<kStages - 2>();
      __syncthreads();
      const int next = st + kStages - 1;
      if (next < chunks) load_chunk(next, next % kStages);
      cp_async_commit();
      if (!active) continue;
      const uint32_t cd[4] = {rd.x, rd.y, rd.z, rd.w};
      const uint32_t csd0 = sd0, csd1 = sd1;
      if constexpr (kNvfp4) {
        if (st + 1 < chunks) fetch(st + 1);
      }
      const uint32_t xst = xs_lane + 2 * (st % kStages) * kStageElems;
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        uint32_t a[4];
        if constexpr (kNvfp4) {
          nvfp4_fragment(cd[q], csd0, csd1, q, a);
        } else {
          bf16_fragment(reinterpret_cast<const uint16_t*>(base + layout.down.codes), H, I, strip * 16, st * 64 + q * 16, a);
        }
#pragma unroll
        for (int nj = 0; nj < NJ; ++nj) {
          uint32_t r[4];
          ldmatrix_x4_at(r, xst + 2 * (nj * 16 * kXStride + q * 16));
          mma_16816(acc[2 * nj], a, r[0], r[1]);
          mma_16816(acc[2 * nj + 1], a, r[2], r[3]);
        }
      }
    }
  };
  run_per_pair_groups(count, k_loop);
  cp_async_wait<0>();
  __syncthreads();
  if (!active) return;

  float* scr = reinterpret_cast<float*>(smem) + warp * (kTileTokens * 20);
  const float fd = scales[slot].down * (kNvfp4 ? kScaleFold : 1.0f);
#pragma unroll
  for (int ni = 0; ni < 8; ++ni) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int pair = ni * 8 + 2 * c + (e & 1), row = g + 8 * (e >> 1);
      scr[pair * 20 + row] = acc[ni][e] * fd * route_w[pair];
    }
  }
  __syncwarp();
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int id = lane + 32 * i, pair = id >> 2, q4 = id & 3, row = strip * 16 + q4 * 4;
    if (pair < count && row < H) {
      *reinterpret_cast<float4*>(partial + static_cast<size_t>(start + pair) * H + row) =
          *reinterpret_cast<const float4*>(scr + pair * 20 + q4 * 4);
    }
  }
}

// y[t, :] = sum_j partial[pos_of[t*k + j], :], in choice order.
__global__ void combine_kernel(const float* __restrict__ partial, const int32_t* __restrict__ pos_of, int k, int H,
                               float* __restrict__ y) {
  const int t = blockIdx.y, n = (blockIdx.x * blockDim.x + threadIdx.x) * 4;
  if (n >= H) return;
  float4 sum = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  for (int j = 0; j < k; ++j) {
    const float4 v = *reinterpret_cast<const float4*>(partial + static_cast<size_t>(pos_of[t * k + j]) * H + n);
    sum.x += v.x;
    sum.y += v.y;
    sum.z += v.z;
    sum.w += v.w;
  }
  *reinterpret_cast<float4*>(y + static_cast<size_t>(t) * H + n) = sum;
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
      reinterpret_cast<uintptr_t>(workspace) % 256 != 0) {
    throw_invalid_launch("moe prefill: x and y must be 16-byte aligned, the workspace 256-byte aligned");
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
  int32_t* pos_of = reinterpret_cast<int32_t*>(ws + plan.pos_of);
  uint16_t* x16 = reinterpret_cast<uint16_t*>(ws + plan.x16);
  uint16_t* act = reinterpret_cast<uint16_t*>(ws + plan.act);
  float* partial = reinterpret_cast<float*>(ws + plan.partial);
  const int pairs = static_cast<int>(pairs64);

  IMP_CUDA_CHECK(cudaMemsetAsync(counts, 0, static_cast<size_t>(num_slots) * 4, stream));
  count_kernel<<<(pairs + 255) / 256, 256, 0, stream>>>(slots, pairs, counts);
  IMP_CUDA_CHECK_LAUNCH();
  plan_kernel<<<1, kPlanThreads, 0, stream>>>(counts, num_slots, cursor, tiles, num_tiles);
  IMP_CUDA_CHECK_LAUNCH();
  scatter_kernel<<<(pairs + 255) / 256, 256, 0, stream>>>(slots, pairs, cursor, sorted, pos_of);
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
    moe_gate_up_kernel<true><<<gu_grid, kThreads, 0, stream>>>(pool, scales, layout, x16, sorted, tiles, num_tiles, k, act);
    IMP_CUDA_CHECK_LAUNCH();
    moe_down_kernel<true><<<down_grid, kThreads, 0, stream>>>(pool, scales, layout, act, sorted, weights, tiles, num_tiles, partial);
  } else {
    moe_gate_up_kernel<false><<<gu_grid, kThreads, 0, stream>>>(pool, scales, layout, x16, sorted, tiles, num_tiles, k, act);
    IMP_CUDA_CHECK_LAUNCH();
    moe_down_kernel<false><<<down_grid, kThreads, 0, stream>>>(pool, scales, layout, act, sorted, weights, tiles, num_tiles, partial);
  }
  IMP_CUDA_CHECK_LAUNCH();
  combine_kernel<<<dim3((layout.hidden / 4 + 127) / 128, tokens), 128, 0, stream>>>(partial, pos_of, k, layout.hidden, y);
  IMP_CUDA_CHECK_LAUNCH();
}

}  // namespace imp::cuda
