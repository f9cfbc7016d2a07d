#include "cuda/kernels/moe_prefill.h"

#include <algorithm>
#include <utility>

#include "cuda/check.h"
#include "cuda/launch.h"
#include "cuda/tensor_map.h"
#include "cuda/kernels/prefill_common.cuh"
#include "cuda/kernels/wgmma_layout.cuh"
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
// Two consumer warpgroups (the wgmmas) and a producer warpgroup, of which thread 256 issues every stage's copies.
// A producer of one warp would not do: an SM sub-partition holding three of the nine warps gives each <= 168
// registers, and at that cap ptxas serializes the wide tiles' wgmmas (C7512). A whole warpgroup hands its
// registers to the consumers (setmaxnreg) through the block's pool: what the consumers take must not exceed what
// the producer gives back, or they wait for it forever.
constexpr int kConsumerWarps = 8, kConsumerThreads = 32 * kConsumerWarps, kThreads = kConsumerThreads + 128;
template <int kPairs>
constexpr int kBlocksPerSm = kPairs == kWidePairs ? 1 : 2;
template <int kPairs>
constexpr int kConsumerRegs = kPairs == kWidePairs ? 232 : 104;
template <int kPairs>
constexpr int kProducerRegs = kPairs == kWidePairs ? 40 : 24;
template <int kPairs>
constexpr bool kRegistersBalance = setmaxnreg_balances(launch_register_cap(kThreads, kBlocksPerSm<kPairs>), 2,
                                                       kConsumerRegs<kPairs>, 1, kProducerRegs<kPairs>);
static_assert(kRegistersBalance<kWidePairs> && kRegistersBalance<kNarrowPairs>,
              "two consumer warpgroups take at most what the producer warpgroup gives back");
constexpr int kStrips = 16;      // 16-row weight strips per block: 2 warpgroups x 4 warps x 2
constexpr int kWStageBytes = kStrips * 512 + kStrips * 64;  // NVFP4 codes, then scales, of the block's strips
// Each block walks several (tile, row block) items through one ring of stages, each stage sized for the shape's
// widest tile (64 inputs of its activations, then the block's weights of that supertile), so that the producer
// loads the next item's first chunks while the consumers finish the current item (its last chunks and epilogue):
// a block per item paid ~4.6 us (down) to ~7.9 us (gate/up) of fill and epilogue that nothing hid (session 24).
// Gate/up keeps its SwiGLU scratch outside the ring. Dynamic shared memory per block: wide tiles 224 KB (one block
// per SM), narrow ones 108 KB (two).
template <int kPairs>
constexpr int kSmemBytes = kPairs == kWidePairs ? 224 * 1024 : 108 * 1024;
static_assert(kSmemBytes<kWidePairs> + 2048 <= 227 * 1024 && 2 * (kSmemBytes<kNarrowPairs> + 2048) <= 228 * 1024, "fits");
template <int kPairs>
constexpr int kStageBytes = kPairs * 128 + kWStageBytes;
template <int kPairs>
constexpr int kScratchBytes = 2 * kPairs * 128;  // gate/up's SwiGLU scratch: per warpgroup one image chunk
constexpr int kMaxStages = 16;                      // the kernels' full / empty barrier pairs
template <int kPairs, bool kScratch>
struct Ring {
  static constexpr int kCount = (kSmemBytes<kPairs> - (kScratch ? kScratchBytes<kPairs> : 0)) / kStageBytes<kPairs>;
  static_assert(kStageBytes<kPairs> % 128 == 0 && kCount >= 6 && kCount <= kMaxStages, "128-byte aligned stages; 6 to 16");
};

struct Plan {
  size_t counts = 0, cursor = 0, tiles = 0, by_width = 0, num_tiles = 0, sorted = 0, sorted_w = 0, pos_of = 0, act = 0,
         partial = 0;
  size_t bytes = 0;
  bool narrow = false;     // the tile shape: narrow (kNarrowPairs) or wide (kWidePairs) tiles
  int64_t max_tiles = 0;   // the shape's bound on the tile count: each slot's ceil(count / pairs per tile)
  int64_t image_rows = 0;  // rows of the activation images (tile_offset: the pairs and 15 rows of padding per tile)
};

