#include "cuda/kernels/attention_prefill.h"

#include <algorithm>
#include <cfloat>

#include "cuda/check.h"
#include "cuda/tensor_map.h"
#include "cuda/kernels/device_math.cuh"
#include "cuda/kernels/prefill_common.cuh"
#include "cuda/kernels/wgmma_layout.cuh"
#include "cuda/kernels/wgmma_ops.cuh"

namespace imp::cuda {
namespace {

using namespace prefill;

constexpr int kRows = 64, kKeys = 64, kThreads = 128;
static_assert(kThreads >= kRows + kKeys, "threads 0..63 find the keys each row attends, the last 64 the rows of the keys");

template <int D>
constexpr size_t smem_bytes() {
  return 3 * static_cast<size_t>(kRows) * (D + 8) * 2;
}

// Bits of the keys key0 .. key0 + 63 a row at `pos` attends: n <= pos and, with a block mask (row_mask, the
// row's words; nullptr = dense), bit n / ratio set. Only mask bits of blocks <= pos / ratio are read.
__device__ __forceinline__ uint64_t tile_keys(int key0, int pos, const uint32_t* row_mask, int ratio) {
  if (pos < key0) return 0;
  const int last = min(pos - key0, kKeys - 1);  // the last visible key, tile-relative
  const uint64_t causal = ~0ull >> (63 - last);
  if (row_mask == nullptr) return causal;
  // Blocks j0 .. j1 cover the visible keys: j1 - j0 < 64 / ratio + 2, so they fit in the 64 bits from bit
  // j0 % 32 of word j0 / 32 on (ratio 1: j0 % 32 == 0 and 64 blocks).
  const int j0 = key0 / ratio, j1 = (key0 + last) / ratio, span = j1 - j0 + 1, w = j0 / 32;
  uint64_t blocks = row_mask[w];
  if (j1 / 32 > w) blocks |= static_cast<uint64_t>(row_mask[w + 1]) << 32;
  const uint64_t span_bits = ~0ull >> (64 - span);
  blocks = (blocks >> (j0 % 32)) & span_bits;
  if (blocks == span_bits) return causal;
  uint64_t keys = 0;
  for (; blocks != 0; blocks &= blocks - 1) {
    const int j = j0 + __ffsll(static_cast<long long>(blocks)) - 1;
    const int lo = max(j * ratio - key0, 0), hi = min(j * ratio + ratio - 1 - key0, last);
    keys |= (~0ull >> (63 - hi)) & (~0ull << lo);
  }
  return keys;
}

// The online softmax of one 64-key tile for a thread's rows g and g + 8: s(j, e) is S's element for key
// 8 j + 2 c + (e & 1) of row g (e < 2) or g + 8 (e >= 2), the order in which mma m16n8 and wgmma m64nN accumulators
// both hold it; keys_g, keys_g8 the rows' visible keys shifted right by 2 c (so the shifts below are constants).
// Masks (causal and block), scales and exponentiates S in place, updates the running maxima and sums, and returns
// O's correction factors (row g, row g + 8). A row with nothing visible yet (rows past `rows`, masked rows) keeps
// m = -inf: it subtracts 0 instead (p = 0); a row that never sees a key ends with l = 0 and writes zeros.
template <typename S>
__device__ __forceinline__ float2 online_softmax_tile(S&& s, uint64_t keys_g, uint64_t keys_g8, float scale, float& m0,
                                                      float& m1, float& l0, float& l1) {
  float mx0 = -INFINITY, mx1 = -INFINITY;
#pragma unroll
  for (int j = 0; j < 8; ++j) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const bool visible = ((e < 2 ? keys_g : keys_g8) >> (j * 8 + (e & 1))) & 1;
      const float v = visible ? s(j, e) * scale : -INFINITY;
      s(j, e) = v;
      if (e < 2) mx0 = fmaxf(mx0, v); else mx1 = fmaxf(mx1, v);
    }
  }
#pragma unroll
  for (int off = 1; off <= 2; off <<= 1) {  // the 4 lanes of a quad share a row
    mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, off));
    mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, off));
  }
  const float mn0 = fmaxf(m0, mx0), mn1 = fmaxf(m1, mx1);
  const float base0 = mn0 == -INFINITY ? 0.0f : mn0, base1 = mn1 == -INFINITY ? 0.0f : mn1;
  const float corr0 = __expf(m0 - base0), corr1 = __expf(m1 - base1);
  float sum0 = 0.0f, sum1 = 0.0f;
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    s(j, 0) = __expf(s(j, 0) - base0);
    s(j, 1) = __expf(s(j, 1) - base0);
    s(j, 2) = __expf(s(j, 2) - base1);
    s(j, 3) = __expf(s(j, 3) - base1);
    sum0 += s(j, 0) + s(j, 1);
    sum1 += s(j, 2) + s(j, 3);
  }
  l0 = l0 * corr0 + sum0;
  l1 = l1 * corr1 + sum1;
  m0 = mn0;
  m1 = mn1;
  return make_float2(corr0, corr1);
}

