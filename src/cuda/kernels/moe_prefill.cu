#include "cuda/kernels/moe_prefill.h"

#include <algorithm>

#include "cuda/check.h"
#include "cuda/kernels/prefill_common.cuh"
#include "cuda/kernels/wgmma_ops.cuh"

namespace imp::cuda {
namespace {

using namespace prefill;

// Two tile shapes: up to 128 (token, choice) pairs per tile (the wgmma N dimension), one block per SM; or, where
// a chunk gives a slot only a few pairs (short prompts), up to 32 pairs at two blocks per SM, so that one block's
// pipeline fill and epilogue hide behind the other's k loop.
constexpr int kWidePairs = 128, kNarrowPairs = 32;
// The narrow tiles from this many pairs per slot (tokens * k / slots) down. Measured on the H200 (session 9,
// full-scale dummy model, medians of 5): narrow against wide tiles at pp 512 (10 pairs per slot) 6237 against
// 5429 tok/s, at pp 1024 (20) 8818 against 8122; at pp 2048 (40) wide is faster, 10616 against 10317.
constexpr int kNarrowMaxPairsPerSlot = 32;
constexpr int kThreads = 256;    // two warpgroups
constexpr int kStrips = 16;      // 16-row weight strips per block: 2 warpgroups x 4 warps x 2
constexpr int kWStageBytes = kStrips * 512 + kStrips * 64;  // NVFP4 codes, then scales, of the block's strips
// Six stages of the widest tile; the narrow tiles' blocks take 8 stages each, two blocks per SM.
template <int kPairs>
constexpr int kSmemBytes = kPairs == kWidePairs ? 6 * (kWidePairs * 128 + kWStageBytes) : 8 * (kNarrowPairs * 128 + kWStageBytes);
static_assert(kSmemBytes<kWidePairs> <= 227 * 1024 && 2 * (kSmemBytes<kNarrowPairs> + 1024) <= 228 * 1024, "fits");

// The pipeline of a tile of N pairs: each stage holds 64 inputs of the N pairs' activations (bf16), then the
// block's weights of that supertile; narrower tiles fit more stages into the same shared memory, so more chunks
// are in flight where a block has little to compute per chunk (few pairs per slot, e.g. short prompts).
template <int kPairs, int N>
struct Stages {
  static constexpr int kXBytes = N * 128;
  static constexpr int kBytes = kXBytes + kWStageBytes;
  static constexpr int kCount = kSmemBytes<kPairs> / kBytes;
  static constexpr int kAhead = kCount - 2;  // a stage is refilled two k steps after its wgmmas were issued
  static_assert(kBytes % 128 == 0 && kCount >= 6, "stages stay 128-byte aligned; at least six");
};

struct Plan {
  size_t counts = 0, cursor = 0, tiles = 0, num_tiles = 0, sorted = 0, pos_of = 0, act = 0, partial = 0;
  size_t bytes = 0;
  int64_t max_tiles = 0;
};

Plan make_plan(const model::ExpertSlotLayout& layout, int64_t tokens, int64_t k, int64_t num_slots) {
  Plan p;
  const int64_t pairs = tokens * k;
  p.max_tiles = (pairs + kNarrowPairs - 1) / kNarrowPairs + std::min(num_slots, pairs);  // either tile shape
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
  p.act = take(pairs * layout.padded_intermediate * 2);
  p.partial = take(pairs * layout.hidden * 4);
  p.bytes = offset;
  return p;
}

__global__ void count_kernel(const int32_t* slots, int pairs, int32_t* counts) {
  const int p = blockIdx.x * blockDim.x + threadIdx.x;
  if (p < pairs) atomicAdd(&counts[slots[p]], 1);
}

// One block: exclusive offsets of each slot's pairs (cursor) and the tile list, slot by slot, in slot order. A
// slot's pairs are split evenly over ceil(count / tile_pairs) tiles (e.g. 130 -> 65 + 65, not 128 + 2).
constexpr int kPlanThreads = 1024;
__global__ void __launch_bounds__(kPlanThreads) plan_kernel(const int32_t* counts, int num_slots, int tile_pairs,
                                                            int32_t* cursor, int4* tiles, int32_t* num_tiles) {
  __shared__ int s_pairs[kPlanThreads], s_tiles[kPlanThreads];
  const int tid = threadIdx.x;
  const int per = (num_slots + kPlanThreads - 1) / kPlanThreads;
  const int begin = min(tid * per, num_slots), end = min(begin + per, num_slots);
  int pairs = 0, tl = 0;
  for (int s = begin; s < end; ++s) {
    const int c = counts[s];
    pairs += c;
    tl += (c + tile_pairs - 1) / tile_pairs;
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
    const int n = (c + tile_pairs - 1) / tile_pairs;
    for (int i = 0, at = 0; i < n; ++i) {
      const int size = c / n + (i < c % n ? 1 : 0);
      tiles[tile_off++] = make_int4(s, pair_off + at, size, 0);
      at += size;
    }
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

// NVFP4 A fragment of one 16-row strip, k16 step q of a 64-input supertile: E2M1 decoded and multiplied by the
// E4M3 block scale (times 2^-8, kScaleFold) in bf16, exactly: the codes come times 2^-126 and the scales are
// lifted by 2^118 (at most 448 * 2^118, finite in bf16). scale_words: the strip's 8 scale bytes of rows g and
// g + 8 (model::scale_byte_offset: tile q's pair is 16-bit word q).
constexpr float kScaleFold = 256.0f;
template <int kQ>
__device__ __forceinline__ void nvfp4_fragment(uint32_t word, uint2 scale_words, uint32_t (&a)[4]) {
  decode_e2m1x8(word, a);
  const float2 f = e4m3x2_to_float2<kQ % 2>(kQ < 2 ? scale_words.x : scale_words.y);
  constexpr float kLift = 1.0f / (kCodeScale * kScaleFold);
  const uint32_t s0 = pack_bf16x2(f.x * kLift, f.x * kLift), s1 = pack_bf16x2(f.y * kLift, f.y * kLift);
  a[0] = bf16x2_mul(a[0], s0);  // row g
  a[2] = bf16x2_mul(a[2], s0);
  a[1] = bf16x2_mul(a[1], s1);  // row g + 8
  a[3] = bf16x2_mul(a[3], s1);
}

// k_loop.operator()<NJ>() for a tile of `count` pairs, NJ = its groups of 16 pairs (1 to kPairs / 16,
// block-uniform): the kernels' k loops are instantiated per wgmma width N = 16 * NJ, so a tile computes at most 15
// padding pairs (a slot's ~80 pairs at pp 4096 take N = 80, not 96).
template <int kPairs, typename KLoop>
__device__ __forceinline__ void run_per_pair_groups(int count, KLoop& k_loop) {
  const int groups = (count + 15) / 16;
  if constexpr (kPairs == kNarrowPairs) {
    if (groups <= 1) k_loop.template operator()<1>(); else k_loop.template operator()<2>();
  } else {
    switch (groups) {
      case 1: k_loop.template operator()<1>(); break;
      case 2: k_loop.template operator()<2>(); break;
      case 3: k_loop.template operator()<3>(); break;
      case 4: k_loop.template operator()<4>(); break;
      case 5: k_loop.template operator()<5>(); break;
      case 6: k_loop.template operator()<6>(); break;
      case 7: k_loop.template operator()<7>(); break;
      default: k_loop.template operator()<8>(); break;
    }
  }
}

// Activations in a stage of a tile of N pairs: K-major "core matrices" without swizzle, as wgmma reads them:
// element (pair n, input k) of the 64-input chunk at (k / 16) * 32 N + (n / 8) * 256 + ((k % 16) / 8) * 128 +
// (n % 8) * 16 + (k % 8) * 2 bytes. Descriptor: LBO (the two 8-input halves of a k16 step) 128 bytes, SBO (groups
// of 8 pairs) 256 bytes, no swizzle (checked on the H200 by bench/experiments/wgmma_probe.cu).
__device__ __forceinline__ uint64_t x_descriptor(uint32_t smem_byte_address) {
  return ((smem_byte_address >> 4) & 0x3fff) | (uint64_t{128 >> 4} << 16) | (uint64_t{256 >> 4} << 32);
}

// A copy source's address for chunk `chunk`, computed afresh from an opaque base: a pointer advanced after each
// copy (or strength-reduced to one) is rewritten right after the cp.async that reads it, and the rewrite waits
// until the copy, queued behind the others, has read its source registers (ncu, 9493cfa: ~14% of the gate/up
// kernel's stall samples on two such instructions). Only the narrow tiles load this way (H200, session 18, A/B in
// one visit each, medians of 5): pp 512, which takes narrow tiles, +1.0%; in the wide tiles it cost 0.7% at pp 4096
// (gate/up 1099 -> 1146 us, down 642 -> 656 us per layer).
template <typename T>
__device__ __forceinline__ const T* copy_source(const T* base, size_t offset) {
  asm volatile("" : "+l"(base));
  return base + offset;
}

// This thread's activation copies (cp.async) for tiles of up to kPairs pairs: of each 64-input chunk, the copy
// grid of k16 block i is kPairs rows x 2 halves; thread t takes slot t % (2 kPairs) of the blocks i = t / (2 kPairs)
// + j 256 / (2 kPairs), j < kPairs / 32: pair n = slot % 8 + 8 (slot / 16), half (slot / 8) % 2 (a warp fills 512
// contiguous bytes per copy).
template <int kPairs>
struct XCopies {
  static constexpr int kSlots = 2 * kPairs, kPerThread = kPairs / 32;
  const uint16_t* src;  // this thread's first piece of the next chunk (the tile's first row for pairs beyond it)
  int k_left;           // inputs of the row left from that piece on (<= 0: zero-fill)
  uint32_t dst;         // byte offset of piece j = 0 in a stage, before the k16 block's N-dependent offset
  int block0;           // the first k16 block
  bool valid;           // the pair is in the tile
  static __device__ int pair() {
    const int slot = threadIdx.x % kSlots;
    return (slot & 7) + 8 * (slot >> 4);
  }
  __device__ XCopies(const uint16_t* pair_row, const uint16_t* first_row, int K) {
    const int slot = threadIdx.x % kSlots, n = pair(), half = (slot >> 3) & 1;
    block0 = threadIdx.x / kSlots;
    const int k0 = 16 * block0 + 8 * half;
    dst = (n >> 3) * 256 + half * 128 + (n & 7) * 16;
    valid = pair_row != nullptr;
    src = (valid ? pair_row : first_row) + k0;
    k_left = K - k0;
  }
  // The next chunk (the sources advance). Pairs n >= N are never read (this tile's wgmmas stop at N); pairs beyond
  // the tile and inputs beyond K are zero-filled.
  template <int N>
  __device__ void load_next(uint8_t* stage) {
    if (pair() >= N) return;
    constexpr int kStep = 256 / kSlots;  // k16 blocks between this thread's copies
#pragma unroll
    for (int j = 0; j < kPerThread; ++j) {
      cp_async16(stage + dst + (block0 + j * kStep) * 32 * N, src + 16 * kStep * j, valid && 16 * kStep * j < k_left);
    }
    src += 64;
    k_left -= 64;
  }
  // Chunk `chunk` of a source that never advances, the same copies.
  template <int N>
  __device__ void load(uint8_t* stage, int chunk) const {
    if (pair() >= N) return;
    constexpr int kStep = 256 / kSlots;  // k16 blocks between this thread's copies
    const int k0 = 64 * chunk;
    const uint16_t* from = copy_source(src, static_cast<size_t>(k0));
#pragma unroll
    for (int j = 0; j < kPerThread; ++j) {
      cp_async16(stage + dst + (block0 + j * kStep) * 32 * N, from + 16 * kStep * j, valid && k0 + 16 * kStep * j < k_left);
    }
  }
};

// This thread's weight copies (cp.async): the block's 16 strips' NVFP4 codes (512 bytes each) and scales (64
// bytes each) of one supertile are 576 16-byte copies: two codes copies per thread, one scales copy for threads
// 0-63; `strip_of(e, proj, strip)` names strip entry e. Strips beyond the projection are zero-filled. (One warp
// issuing cp.async.bulk copies per strip instead, completing on mbarriers, made both kernels ~50% slower.)
struct WCopies {
  const uint8_t* src[3];
  uint32_t dst[3];
  bool valid[3];
  template <typename StripOf>
  __device__ WCopies(const uint8_t* slot_base, int chunks, StripOf strip_of) {
    static_assert(kStrips * 32 == 2 * kThreads && kStrips * 4 <= kThreads, "copy assignment");
#pragma unroll
    for (int i = 0; i < 3; ++i) {
      const bool codes = i < 2;
      const int id = codes ? threadIdx.x + kThreads * i : threadIdx.x % (kStrips * 4);
      const int e = codes ? id >> 5 : id >> 2, piece = codes ? id & 31 : id & 3;
      const model::SlotProjection* proj = nullptr;
      int strip = 0;
      strip_of(e, proj, strip);
      valid[i] = strip < proj->rows / 16 && (codes || threadIdx.x < kStrips * 4);
      const int stride = codes ? 512 : 64;
      src[i] = slot_base + (codes ? proj->codes : proj->scales) + static_cast<size_t>(valid[i] ? strip : 0) * chunks * stride + piece * 16;
      dst[i] = (codes ? e * 512 : kStrips * 512 + e * 64) + piece * 16;  // in a stage's weight part
    }
  }
  __device__ void load_next(uint8_t* stage_weights) {
    cp_async16(stage_weights + dst[0], src[0], valid[0]);
    cp_async16(stage_weights + dst[1], src[1], valid[1]);
    if (threadIdx.x < kStrips * 4) cp_async16(stage_weights + dst[2], src[2], valid[2]);
    src[0] += 512;
    src[1] += 512;
    src[2] += 64;
  }
  __device__ void load(uint8_t* stage_weights, int chunk) const {
    const size_t at = static_cast<size_t>(chunk);
    cp_async16(stage_weights + dst[0], copy_source(src[0], at * 512), valid[0]);
    cp_async16(stage_weights + dst[1], copy_source(src[1], at * 512), valid[1]);
    if (threadIdx.x < kStrips * 4) cp_async16(stage_weights + dst[2], copy_source(src[2], at * 64), valid[2]);
  }
};

// The k loop of one tile: acc0 / acc1 (N / 2 floats each, wgmma layout) += this warp's strips 0 / 1 (its places
// entry0 / entry1 among the block's 16) . X^T over `chunks` 64-input supertiles of K inputs. Each wgmma covers a
// warpgroup's 64 rows (one strip per warp) and all N pairs. Up to three k16 groups stay in flight while the next
// fragments are decoded (wgmma_wait<3>; their A registers stay live: 202 registers. One group: pp 4096 -0.8%, two:
// -0.3%, session 22); so at the barrier of step st only step st - 1's groups can be pending, and stage st % kCount
// is refilled at step st + kAhead, when step st - 2's wgmmas are done.
template <int kPairs, int N>
__device__ __forceinline__ void wgmma_k_loop(int chunks, uint8_t* smem, XCopies<kPairs> xc, WCopies wc, int entry0,
                                             int entry1, float (&acc0)[N / 2], float (&acc1)[N / 2]) {
  using S = Stages<kPairs, N>;
  const int lane = threadIdx.x & 31, g = lane >> 2;
#pragma unroll
  for (int i = 0; i < N / 2; ++i) acc0[i] = acc1[i] = 0.0f;
  auto load_chunk = [&](uint8_t* stage, int chunk) {
    if constexpr (kPairs == kNarrowPairs) {
      xc.template load<N>(stage, chunk);
      wc.load(stage + S::kXBytes, chunk);
    } else {  // chunks are loaded in order
      xc.template load_next<N>(stage);
      wc.load_next(stage + S::kXBytes);
    }
  };
#pragma unroll
  for (int s = 0; s < S::kAhead; ++s) {
    if (s < chunks) load_chunk(smem + s * S::kBytes, s);
    cp_async_commit();
  }
  const uint32_t smem_base = smem_addr(smem);
  for (int st = 0; st < chunks; ++st) {
    cp_async_wait<S::kAhead - 1>();  // this thread's copies of chunk st have landed
    wgmma::fence_proxy_async_shared();
    __syncthreads();  // and everyone's; both warpgroups are done with the stage refilled next
    const int next = st + S::kAhead;
    if (next < chunks) load_chunk(smem + (next % S::kCount) * S::kBytes, next);
    cp_async_commit();
    const int stage = st % S::kCount;
    const uint8_t* w_stage = smem + stage * S::kBytes + S::kXBytes;
    const uint4 c0 = *reinterpret_cast<const uint4*>(w_stage + entry0 * 512 + lane * 16);
    const uint4 c1 = *reinterpret_cast<const uint4*>(w_stage + entry1 * 512 + lane * 16);
    const uint2* sc = reinterpret_cast<const uint2*>(w_stage + kStrips * 512);  // [strip][g]: rows g, g + 8
    const uint2 s0 = sc[entry0 * 8 + g], s1 = sc[entry1 * 8 + g];
    const uint32_t w0[4] = {c0.x, c0.y, c0.z, c0.w}, w1[4] = {c1.x, c1.y, c1.z, c1.w};
    const uint32_t x_stage = smem_base + stage * S::kBytes;
    auto step = [&]<int kQ>() {
      uint32_t a0[4], a1[4];
      nvfp4_fragment<kQ>(w0[kQ], s0, a0);
      nvfp4_fragment<kQ>(w1[kQ], s1, a1);
      wgmma::wgmma_fence();
      const uint64_t desc = x_descriptor(x_stage + kQ * 32 * N);
      wgmma::wgmma_rs<N>(acc0, a0, desc);
      wgmma::wgmma_rs<N>(acc1, a1, desc);
      wgmma::wgmma_commit();
      wgmma::wgmma_wait<3>();
    };
    step.template operator()<0>();
    step.template operator()<1>();
    step.template operator()<2>();
    step.template operator()<3>();
  }
  wgmma::wgmma_wait<0>();
  cp_async_wait<0>();
  __syncthreads();  // shared memory is free for the epilogue
}

// Block (x: 128 intermediate rows, y: one tile of <= 128 pairs of one slot; the row blocks of a tile run side by
// side and share its activation rows in L2): gate and up together (warpgroup wg holds rows 64 wg .. 64 wg + 63 of
// both), then SwiGLU; act [pairs in bucket order, padded_intermediate] bf16.
template <int kPairs>
__global__ void __launch_bounds__(kThreads, kPairs == kNarrowPairs ? 2 : 1)
    moe_gate_up_kernel(const uint8_t* __restrict__ pool, const model::SlotScales* __restrict__ scales,
                       model::ExpertSlotLayout layout, const uint16_t* __restrict__ x16, const int32_t* __restrict__ sorted,
                       const int4* __restrict__ tiles, const int32_t* __restrict__ num_tiles, int k,
                       uint16_t* __restrict__ act) {
  extern __shared__ __align__(128) uint8_t smem[];
  __shared__ int tok[kPairs];
  if (static_cast<int>(blockIdx.y) >= *num_tiles) return;  // block-uniform, before any barrier
  const int4 tile = tiles[blockIdx.y];
  const int slot = tile.x, start = tile.y, count = tile.z;
  const int H = layout.hidden, Ipad = layout.padded_intermediate;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, wg = warp >> 2, w = warp & 3, g = lane >> 2, c = lane & 3;
  if (tid < kPairs) tok[tid] = tid < count ? sorted[start + tid] / k : -1;
  __syncthreads();

  const uint8_t* base = pool + static_cast<size_t>(slot) * layout.slot_bytes;
  const int chunks = layout.gate.supertiles();
  // Strip entries 0-7: gate strips 8 x .. 8 x + 7; 8-15: the same strips of up.
  auto strip_of = [&](int e, const model::SlotProjection*& proj, int& strip) {
    proj = e < 8 ? &layout.gate : &layout.up;
    strip = blockIdx.x * 8 + (e & 7);
  };
  const int my_tok = tok[XCopies<kPairs>::pair()];
  const XCopies<kPairs> xc(my_tok >= 0 ? x16 + static_cast<size_t>(my_tok) * H : nullptr, x16 + static_cast<size_t>(tok[0]) * H, H);
  const WCopies wc(base, chunks, strip_of);

  auto tile_body = [&]<int NJ>() {
    constexpr int N = 16 * NJ;
    float accg[N / 2], accu[N / 2];
    wgmma_k_loop<kPairs, N>(chunks, smem, xc, wc, wg * 4 + w, 8 + wg * 4 + w, accg, accu);
    // SwiGLU into this warpgroup's [kPairs pairs][64 rows] bf16 scratch (row stride 72), then 16-byte stores.
    constexpr int kStride = 72;
    uint16_t* scr = reinterpret_cast<uint16_t*>(smem) + wg * (kPairs * kStride);
    const model::SlotScales s = scales[slot];
    const float fg = s.gate * kScaleFold, fu = s.up * kScaleFold;
#pragma unroll
    for (int j = 0; j < N / 8; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int pair = 8 * j + 2 * c + (e & 1), row = 16 * w + g + 8 * (e >> 1);
        const float gate = accg[4 * j + e] * fg, up = accu[4 * j + e] * fu;
        scr[pair * kStride + row] = bf16_bits(gate / (1.0f + __expf(-gate)) * up);
      }
    }
    __syncthreads();
    const int col0 = blockIdx.x * 128 + wg * 64;
    for (int id = tid & 127; id < N * 8; id += 128) {
      const int pair = id >> 3, piece = id & 7, col = col0 + piece * 8;
      if (pair < count && col < Ipad) {
        *reinterpret_cast<uint4*>(act + static_cast<size_t>(start + pair) * Ipad + col) =
            *reinterpret_cast<const uint4*>(scr + pair * kStride + piece * 8);
      }
    }
  };
  run_per_pair_groups<kPairs>(count, tile_body);
}

// Block (x: 256 output rows of down, y: one tile; warpgroup wg: rows 128 wg .. 128 wg + 127 as two 64-row
// blocks): writes the weighted fp32 partial of each pair, partial [pairs in bucket order, hidden].
template <int kPairs>
__global__ void __launch_bounds__(kThreads, kPairs == kNarrowPairs ? 2 : 1)
    moe_down_kernel(const uint8_t* __restrict__ pool, const model::SlotScales* __restrict__ scales,
                    model::ExpertSlotLayout layout, const uint16_t* __restrict__ act, const int32_t* __restrict__ sorted,
                    const float* __restrict__ weights, const int4* __restrict__ tiles,
                    const int32_t* __restrict__ num_tiles, float* __restrict__ partial) {
  extern __shared__ __align__(128) uint8_t smem[];
  __shared__ float route_w[kPairs];
  if (static_cast<int>(blockIdx.y) >= *num_tiles) return;
  const int4 tile = tiles[blockIdx.y];
  const int slot = tile.x, start = tile.y, count = tile.z;
  const int H = layout.hidden, Ipad = layout.padded_intermediate;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, wg = warp >> 2, w = warp & 3, g = lane >> 2, c = lane & 3;
  if (tid < kPairs) route_w[tid] = tid < count ? weights[sorted[start + tid]] : 0.0f;
  __syncthreads();

  const uint8_t* base = pool + static_cast<size_t>(slot) * layout.slot_bytes;
  const int chunks = layout.down.supertiles();
  auto strip_of = [&](int e, const model::SlotProjection*& proj, int& strip) {
    proj = &layout.down;
    strip = blockIdx.x * 16 + e;
  };
  const int my_pair = XCopies<kPairs>::pair();
  const XCopies<kPairs> xc(my_pair < count ? act + static_cast<size_t>(start + my_pair) * Ipad : nullptr, act + static_cast<size_t>(start) * Ipad, Ipad);
  const WCopies wc(base, chunks, strip_of);

  auto tile_body = [&]<int NJ>() {
    constexpr int N = 16 * NJ;
    float acc0[N / 2], acc1[N / 2];
    wgmma_k_loop<kPairs, N>(chunks, smem, xc, wc, wg * 8 + w, wg * 8 + 4 + w, acc0, acc1);
    // Weighted partials into this warpgroup's [kPairs pairs][128 rows] fp32 scratch (row stride 132), then 16-byte
    // stores.
    constexpr int kStride = 132;
    float* scr = reinterpret_cast<float*>(smem) + wg * (kPairs * kStride);
    const float fd = scales[slot].down * kScaleFold;
#pragma unroll
    for (int j = 0; j < N / 8; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int pair = 8 * j + 2 * c + (e & 1), row = 16 * w + g + 8 * (e >> 1);
        const float rw = route_w[pair] * fd;
        scr[pair * kStride + row] = acc0[4 * j + e] * rw;
        scr[pair * kStride + 64 + row] = acc1[4 * j + e] * rw;
      }
    }
    __syncthreads();
    const int row0 = blockIdx.x * 256 + wg * 128;
    for (int id = tid & 127; id < N * 32; id += 128) {
      const int pair = id >> 5, piece = id & 31, row = row0 + piece * 4;
      if (pair < count && row < H) {
        *reinterpret_cast<float4*>(partial + static_cast<size_t>(start + pair) * H + row) =
            *reinterpret_cast<const float4*>(scr + pair * kStride + piece * 4);
      }
    }
  };
  run_per_pair_groups<kPairs>(count, tile_body);
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
                        const uint16_t* x_bf16, const int32_t* slots, const float* weights, int32_t tokens, int32_t k,
                        int32_t num_slots, void* workspace, size_t workspace_bytes, float* y, cudaStream_t stream) {
  if (tokens < 0 || k <= 0 || num_slots <= 0) throw_invalid_launch("moe prefill: bad token, choice or slot count");
  if (tokens == 0) return;
  if (layout.format != model::SlotFormat::kNvfp4) throw_invalid_launch("moe prefill: NVFP4 slots only (BF16 slots take the row kernels)");
  if (tokens > 65535) throw_invalid_launch("moe prefill: at most 65535 tokens per launch");
  const int64_t pairs64 = static_cast<int64_t>(tokens) * k;
  if (pairs64 >= (1LL << 31)) throw_invalid_launch("moe prefill: tokens * k too large");
  if (layout.hidden % 8 != 0 || layout.padded_intermediate % 8 != 0) throw_invalid_launch("moe prefill: hidden and intermediate must be multiples of 8");
  if (reinterpret_cast<uintptr_t>(x_bf16) % 16 != 0 || reinterpret_cast<uintptr_t>(y) % 16 != 0 ||
      reinterpret_cast<uintptr_t>(workspace) % 256 != 0) {
    throw_invalid_launch("moe prefill: x and y must be 16-byte aligned, the workspace 256-byte aligned");
  }
  const Plan plan = make_plan(layout, tokens, k, num_slots);
  if (workspace_bytes < plan.bytes) throw_invalid_launch("moe prefill: workspace too small");
  if (plan.max_tiles > 65535) throw_invalid_launch("moe prefill: too many tiles (grid y); split the chunk");
  uint8_t* ws = static_cast<uint8_t*>(workspace);
  int32_t* counts = reinterpret_cast<int32_t*>(ws + plan.counts);
  int32_t* cursor = reinterpret_cast<int32_t*>(ws + plan.cursor);
  int4* tiles = reinterpret_cast<int4*>(ws + plan.tiles);
  int32_t* num_tiles = reinterpret_cast<int32_t*>(ws + plan.num_tiles);
  int32_t* sorted = reinterpret_cast<int32_t*>(ws + plan.sorted);
  int32_t* pos_of = reinterpret_cast<int32_t*>(ws + plan.pos_of);
  uint16_t* act = reinterpret_cast<uint16_t*>(ws + plan.act);
  float* partial = reinterpret_cast<float*>(ws + plan.partial);
  const int pairs = static_cast<int>(pairs64);

  IMP_CUDA_CHECK(cudaMemsetAsync(counts, 0, static_cast<size_t>(num_slots) * 4, stream));
  count_kernel<<<(pairs + 255) / 256, 256, 0, stream>>>(slots, pairs, counts);
  IMP_CUDA_CHECK_LAUNCH();
  const bool narrow = pairs64 <= static_cast<int64_t>(kNarrowMaxPairsPerSlot) * num_slots;
  plan_kernel<<<1, kPlanThreads, 0, stream>>>(counts, num_slots, narrow ? kNarrowPairs : kWidePairs, cursor, tiles,
                                              num_tiles);
  IMP_CUDA_CHECK_LAUNCH();
  scatter_kernel<<<(pairs + 255) / 256, 256, 0, stream>>>(slots, pairs, cursor, sorted, pos_of);
  IMP_CUDA_CHECK_LAUNCH();

  auto run = [&]<int kPairs>() {
    // Grid rows for this tile shape's bound (each slot's ceil(count / kPairs) tiles), not the workspace's bound for
    // either shape: every row past the plan's tile count is a block that takes an SM's shared memory only to exit
    // (at pp 4096 the wide tiles are ~525 of 832 rows instead of 1792).
    const unsigned grid_tiles = static_cast<unsigned>((pairs64 + kPairs - 1) / kPairs + std::min<int64_t>(num_slots, pairs64));
    static const bool smem_set = [] {  // dynamic shared memory beyond 48 KB, once per tile shape
      IMP_CUDA_CHECK(cudaFuncSetAttribute(moe_gate_up_kernel<kPairs>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes<kPairs>));
      IMP_CUDA_CHECK(cudaFuncSetAttribute(moe_down_kernel<kPairs>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes<kPairs>));
      return true;
    }();
    (void)smem_set;
    const dim3 gu_grid((layout.gate.rows / 16 + 7) / 8, grid_tiles);
    const dim3 down_grid((layout.down.rows / 16 + 15) / 16, grid_tiles);
    moe_gate_up_kernel<kPairs><<<gu_grid, kThreads, kSmemBytes<kPairs>, stream>>>(pool, scales, layout, x_bf16, sorted, tiles,
                                                                                  num_tiles, k, act);
    IMP_CUDA_CHECK_LAUNCH();
    moe_down_kernel<kPairs><<<down_grid, kThreads, kSmemBytes<kPairs>, stream>>>(pool, scales, layout, act, sorted, weights,
                                                                                 tiles, num_tiles, partial);
    IMP_CUDA_CHECK_LAUNCH();
  };
  if (narrow) {
    run.template operator()<kNarrowPairs>();
  } else {
    run.template operator()<kWidePairs>();
  }
  combine_kernel<<<dim3((layout.hidden / 4 + 127) / 128, tokens), 128, 0, stream>>>(partial, pos_of, k, layout.hidden, y);
  IMP_CUDA_CHECK_LAUNCH();
}

}  // namespace imp::cuda