Plan make_plan(const model::ExpertSlotLayout& layout, int64_t tokens, int64_t k, int64_t num_slots) {
  Plan p;
  const int64_t pairs = tokens * k;
  p.narrow = pairs <= int64_t{kNarrowMaxPairsPerSlot} * num_slots;
  const int64_t tile_pairs = p.narrow ? kNarrowPairs : kWidePairs;
  p.max_tiles = (pairs + tile_pairs - 1) / tile_pairs + std::min(num_slots, pairs);
  p.image_rows = pairs + 15 * p.max_tiles;
  size_t offset = 0;
  auto take = [&](int64_t bytes) {
    const size_t at = offset;
    offset += (static_cast<size_t>(bytes) + 255) / 256 * 256;
    return at;
  };
  p.counts = take(num_slots * 4);
  p.cursor = take(num_slots * 4);
  p.tiles = take(p.max_tiles * 16);
  p.by_width = take(p.max_tiles * 16);
  p.num_tiles = take(4);
  p.sorted = take(pairs * 4);
  p.sorted_w = take(pairs * 4);
  p.pos_of = take(pairs * 4);
  p.act = take(p.image_rows * layout.padded_intermediate * 2);
  // The fp32 partials (written by down) share their bytes with gate/up's activation images (read before down starts).
  p.partial = take(std::max(pairs * layout.hidden * 4, p.image_rows * layout.padded_hidden * 2));
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
// Also the tiles ordered by wgmma width (by_width: groups of 16 pairs ascending, .w = the tile's index; within a
// width in no fixed order), the order in which the GEMMs' blocks take their items.
__global__ void __launch_bounds__(kPlanThreads) plan_kernel(const int32_t* counts, int num_slots, int tile_pairs,
                                                            int32_t* cursor, int4* tiles, int4* by_width,
                                                            int32_t* num_tiles) {
  __shared__ int s_pairs[kPlanThreads], s_tiles[kPlanThreads];
  __shared__ int s_width_at[kWidePairs / 16];
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
  const int total = s_tiles[kPlanThreads - 1];
  if (tid == kPlanThreads - 1) *num_tiles = total;
  if (tid < kWidePairs / 16) s_width_at[tid] = 0;
  __syncthreads();  // the block's tile writes are visible to it, the counters zero
  for (int i = tid; i < total; i += kPlanThreads) atomicAdd(&s_width_at[(tiles[i].z + 15) / 16 - 1], 1);
  __syncthreads();
  if (tid == 0) {
    for (int j = 0, at = 0; j < kWidePairs / 16; ++j) {
      const int n = s_width_at[j];
      s_width_at[j] = at;
      at += n;
    }
  }
  __syncthreads();
  for (int i = tid; i < total; i += kPlanThreads) {
    const int4 t = tiles[i];
    by_width[atomicAdd(&s_width_at[(t.z + 15) / 16 - 1], 1)] = make_int4(t.x, t.y, t.z, i);
  }
}

// Pairs grouped by slot. The order inside a slot's bucket depends on atomics, which is harmless: a pair's
// results never depend on the other pairs of its tile.
// Also the route weights in bucket order (sorted_w), so that down reads a tile's weights by one load per pair.
__global__ void scatter_kernel(const int32_t* slots, const float* weights, int pairs, int32_t* cursor, int32_t* sorted,
                               float* sorted_w, int32_t* pos_of) {
  const int p = blockIdx.x * blockDim.x + threadIdx.x;
  if (p >= pairs) return;
  const int pos = atomicAdd(&cursor[slots[p]], 1);
  sorted[pos] = p;
  sorted_w[pos] = weights[p];
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

// A tile of `count` pairs takes wgmmas of width N = 16 * NJ, NJ = (count + 15) / 16 (1 to 8 for wide tiles, 1 or 2
// for narrow ones), so a tile computes at most 15 padding pairs (a slot's ~80 pairs at pp 4096 take N = 80, not
// 96). The kernels' loops are instantiated per NJ: for_each_pair_group calls body.operator()<NJ>() for every NJ in
// turn, and each runs the block's items of that width (the plan orders them by width; one loop whose body
// switched between the widths made ptxas serialize the wgmmas, C7512).
template <int kPairs, typename Body>
__device__ __forceinline__ void for_each_pair_group(Body& body) {
  [&]<int... kJ>(std::integer_sequence<int, kJ...>) {
    (body.template operator()<kJ + 1>(), ...);
  }(std::make_integer_sequence<int, kPairs / 16>());
}

// Activations in a stage of a tile of N pairs: wgmma_layout.cuh's K-major layout, element (pair n, input k) of the
// 64-input chunk at kmajor_offset(n, k, N).
// Both GEMMs read their activations from tile images in that layout, so that a stage's activations are one bulk
// copy: tile i (N = 16 ceil(count / 16) pairs, zeros past count) of a [rows, K] bf16 region starts at row
// start + 15 i (room for its padding), and its chunk c is the N * 128 bytes at c * N * 128 from there. Gathered
// token rows by every thread's cp.async cost the k loop ~30% more per chunk (bench/experiments/
// wgmma_rs_pattern_probe.cu, session 24: 1875 against 1405 cycles at N = 80).
__device__ __forceinline__ size_t image_offset(int tile, int start, int K) {
  return (static_cast<size_t>(start) + 15 * static_cast<size_t>(tile)) * K * 2;
}
__device__ __forceinline__ uint32_t image_piece(int N, int n, int piece) {  // pair n, inputs 8 piece .. + 7 of a chunk
  return (piece >> 1) * 32 * N + (n >> 3) * 256 + (piece & 1) * 128 + (n & 7) * 16;
}

// Gate/up's activation images ([*, Kp] with Kp = the slot's padded hidden) from x (bf16 rows of K = hidden by
// token; inputs from K on are zeros): grid (tile rows, kGatherParts), part p of tile i copies its chunks p,
// p + kGatherParts, ...
constexpr int kGatherParts = 4;
__global__ void __launch_bounds__(256) gather_kernel(const uint16_t* __restrict__ x16, const int32_t* __restrict__ sorted,
                                                     const int4* __restrict__ tiles, const int32_t* __restrict__ num_tiles,
                                                     int k, int K, int Kp, uint8_t* __restrict__ x_image) {
  __shared__ int tok[kWidePairs];
  const int i = blockIdx.x;
  if (i >= *num_tiles) return;
  const int4 tile = tiles[i];
  const int start = tile.y, count = tile.z, N = (count + 15) / 16 * 16;
  for (int n = threadIdx.x; n < count; n += blockDim.x) tok[n] = sorted[start + n] / k;
  __syncthreads();
  uint8_t* image = x_image + image_offset(i, start, Kp);
  for (int c = blockIdx.y; c < Kp / 64; c += kGatherParts) {
    for (int e = threadIdx.x; e < N * 8; e += blockDim.x) {
      const int n = e >> 3, piece = e & 7;
      uint4 v = make_uint4(0, 0, 0, 0);
      if (n < count && c * 64 + piece * 8 < K) v = *reinterpret_cast<const uint4*>(x16 + static_cast<size_t>(tok[n]) * K + c * 64 + piece * 8);
      *reinterpret_cast<uint4*>(image + static_cast<size_t>(c) * N * 128 + image_piece(N, n, piece)) = v;
    }
  }
}

// The block's weights per chunk: kMaps tensor copies of codes and kMaps of scales (tensor_map.h), each a box of
// kStrips / kMaps strips from strip `strip0` of its projection (gate/up: the gate and the up maps, 8 strips each;
// down: one map, 16 strips).
struct StripMaps {
  CUtensorMap codes[2], scales[2];
};

// The consumer warpgroups' barrier (the producer warpgroup has left by then).
__device__ __forceinline__ void consumer_sync() {
  asm volatile("bar.sync 1, %0;\n" ::"n"(kConsumerThreads) : "memory");
}

// One GEMM launch's work: items w = i * row_blocks + row block over the plan's tiles by width (by_width[i]; a
// tile's row blocks are consecutive items, run side by side on neighbouring blocks, sharing its activation image
// in L2); block b takes items b, b + G, b + 2G, ... (G blocks), so its items come in ascending width. Per item a k
// loop over `chunks` 64-input supertiles, acc0 / acc1 (N / 2 floats each, wgmma layout) += this warp's strips
// entry0 / entry1 (its places among the block's 16) . X^T, X chunk c the item's image chunk, then
// epilogue.operator()<N>(n, tile, t, row block, begin(t), acc0, acc1) (n: the block's item count so far, t.w the
// tile's index). Thread 256 (the producer warpgroup's first) fills each stage by one bulk copy of the activations
// and the weights' tensor copies, all completing on the stage's full barrier, as soon as the stage's empty barrier
// says every consumer warp is done with its previous chunk, across items: no block barrier per chunk, the feed
// off the consumers' path, and the next item's first chunks loaded during this item's tail and epilogue (session
// 24's persistent form, thread 0 feeding between two block barriers, lost 10%: session 25). Up to three k16
// groups stay in flight while the next fragments are decoded (wgmma_wait<3>; their A registers stay live. One
// group: pp 4096 -0.8%, two: -0.3%, session 22); so after step 2 of chunk st every group of chunk st - 1 is
// complete, and each consumer warp releases that chunk's stage there (an item's last chunk after its
// wgmma_wait<0>). begin(t) runs in the consumers as the item is reached; loads issued there land during its k loop.
template <int kPairs, int kMaps, bool kScratch, typename Begin, typename Epilogue>
__device__ __forceinline__ void run_items(uint8_t* smem, uint64_t* full, uint64_t* empty, const StripMaps& maps,
                                          const int4* by_width, int num_items, int row_blocks, int chunks,
                                          const uint8_t* images, int image_k, int entry0, int entry1, Begin& begin,
                                          Epilogue& epilogue) {
  using R = Ring<kPairs, kScratch>;
  constexpr int kBox = kStrips / kMaps;
  const int lane = threadIdx.x & 31, g = lane >> 2;
  if (threadIdx.x == 0) {
    if (smem_addr(smem) % 128 != 0) __trap();  // tensor copies need 128-byte aligned destinations
    for (int s = 0; s < R::kCount; ++s) {
      mbarrier_init(&full[s], 1);
      mbarrier_init(&empty[s], kConsumerWarps);
    }
  }
  __syncthreads();
  auto tile_of = [&](int item) { return item < num_items ? by_width[item / row_blocks] : make_int4(0, 0, 0, 0); };
  if (threadIdx.x >= kConsumerThreads) {
    setmaxnreg_dec<kProducerRegs<kPairs>>();
    if (threadIdx.x == kConsumerThreads) {
      for (int item = blockIdx.x, s = 0, round = 0; item < num_items; item += gridDim.x) {
        const int4 t = tile_of(item);
        const int row_block = item % row_blocks;
        const uint32_t x_bytes = (t.z + 15) / 16 * 16 * 128;
        const uint8_t* image = images + image_offset(t.w, t.y, image_k);
        for (int chunk = 0; chunk < chunks; ++chunk) {
          if (round > 0) mbarrier_wait(&empty[s], (round - 1) & 1);
          uint8_t* stage = smem + s * kStageBytes<kPairs>;
          mbarrier_arrive_expect_tx(&full[s], x_bytes + kWStageBytes);
          bulk_copy_to_shared(stage, image + static_cast<size_t>(chunk) * x_bytes, x_bytes, &full[s]);
          uint8_t* w_stage = stage + kPairs * 128;
#pragma unroll
          for (int m = 0; m < kMaps; ++m) {
            tensor_copy_4d(w_stage + m * kBox * 512, &maps.codes[m], 0, chunk, row_block * kBox, t.x, &full[s]);
            tensor_copy_4d(w_stage + kStrips * 512 + m * kBox * 64, &maps.scales[m], 0, chunk, row_block * kBox, t.x,
                           &full[s]);
          }
          if (++s == R::kCount) {
            s = 0;
            ++round;
          }
        }
      }
    }
    return;
  }
  setmaxnreg_inc<kConsumerRegs<kPairs>>();
  const uint32_t smem_base = smem_addr(smem);
  int item = blockIdx.x, s = 0, round = 0, n = 0;
  int4 next = tile_of(item);  // loaded one item ahead
  auto items_of_width = [&]<int NJ>() {
    constexpr int N = 16 * NJ;
    while (item < num_items && (next.z + 15) / 16 == NJ) {
      const int4 t = next;
      const int row_block = item % row_blocks;
      item += gridDim.x;
      next = tile_of(item);
      const auto state = begin(t);
      float acc0[N / 2], acc1[N / 2];
#pragma unroll
      for (int i = 0; i < N / 2; ++i) acc0[i] = acc1[i] = 0.0f;
      int prev = 0;
      for (int st = 0; st < chunks; ++st) {
        mbarrier_wait(&full[s], round & 1);
        const uint8_t* w_stage = smem + s * kStageBytes<kPairs> + kPairs * 128;
        const uint4 c0 = *reinterpret_cast<const uint4*>(w_stage + entry0 * 512 + lane * 16);
        const uint4 c1 = *reinterpret_cast<const uint4*>(w_stage + entry1 * 512 + lane * 16);
        const uint2* sc = reinterpret_cast<const uint2*>(w_stage + kStrips * 512);  // [strip][g]: rows g, g + 8
        const uint2 s0 = sc[entry0 * 8 + g], s1 = sc[entry1 * 8 + g];
        const uint32_t w0[4] = {c0.x, c0.y, c0.z, c0.w}, w1[4] = {c1.x, c1.y, c1.z, c1.w};
        const uint32_t x_stage = smem_base + s * kStageBytes<kPairs>;
        auto step = [&]<int kQ>() {
          uint32_t a0[4], a1[4];
          nvfp4_fragment<kQ>(w0[kQ], s0, a0);
          nvfp4_fragment<kQ>(w1[kQ], s1, a1);
          wgmma::wgmma_fence();
          const uint64_t desc = kmajor_descriptor(x_stage + kQ * 32 * N);
          wgmma::wgmma_rs<N>(acc0, a0, desc);
          wgmma::wgmma_rs<N>(acc1, a1, desc);
          wgmma::wgmma_commit();
          wgmma::wgmma_wait<3>();
        };
        step.template operator()<0>();
        step.template operator()<1>();
        step.template operator()<2>();
        mbarrier_arrive_if(st > 0 && lane == 0, &empty[prev]);
        step.template operator()<3>();
        prev = s;
        if (++s == R::kCount) {
          s = 0;
          ++round;
        }
      }
      wgmma::wgmma_wait<0>();
      mbarrier_arrive_if(lane == 0, &empty[prev]);
      epilogue.template operator()<N>(n, t, row_block, state, acc0, acc1);
      ++n;
    }
  };
  for_each_pair_group<kPairs>(items_of_width);
}

// The blocks of a launch: as many as the SMs hold (kBlocksPerSm each), fewer when the shape's item bound is lower
// (blocks past the plan's items exit at once).
template <int kPairs>
unsigned item_blocks(int64_t max_items) {
  return static_cast<unsigned>(std::min<int64_t>(max_items, int64_t{sm_count()} * kBlocksPerSm<kPairs>));
}

// Gate/up (items: 128 intermediate rows of one tile; warpgroup wg holds rows 64 wg .. 64 wg + 63 of gate and up):
// SwiGLU into down's activation image (act: tile images of [*, padded_intermediate] bf16, one chunk per
// warpgroup and item). Each warpgroup writes its chunk into its own scratch after the ring, already in the image's
// layout, and one thread of it stores the chunk by one bulk copy, so the copy-out runs beside the next item's k
// loop (128 threads' 16-byte loads and stores from a [pair][row] scratch took their place in every epilogue).
// The padding pairs come out as zeros: their activations are zeros (gather_kernel).
template <int kPairs>
__global__ void __launch_bounds__(kThreads, kBlocksPerSm<kPairs>)
    moe_gate_up_kernel(const __grid_constant__ StripMaps maps, const model::SlotScales* __restrict__ scales,
                       model::ExpertSlotLayout layout, const uint8_t* __restrict__ x_image,
                       const int4* __restrict__ by_width, const int32_t* __restrict__ num_tiles, uint8_t* __restrict__ act) {
  extern __shared__ __align__(128) uint8_t smem[];
  __shared__ uint64_t full[kMaxStages], empty[kMaxStages];
  const int Ipad = layout.padded_intermediate, row_blocks = (layout.gate.rows / 16 + 7) / 8;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, wg = warp >> 2, w = warp & 3, g = lane >> 2, c = lane & 3;
  const bool storer = (tid & 127) == 0;  // the warpgroup's thread that issues its bulk stores
  uint8_t* scr = smem + Ring<kPairs, true>::kCount * kStageBytes<kPairs> + wg * kScratchBytes<kPairs> / 2;
  // The slot's scales, loaded as the item starts (after the k loop's barrier waits the compiler may not move a
  // load across, a load in the epilogue would hold it for a round trip).
  auto begin = [&](int4 t) { return scales[t.x]; };
  const int num_items = *num_tiles * row_blocks;
  const int block_items = (num_items - static_cast<int>(blockIdx.x) + static_cast<int>(gridDim.x) - 1) / static_cast<int>(gridDim.x);
  auto epilogue = [&]<int N>(int n, int4 t, int row_block, model::SlotScales s, const float (&accg)[N / 2], const float (&accu)[N / 2]) {
    const float fg = s.gate * kScaleFold, fu = s.up * kScaleFold;
    const int chunk = row_block * 2 + wg;
    // The warpgroup's own scratch and named barrier: its previous store has read the scratch before the writes,
    // and every write is visible to the bulk copy (fence, barrier) before the store.
    if (storer) bulk_wait_read<0>();
    asm volatile("bar.sync %0, 128;\n" ::"r"(2 + wg) : "memory");
    // Pair 8 j + 2 c + (e & 1), row 16 w + g + 8 (e >> 1) at image_piece(N, pair, row / 8) + (row % 8) * 2: a
    // per-thread base plus constants.
    uint8_t* base = scr + w * 32 * N + c * 32 + g * 2;
#pragma unroll
    for (int j = 0; j < N / 8; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float gate = accg[4 * j + e] * fg, up = accu[4 * j + e] * fu;
        // The fast division (~2 ulp; 0 for gate < ~-87, SiLU's limit): IEEE division here cost pp 4096 ~1.5%.
        *reinterpret_cast<uint16_t*>(base + j * 256 + (e >> 1) * 128 + (e & 1) * 16) =
            bf16_bits(__fdividef(gate, 1.0f + __expf(-gate)) * up);
      }
    }
    fence_proxy_async();
    asm volatile("bar.sync %0, 128;\n" ::"r"(2 + wg) : "memory");
    if (storer && chunk * 64 < Ipad) {
      bulk_copy_to_global(act + image_offset(t.w, t.y, Ipad) + static_cast<size_t>(chunk) * N * 128, scr, N * 128);
      bulk_commit_group();
    }
    if (storer && n == block_items - 1) bulk_wait<0>();  // the block's last store has read its scratch before it exits
  };
  run_items<kPairs, 2, true>(smem, full, empty, maps, by_width, num_items, row_blocks, layout.gate.supertiles(), x_image,
                             layout.gate.cols, wg * 4 + w, 8 + wg * 4 + w, begin, epilogue);
}

// Down (items: 256 output rows of one tile; warpgroup wg: rows 128 wg .. 128 wg + 127 as two 64-row blocks): the
// weighted fp32 partial of each pair, stored from the accumulators (lanes g = 0..7 of a quad column write 32
// contiguous bytes), partial [pairs in bucket order, hidden]. The route weights of an item are loaded at its start
// (one load per pair from sorted_w, landing during the k loop) and shared through route_w[n % 2] in the epilogue:
// loaded in the epilogue (two dependent loads per pair) they made session 24's persistent down wait (long
// scoreboard 48% of its stalls, session 25).
template <int kPairs>
__global__ void __launch_bounds__(kThreads, kBlocksPerSm<kPairs>)
    moe_down_kernel(const __grid_constant__ StripMaps maps, const model::SlotScales* __restrict__ scales,
                    model::ExpertSlotLayout layout, const uint8_t* __restrict__ act, const float* __restrict__ sorted_w,
                    const int4* __restrict__ by_width, const int32_t* __restrict__ num_tiles, float* __restrict__ partial) {
  extern __shared__ __align__(128) uint8_t smem[];
  __shared__ uint64_t full[kMaxStages], empty[kMaxStages];
  __shared__ float route_w[2][kPairs];
  const int H = layout.hidden, row_blocks = (layout.down.rows / 16 + 15) / 16;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, wg = warp >> 2, w = warp & 3, g = lane >> 2, c = lane & 3;
  // Pair tid's route weight and the slot's down scale, loaded as the item starts.
  auto begin = [&](int4 t) { return make_float2(tid < kPairs && tid < t.z ? sorted_w[t.y + tid] : 0.0f, scales[t.x].down); };
  auto epilogue = [&]<int N>(int n, int4 t, int row_block, float2 w_down, const float (&acc0)[N / 2], const float (&acc1)[N / 2]) {
    float* rw_of = route_w[n & 1];
    if (tid < kPairs) rw_of[tid] = w_down.x * w_down.y * kScaleFold;
    // Every consumer's weight is written, and every consumer has read the buffer's previous item (two items ago).
    consumer_sync();
    const int row0 = row_block * 256 + wg * 128 + 16 * w + g;  // acc0's rows row0, row0 + 8; acc1's 64 further
#pragma unroll
    for (int j = 0; j < N / 8; ++j) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int pair = 8 * j + 2 * c + h;
        if (pair >= t.z) continue;
        const float rw = rw_of[pair];
        float* out = partial + static_cast<size_t>(t.y + pair) * H;
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          if (row0 + 8 * r < H) out[row0 + 8 * r] = acc0[4 * j + 2 * r + h] * rw;
          if (row0 + 64 + 8 * r < H) out[row0 + 64 + 8 * r] = acc1[4 * j + 2 * r + h] * rw;
        }
      }
    }
  };
  run_items<kPairs, 1, false>(smem, full, empty, maps, by_width, *num_tiles * row_blocks, row_blocks, layout.down.supertiles(), act,
                              layout.padded_intermediate, wg * 8 + w, wg * 8 + 4 + w, begin, epilogue);
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
  // Enough for every launch of up to `tokens`: the narrow tiles' padding can need more than the wide tiles' just
  // past the switch, so the largest narrow launch counts too.
  const int64_t narrow_tokens = std::min<int64_t>(tokens, int64_t{kNarrowMaxPairsPerSlot} * num_slots / std::max(k, 1));
  return std::max(make_plan(layout, tokens, k, num_slots).bytes, make_plan(layout, narrow_tokens, k, num_slots).bytes);
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
  int4* by_width = reinterpret_cast<int4*>(ws + plan.by_width);
  int32_t* num_tiles = reinterpret_cast<int32_t*>(ws + plan.num_tiles);
  int32_t* sorted = reinterpret_cast<int32_t*>(ws + plan.sorted);
  float* sorted_w = reinterpret_cast<float*>(ws + plan.sorted_w);
  int32_t* pos_of = reinterpret_cast<int32_t*>(ws + plan.pos_of);
  uint8_t* act = ws + plan.act;
  float* partial = reinterpret_cast<float*>(ws + plan.partial);
  uint8_t* x_image = ws + plan.partial;
  const int pairs = static_cast<int>(pairs64);

  IMP_CUDA_CHECK(cudaMemsetAsync(counts, 0, static_cast<size_t>(num_slots) * 4, stream));
  count_kernel<<<(pairs + 255) / 256, 256, 0, stream>>>(slots, pairs, counts);
  IMP_CUDA_CHECK_LAUNCH();
  plan_kernel<<<1, kPlanThreads, 0, stream>>>(counts, num_slots, plan.narrow ? kNarrowPairs : kWidePairs, cursor, tiles,
                                              by_width, num_tiles);
  IMP_CUDA_CHECK_LAUNCH();
  scatter_kernel<<<(pairs + 255) / 256, 256, 0, stream>>>(slots, weights, pairs, cursor, sorted, sorted_w, pos_of);
  IMP_CUDA_CHECK_LAUNCH();
  // Grid rows: the shape's tile bound; rows past the plan's tile count exit at once.
  const unsigned grid_tiles = static_cast<unsigned>(plan.max_tiles);
  gather_kernel<<<dim3(grid_tiles, kGatherParts), 256, 0, stream>>>(x_bf16, sorted, tiles, num_tiles, k, layout.hidden,
                                                                     layout.gate.cols, x_image);
  IMP_CUDA_CHECK_LAUNCH();
  auto map = [&](const model::SlotProjection& projection, bool of_scales, int32_t box_strips) {
    return strip_tensor_map(pool, num_slots, layout.slot_bytes, projection, of_scales, box_strips);
  };
  const StripMaps gate_up_maps{{map(layout.gate, false, 8), map(layout.up, false, 8)},
                               {map(layout.gate, true, 8), map(layout.up, true, 8)}};
  const StripMaps down_maps{{map(layout.down, false, 16)}, {map(layout.down, true, 16)}};  // one map each (kMaps 1)

  auto run = [&]<int kPairs>() {
    static const bool smem_set = [] {  // dynamic shared memory beyond 48 KB, once per tile shape
      IMP_CUDA_CHECK(cudaFuncSetAttribute(moe_gate_up_kernel<kPairs>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes<kPairs>));
      IMP_CUDA_CHECK(cudaFuncSetAttribute(moe_down_kernel<kPairs>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes<kPairs>));
      return true;
    }();
    (void)smem_set;
    // Blocks for the shape's item bound (those past the plan's items exit at once), at most what the SMs hold.
    const unsigned gu_blocks = item_blocks<kPairs>(plan.max_tiles * ((layout.gate.rows / 16 + 7) / 8));
    const unsigned down_blocks = item_blocks<kPairs>(plan.max_tiles * ((layout.down.rows / 16 + 15) / 16));
    moe_gate_up_kernel<kPairs><<<gu_blocks, kThreads, kSmemBytes<kPairs>, stream>>>(gate_up_maps, scales, layout, x_image,
                                                                                    by_width, num_tiles, act);
    IMP_CUDA_CHECK_LAUNCH();
    moe_down_kernel<kPairs><<<down_blocks, kThreads, kSmemBytes<kPairs>, stream>>>(down_maps, scales, layout, act, sorted_w,
                                                                                   by_width, num_tiles, partial);
    IMP_CUDA_CHECK_LAUNCH();
  };
  if (plan.narrow) {
    run.template operator()<kNarrowPairs>();
  } else {
    run.template operator()<kWidePairs>();
  }
  combine_kernel<<<dim3((layout.hidden / 4 + 127) / 128, tokens), 128, 0, stream>>>(partial, pos_of, k, layout.hidden, y);
  IMP_CUDA_CHECK_LAUNCH();
}

}  // namespace imp::cuda