template <int D, bool kBf16>
__global__ void __launch_bounds__(kThreads, 2)
    attention_prefill_kernel(KvPages cache, const float* __restrict__ q, const float* __restrict__ gate, int head_stride,
                             const int32_t* __restrict__ positions, int rows, int heads, int kv_heads,
                             const uint32_t* __restrict__ block_mask, int mask_words, int ratio,
                             float* __restrict__ out) {
  constexpr int kS = D + 8;  // bf16 row stride: 16-byte multiple, conflict-free ldmatrix
  extern __shared__ __align__(16) uint16_t sm[];
  uint16_t* Qs = sm;
  uint16_t* Ks = Qs + kRows * kS;
  uint16_t* Vs = Ks + kKeys * kS;
  __shared__ int s_pos[kRows];
  __shared__ int s_max;
  __shared__ uint64_t s_keys[kRows];  // the keys of the current tile each row attends (tile_keys)
  __shared__ int64_t s_row[kKeys];    // element offset of each key's row of this tile in the cache; -1 beyond max_pos

  const int row0 = (gridDim.x - 1 - blockIdx.x) * kRows;  // the longest rows first
  const int h = blockIdx.y;
  const int kvh = h / (heads / kv_heads), width = kv_heads * D;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, c = lane & 3;

  if (tid < kRows) s_pos[tid] = row0 + tid < rows ? positions[row0 + tid] : -1;
  for (int e = tid; e < kRows * D / 4; e += kThreads) {
    const int r = e / (D / 4), d4 = (e % (D / 4)) * 4, row = row0 + r;
    float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (row < rows) v = *reinterpret_cast<const float4*>(q + (static_cast<size_t>(row) * heads + h) * head_stride + d4);
    *reinterpret_cast<uint2*>(Qs + r * kS + d4) = make_uint2(pack_bf16x2(v.x, v.y), pack_bf16x2(v.z, v.w));
  }
  __syncthreads();
  if (warp == 0) {
    int m = max(s_pos[lane], s_pos[lane + 32]);
    for (int o = 16; o > 0; o >>= 1) m = max(m, __shfl_xor_sync(0xffffffffu, m, o));
    if (lane == 0) s_max = m;
  }
  __syncthreads();
  const int max_pos = s_max;  // >= 0: row0 < rows
  const float scale = 1.0f / sqrtf(static_cast<float>(D));
  // Threads 0..63 own a row's tile_keys; their row's mask words.
  const uint32_t* mask_row =
      block_mask != nullptr && tid < kRows && row0 + tid < rows ? block_mask + static_cast<size_t>(row0 + tid) * mask_words : nullptr;
  const int* table = cache.page_table;
  const int page_size = cache.page_size;

  float o[D / 8][4];
#pragma unroll
  for (int i = 0; i < D / 8; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
  float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;

  const int tiles = max_pos / kKeys + 1;
  for (int kt = 0; kt < tiles; ++kt) {
    // Which keys of the tile each row attends; a tile no row attends is skipped (masked rows).
    const uint64_t my_keys = tid < kRows ? tile_keys(kt * kKeys, s_pos[tid], mask_row, ratio) : 0;
    if (tid < kRows) s_keys[tid] = my_keys;
    if (tid >= kThreads - kKeys) {  // the other threads: where each key's K/V row lives (one page lookup per key)
      const int n = kt * kKeys + tid - (kThreads - kKeys);
      s_row[tid - (kThreads - kKeys)] =
          n <= max_pos ? (static_cast<int64_t>(table[n / page_size]) * page_size + n % page_size) * width + kvh * D : -1;
    }
    if (!__syncthreads_or(my_keys != 0)) continue;
    // K and V of tokens kt*64 .. kt*64+63 (zero beyond max_pos: masked, and V must stay finite).
    for (int e = tid; e < kKeys * D / 8; e += kThreads) {
      const int r = e / (D / 8), d8 = (e % (D / 8)) * 8;
      const int64_t row = s_row[r];
      const bool ok = row >= 0;
      const size_t idx = ok ? static_cast<size_t>(row + d8) : 0;
      if constexpr (kBf16) {
        const uint16_t* kb = static_cast<const uint16_t*>(cache.keys);
        const uint16_t* vb = static_cast<const uint16_t*>(cache.values);
        cp_async16(Ks + r * kS + d8, kb + idx, ok);
        cp_async16(Vs + r * kS + d8, vb + idx, ok);
      } else {
        uint4 kw = make_uint4(0, 0, 0, 0), vw = kw;
        if (ok) {
          const float* kf = static_cast<const float*>(cache.keys) + idx;
          const float* vf = static_cast<const float*>(cache.values) + idx;
          const float4 k0 = *reinterpret_cast<const float4*>(kf), k1 = *reinterpret_cast<const float4*>(kf + 4);
          const float4 v0 = *reinterpret_cast<const float4*>(vf), v1 = *reinterpret_cast<const float4*>(vf + 4);
          kw = make_uint4(pack_bf16x2(k0.x, k0.y), pack_bf16x2(k0.z, k0.w), pack_bf16x2(k1.x, k1.y), pack_bf16x2(k1.z, k1.w));
          vw = make_uint4(pack_bf16x2(v0.x, v0.y), pack_bf16x2(v0.z, v0.w), pack_bf16x2(v1.x, v1.y), pack_bf16x2(v1.z, v1.w));
        }
        *reinterpret_cast<uint4*>(Ks + r * kS + d8) = kw;
        *reinterpret_cast<uint4*>(Vs + r * kS + d8) = vw;
      }
    }
    if constexpr (kBf16) {
      cp_async_commit();
      cp_async_wait<0>();
    }
    __syncthreads();

    // S = Q K^T for this warp's 16 rows x 64 keys.
    float s[8][4];
#pragma unroll
    for (int i = 0; i < 8; ++i) s[i][0] = s[i][1] = s[i][2] = s[i][3] = 0.0f;
#pragma unroll
    for (int ks = 0; ks < D / 16; ++ks) {
      uint32_t a[4];
      ldmatrix_x4(a, Qs + (warp * 16 + (lane & 15)) * kS + ks * 16 + (lane >> 4) * 8);
#pragma unroll
      for (int nj = 0; nj < 4; ++nj) {
        uint32_t r[4];
        ldmatrix_x4(r, Ks + (nj * 16 + (lane & 7) + ((lane >> 4) << 3)) * kS + ks * 16 + ((lane >> 3) & 1) * 8);
        mma_16816(s[2 * nj], a, r[0], r[1]);
        mma_16816(s[2 * nj + 1], a, r[2], r[3]);
      }
    }
    // Mask, scale, online softmax (rows g and g + 8).
    const float2 corr = online_softmax_tile([&](int j, int e) -> float& { return s[j][e]; },
                                            s_keys[warp * 16 + g] >> (2 * c), s_keys[warp * 16 + g + 8] >> (2 * c),
                                            scale, m0, m1, l0, l1);
    const float corr0 = corr.x, corr1 = corr.y;
#pragma unroll
    for (int dt = 0; dt < D / 8; ++dt) {
      o[dt][0] *= corr0;
      o[dt][1] *= corr0;
      o[dt][2] *= corr1;
      o[dt][3] *= corr1;
    }
    // O += P V: P from the S accumulators as bf16 A fragments, V through ldmatrix.trans.
#pragma unroll
    for (int kk = 0; kk < kKeys / 16; ++kk) {
      uint32_t a[4];
      a[0] = pack_bf16x2(s[2 * kk][0], s[2 * kk][1]);
      a[1] = pack_bf16x2(s[2 * kk][2], s[2 * kk][3]);
      a[2] = pack_bf16x2(s[2 * kk + 1][0], s[2 * kk + 1][1]);
      a[3] = pack_bf16x2(s[2 * kk + 1][2], s[2 * kk + 1][3]);
#pragma unroll
      for (int dn = 0; dn < D / 16; ++dn) {
        uint32_t r[4];
        ldmatrix_x4_trans(r, Vs + (kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * kS + dn * 16 + (lane >> 4) * 8);
        mma_16816(o[2 * dn], a, r[0], r[1]);
        mma_16816(o[2 * dn + 1], a, r[2], r[3]);
      }
    }
    __syncthreads();  // K/V are overwritten next
  }

#pragma unroll
  for (int off = 1; off <= 2; off <<= 1) {
    l0 += __shfl_xor_sync(0xffffffffu, l0, off);
    l1 += __shfl_xor_sync(0xffffffffu, l1, off);
  }
  const float inv0 = l0 > 0.0f ? 1.0f / l0 : 0.0f, inv1 = l1 > 0.0f ? 1.0f / l1 : 0.0f;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int row = row0 + warp * 16 + g + 8 * half;
    if (row >= rows) continue;
    const float inv = half ? inv1 : inv0;
    const float* grow = gate + (static_cast<size_t>(row) * heads + h) * head_stride;
    float* orow = out + (static_cast<size_t>(row) * heads + h) * D;
#pragma unroll
    for (int dt = 0; dt < D / 8; ++dt) {
      const int d = dt * 8 + 2 * c;
      const float2 gv = *reinterpret_cast<const float2*>(grow + d);
      *reinterpret_cast<float2*>(orow + d) =
          make_float2(o[dt][2 * half] * inv * sigmoidf(gv.x), o[dt][2 * half + 1] * inv * sigmoidf(gv.y));
    }
  }
}

// ---- D = 256 on bf16 pages: wgmma, a producer warpgroup, 128 query rows per block ----
// Blocks of 128 query rows x one head: two consumer warpgroups (64 rows each) and a producer warpgroup whose first
// thread copies each attended 64-key tile's K and V by tensor copies (TMA: boxes of 64 inputs x the page's rows,
// the 128-byte swizzle) into a ring of two stages; copied per lane with cp.async, the producer executed a third of
// the kernel's instructions and the consumers still waited for it (session 26). Per tile a consumer computes
// S = Q K^T by wgmma (Q K-major without swizzle, K K-major with the 128-byte swizzle), masks and exponentiates S
// in registers as the kernel above does, then O += P V by wgmma with P from S's accumulators (their layout is the
// A fragment's) and V read as it is stored, [keys, d] with d contiguous (B MN-major, the transpose bit). The
// mma.sync kernel above loads every K and V fragment through ldmatrix in each warp: 734 us per layer at pp 4096
// against 605 for this one (session 26).
// The producer decides which tiles any of the block's rows attends (a barrier-reduction over its 128 threads, one
// row each) and publishes each loaded tile's index with the stage; a tile index of -1 ends the consumers' loop.
constexpr int kWgRows = 128, kWgThreads = 384, kWgD = 256;
constexpr int kWgTileBytes = kKeys * kWgD * 2;  // one K or V tile, bf16
// Q of both warpgroups, two stages of K and V, and 1 KB to align the stages to the swizzle's 1024-byte atoms.
constexpr size_t kWgSmemBytes = 2 * 64 * kWgD * 2 + 2 * 2 * static_cast<size_t>(kWgTileBytes) + 1024;
constexpr int kWgConsumerRegs = 232, kWgProducerRegs = 40;
static_assert(setmaxnreg_balances(launch_register_cap(kWgThreads, 1), 2, kWgConsumerRegs, 1, kWgProducerRegs),
              "two consumer warpgroups take at most what the producer warpgroup gives back");

// K and V tiles as the tensor copies leave them: four 8 KB quarters (inputs 64 q .. 64 q + 63), each [64 keys]
// [128 bytes] with the 128-byte swizzle (16-byte chunk i of row r at chunk i ^ (r % 8)), 1024-byte aligned.
// Descriptors (swizzled_descriptor, wgmma_layout.cuh): K as the K-major B of S, one k16 step 32 bytes into its quarter's
// rows, 8-row groups 1024 bytes apart (SBO; LBO unused); V as the MN-major B of P V, 64 d of a quarter in each
// 128-byte row, 8-key groups 1024 bytes apart (SBO), quarters 8 KB apart (LBO).
constexpr int kQuarterBytes = kKeys * 128;
// The OR of `p` over the producer warpgroup's 128 threads (named barrier 3).
__device__ __forceinline__ bool producer_any(bool p) {
  uint32_t r;
  asm volatile(
      "{\n .reg .pred pi, po;\n setp.ne.b32 pi, %1, 0;\n bar.red.or.pred po, 3, 128, pi;\n selp.u32 %0, 1, 0, po;\n}\n"
      : "=r"(r)
      : "r"(static_cast<uint32_t>(p))
      : "memory");
  return r != 0;
}

__global__ void __launch_bounds__(kWgThreads, 1)
    attention_prefill_wgmma_kernel(KvPages cache, const __grid_constant__ CUtensorMap k_map,
                                   const __grid_constant__ CUtensorMap v_map, const float* __restrict__ q,
                                   const float* __restrict__ gate, int head_stride, const int32_t* __restrict__ positions,
                                   int rows, int heads, int kv_heads, const uint32_t* __restrict__ block_mask,
                                   int mask_words, int ratio, float* __restrict__ out) {
  constexpr int D = kWgD;
  extern __shared__ __align__(128) uint8_t smem[];
  uint8_t* q_tiles = smem + (1024 - smem_addr(smem) % 1024) % 1024;  // [2 warpgroups][64 rows x D] K-major
  uint8_t* stages = q_tiles + 2 * 64 * D * 2;                            // [2][K tile | V tile], 1024-byte aligned
  __shared__ uint64_t full[2], empty[2];
  __shared__ int s_tile[2];
  __shared__ int s_pos[kWgRows];
  __shared__ int s_max;

  const int row0 = (gridDim.x - 1 - blockIdx.x) * kWgRows;  // the longest rows first
  const int h = blockIdx.y, kvh = h / (heads / kv_heads);
  const int tid = threadIdx.x, lane = tid & 31;
  if (tid < kWgRows) s_pos[tid] = row0 + tid < rows ? positions[row0 + tid] : -1;
  if (tid == 0) {
    for (int i = 0; i < 2; ++i) {
      mbarrier_init(&full[i], 1);  // the producer's first thread, announcing the tile's bytes
      mbarrier_init(&empty[i], 8);  // the consumer warps
    }
  }
  __syncthreads();
  if (tid < 32) {
    int m = max(max(s_pos[lane], s_pos[lane + 32]), max(s_pos[lane + 64], s_pos[lane + 96]));
    for (int o = 16; o > 0; o >>= 1) m = max(m, __shfl_xor_sync(0xffffffffu, m, o));
    if (lane == 0) s_max = m;
  }
  __syncthreads();
  const int max_pos = s_max;  // >= 0: row0 < rows

  if (tid >= 256) {  // the producer warpgroup
    setmaxnreg_dec<kWgProducerRegs>();
    const int pt = tid - 256;
    const int pos = s_pos[pt];
    const uint32_t* mask_row =
        block_mask != nullptr && row0 + pt < rows ? block_mask + static_cast<size_t>(row0 + pt) * mask_words : nullptr;
    // The block's gate rows into L2 while the tiles run: the consumers' epilogue reads them (session 26's profile of
    // the cp.async form: ~10% of its samples waited on those loads).
    if (row0 + pt < rows) {
      const float* grow = gate + (static_cast<size_t>(row0 + pt) * heads + h) * head_stride;
      for (int i = 0; i < D / 32; ++i) asm volatile("prefetch.global.L2 [%0];\n" ::"l"(grow + 32 * i));
    }
    // Boxes of the page's rows (64 at most; pages of 8..64 tokens dividing 64, or multiples of 64: launch_d).
    const int box_rows = min(cache.page_size, kKeys);
    int stage = 0, round = 0;
    for (int t = 0; t <= max_pos / kKeys; ++t) {
      const int key0 = t * kKeys;
      if (!producer_any(tile_keys(key0, pos, mask_row, ratio) != 0)) continue;
      if (pt == 0) {
        if (round > 0) mbarrier_wait(&empty[stage], (round - 1) & 1);
        uint8_t* k_tile = stages + stage * 2 * kWgTileBytes;
        uint8_t* v_tile = k_tile + kWgTileBytes;
        s_tile[stage] = t;
        mbarrier_arrive_expect_tx(&full[stage], 2 * kWgTileBytes);
        for (int b = 0; b < kKeys / box_rows; ++b) {
          // Keys past max_pos are masked for every row of the block; their box reads the tile's first page (any
          // finite values: P is 0 there, and the cache holds no NaN, kv_cache.cpp zeroes it).
          const int key = key0 + b * box_rows <= max_pos ? key0 + b * box_rows : key0;
          const int row = cache.page_table[key / cache.page_size] * cache.page_size + key % cache.page_size;
#pragma unroll
          for (int quarter = 0; quarter < D / 64; ++quarter) {
            const int at = quarter * kQuarterBytes + b * box_rows * 128;
            tensor_copy_2d(k_tile + at, &k_map, kvh * D + 64 * quarter, row, &full[stage]);
            tensor_copy_2d(v_tile + at, &v_map, kvh * D + 64 * quarter, row, &full[stage]);
          }
        }
      }
      if (++stage == 2) {
        stage = 0;
        ++round;
      }
    }
    // The end: a stage whose tile is -1 (a plain arrival, no copies).
    if (pt == 0) {
      if (round > 0) mbarrier_wait(&empty[stage], (round - 1) & 1);
      s_tile[stage] = -1;
      mbarrier_arrive_if(true, &full[stage]);
    }
    return;
  }

  setmaxnreg_inc<kWgConsumerRegs>();
  const int wg = tid / 128, wt = tid % 128, warp = wt / 32, g = lane >> 2, c = lane & 3;
  uint8_t* q_tile = q_tiles + wg * 64 * D * 2;
  // This warpgroup's 64 query rows into shared memory as bf16 (zeros past `rows`).
  for (int e = wt; e < 64 * D / 4; e += 128) {
    const int m = e / (D / 4), d4 = (e % (D / 4)) * 4, row = row0 + 64 * wg + m;
    float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (row < rows) v = *reinterpret_cast<const float4*>(q + (static_cast<size_t>(row) * heads + h) * head_stride + d4);
    *reinterpret_cast<uint2*>(q_tile + kmajor_offset(m, d4, 64)) = make_uint2(pack_bf16x2(v.x, v.y), pack_bf16x2(v.z, v.w));
  }
  fence_proxy_async();
  asm volatile("bar.sync %0, 128;\n" ::"r"(1 + wg) : "memory");
  const int r0 = 64 * wg + 16 * warp + g, r1 = r0 + 8;  // this thread's rows within the block
  const int pos0 = s_pos[r0], pos1 = s_pos[r1];
  const uint32_t* mask0 = block_mask != nullptr && row0 + r0 < rows ? block_mask + static_cast<size_t>(row0 + r0) * mask_words : nullptr;
  const uint32_t* mask1 = block_mask != nullptr && row0 + r1 < rows ? block_mask + static_cast<size_t>(row0 + r1) * mask_words : nullptr;
  const float scale = 1.0f / sqrtf(static_cast<float>(D));
  const uint32_t q_base = smem_addr(q_tile), stages_base = smem_addr(stages);

  float o[4][32];
#pragma unroll
  for (int sl = 0; sl < 4; ++sl) {
#pragma unroll
    for (int i = 0; i < 32; ++i) o[sl][i] = 0.0f;
  }
  float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;
  for (int stage = 0, round = 0;;) {
    mbarrier_wait(&full[stage], round & 1);
    const int t = s_tile[stage];
    if (t < 0) break;
    const uint32_t k_base = stages_base + stage * 2 * kWgTileBytes, v_base = k_base + kWgTileBytes;
    // S = Q K^T: 64 rows x 64 keys over D in k16 steps.
    float s[32];
#pragma unroll
    for (int i = 0; i < 32; ++i) s[i] = 0.0f;
    wgmma::wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < D / 16; ++ks) {
      wgmma::wgmma_ss<64>(s, kmajor_descriptor(q_base + ks * 64 * 32),
                          swizzled_descriptor(k_base + (ks / 4) * kQuarterBytes + (ks % 4) * 32, 16));
    }
    wgmma::wgmma_commit();
    wgmma::wgmma_wait<0>();
    // Mask, scale, online softmax: as the mma.sync kernel, s[4 j + e] its s[j][e].
    const float2 corr = online_softmax_tile([&](int j, int e) -> float& { return s[4 * j + e]; },
                                            tile_keys(t * kKeys, pos0, mask0, ratio) >> (2 * c),
                                            tile_keys(t * kKeys, pos1, mask1, ratio) >> (2 * c), scale, m0, m1, l0, l1);
    const float corr0 = corr.x, corr1 = corr.y;
#pragma unroll
    for (int sl = 0; sl < 4; ++sl) {
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        o[sl][4 * j] *= corr0;
        o[sl][4 * j + 1] *= corr0;
        o[sl][4 * j + 2] *= corr1;
        o[sl][4 * j + 3] *= corr1;
      }
    }
    // O += P V: per 16 keys the A fragment from S (rows g, g + 8; keys 2c, 2c + 1 and 8 more), all four made before
    // the fence (made between the wgmmas, ptxas fenced each again, C7519), then V's four 64-d slices.
    uint32_t a[kKeys / 16][4];
#pragma unroll
    for (int kk = 0; kk < kKeys / 16; ++kk) {
      a[kk][0] = pack_bf16x2(s[8 * kk], s[8 * kk + 1]);
      a[kk][1] = pack_bf16x2(s[8 * kk + 2], s[8 * kk + 3]);
      a[kk][2] = pack_bf16x2(s[8 * kk + 4], s[8 * kk + 5]);
      a[kk][3] = pack_bf16x2(s[8 * kk + 6], s[8 * kk + 7]);
    }
    wgmma::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kKeys / 16; ++kk) {
#pragma unroll
      for (int sl = 0; sl < 4; ++sl) {
        wgmma::wgmma_rs_tb<64>(o[sl], a[kk], swizzled_descriptor(v_base + sl * kQuarterBytes + kk * 16 * 128, kQuarterBytes));
      }
    }
    wgmma::wgmma_commit();
    wgmma::wgmma_wait<0>();
    mbarrier_arrive_if(lane == 0, &empty[stage]);
    if (++stage == 2) {
      stage = 0;
      ++round;
    }
  }

#pragma unroll
  for (int off = 1; off <= 2; off <<= 1) {
    l0 += __shfl_xor_sync(0xffffffffu, l0, off);
    l1 += __shfl_xor_sync(0xffffffffu, l1, off);
  }
  const float inv0 = l0 > 0.0f ? 1.0f / l0 : 0.0f, inv1 = l1 > 0.0f ? 1.0f / l1 : 0.0f;
  // Per 64-d slice, all 16 of the thread's gate pairs are loaded before the first is used (one round trip per
  // slice, not per pair); o[sl] is dead once its slice is written.
  const int row_of[2] = {row0 + r0, row0 + r1};
  const float inv[2] = {inv0, inv1};
#pragma unroll
  for (int sl = 0; sl < 4; ++sl) {
    float2 gv[2][8];
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const float* grow = gate + (static_cast<size_t>(row_of[half]) * heads + h) * head_stride + 64 * sl + 2 * c;
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        gv[half][j] = row_of[half] < rows ? *reinterpret_cast<const float2*>(grow + 8 * j) : make_float2(0.0f, 0.0f);
      }
    }
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      if (row_of[half] >= rows) continue;
      float* orow = out + (static_cast<size_t>(row_of[half]) * heads + h) * D + 64 * sl + 2 * c;
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        *reinterpret_cast<float2*>(orow + 8 * j) =
            make_float2(o[sl][4 * j + 2 * half] * inv[half] * sigmoidf(gv[half][j].x),
                        o[sl][4 * j + 2 * half + 1] * inv[half] * sigmoidf(gv[half][j].y));
      }
    }
  }
}

template <int D>
void launch_d(const KvPages& cache, const float* q, const float* gate, int head_stride, const int32_t* positions,
              int rows, int heads, int kv_heads, const uint32_t* block_mask, int mask_words, int ratio, float* out,
              cudaStream_t stream) {
  constexpr size_t bytes = smem_bytes<D>();
  static const bool ready = [] {
    IMP_CUDA_CHECK(cudaFuncSetAttribute(attention_prefill_kernel<D, true>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
    IMP_CUDA_CHECK(cudaFuncSetAttribute(attention_prefill_kernel<D, false>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
    return true;
  }();
  (void)ready;
  if constexpr (D == kWgD) {
    const int ps = cache.page_size;
    if (cache.bf16 && (ps % kKeys == 0 || (kKeys % ps == 0 && ps >= 8))) {
      // The tensor maps need the pool's extent: not set is a caller's bug, not a reason to take the other kernel.
      if (cache.pages <= 0) throw_invalid_launch("attention prefill: KvPages.pages (the pool's page count) must be set");
      static const bool wg_ready = [] {
        IMP_CUDA_CHECK(cudaFuncSetAttribute(attention_prefill_wgmma_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            static_cast<int>(kWgSmemBytes)));
        return true;
      }();
      (void)wg_ready;
      const uint64_t cache_rows = static_cast<uint64_t>(cache.pages) * static_cast<uint64_t>(ps);
      const uint32_t box_rows = static_cast<uint32_t>(std::min(ps, kKeys)), width = static_cast<uint32_t>(kv_heads * D);
      const CUtensorMap k_map = kv_tensor_map(cache.keys, cache_rows, width, box_rows);
      const CUtensorMap v_map = kv_tensor_map(cache.values, cache_rows, width, box_rows);
      attention_prefill_wgmma_kernel<<<dim3((rows + kWgRows - 1) / kWgRows, heads), kWgThreads, kWgSmemBytes, stream>>>(
          cache, k_map, v_map, q, gate, head_stride, positions, rows, heads, kv_heads, block_mask, mask_words, ratio, out);
      IMP_CUDA_CHECK_LAUNCH();
      return;
    }
  }
  const dim3 grid((rows + kRows - 1) / kRows, heads);
  if (cache.bf16) {
    attention_prefill_kernel<D, true><<<grid, kThreads, bytes, stream>>>(cache, q, gate, head_stride, positions, rows, heads, kv_heads,
                                                                                block_mask, mask_words, ratio, out);
  } else {
    attention_prefill_kernel<D, false><<<grid, kThreads, bytes, stream>>>(cache, q, gate, head_stride, positions, rows, heads, kv_heads,
                                                                                block_mask, mask_words, ratio, out);
  }
  IMP_CUDA_CHECK_LAUNCH();
}

}  // namespace

void launch_attention_prefill(const KvPages& cache, const float* q, const float* gate, int32_t head_stride,
                              const int32_t* positions, int32_t rows, int32_t heads, int32_t kv_heads,
                              int32_t head_dim, float* out, cudaStream_t stream, const uint32_t* block_mask,
                              int32_t mask_words, int32_t ratio) {
  if (kv_heads <= 0 || heads % kv_heads != 0) throw_invalid_launch("attention prefill: heads must be a multiple of kv heads");
  if (head_stride % 4 != 0 || (reinterpret_cast<uintptr_t>(q) | reinterpret_cast<uintptr_t>(gate)) % 16 != 0) {
    throw_invalid_launch("attention prefill: q and gate must be 16-byte aligned with head_stride % 4 == 0");
  }
  if (block_mask != nullptr && (ratio < 1 || mask_words < 1)) {
    throw_invalid_launch("attention prefill: a block mask needs ratio >= 1 and mask_words >= 1");
  }
  if (rows <= 0) return;
  switch (head_dim) {
    case 32: return launch_d<32>(cache, q, gate, head_stride, positions, rows, heads, kv_heads, block_mask, mask_words, ratio, out, stream);
    case 64: return launch_d<64>(cache, q, gate, head_stride, positions, rows, heads, kv_heads, block_mask, mask_words, ratio, out, stream);
    case 128: return launch_d<128>(cache, q, gate, head_stride, positions, rows, heads, kv_heads, block_mask, mask_words, ratio, out, stream);
    case 256: return launch_d<256>(cache, q, gate, head_stride, positions, rows, heads, kv_heads, block_mask, mask_words, ratio, out, stream);
    default: throw_invalid_launch("attention prefill: head_dim must be 32, 64, 128 or 256");
  }
}

}  // namespace imp::cuda
