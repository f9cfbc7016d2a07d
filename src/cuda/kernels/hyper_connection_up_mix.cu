// Prefill's hyper-connection up projection and mix in one kernel (launch_hc_up_mix, hyper_connection.h).
// As a cuBLAS GEMM (N = S * d = 10240 fp32 outputs per token) and the mix kernel reading them back, the pair
// took 101 + 101 us per read at 4096 tokens (97 reads per chunk, ~8% of it): the GEMM's 168 MB of m and the
// mix's read of them are most of those bytes. Here each block owns 64 columns j of x, i.e. the 4 x 64 rows
// s * d + j of the up weight, keeps them in shared memory for all its tokens, and applies sigmoid and the stream
// sum to the accumulators in registers: m never leaves the SM (at 4096 tokens 135 us per read; session 30).
#include <cuda_fp16.h>

#include <algorithm>

#include "cuda/check.h"
#include "cuda/launch.h"
#include "cuda/tensor_map.h"
#include "cuda/kernels/device_math.cuh"
#include "cuda/kernels/hyper_connection.h"
#include "cuda/kernels/prefill_common.cuh"
#include "cuda/kernels/wgmma_layout.cuh"
#include "cuda/kernels/wgmma_ops.cuh"

namespace imp::cuda {
namespace {

using namespace prefill;

constexpr int kStreams = 4;                // the released hc_count: a block's m tile is 4 x 64 = 256 columns
constexpr int kCols = 64;                  // x columns per block
constexpr int kN = kStreams * kCols;       // wgmma m64n256k16
constexpr int kTileRows = 64;              // tokens per consumer warpgroup tile
constexpr int kBox = 64;                   // k elements per tensor-copy box: one 128-byte swizzle row
constexpr int kBoxBytes = kTileRows * 128;  // an A box: [64 tokens][64 k]
constexpr int kBBoxBytes = kN * 128;         // one k box of B: [256 rows][64 k]
constexpr int kStages = 8;                 // A boxes in flight, one ring for both consumer warpgroups
constexpr int kMaxRank = 320;              // B (the up rows of the block's columns) stays resident: 32 KB per box
constexpr int kThreads = 384;              // two consumer warpgroups and a producer warpgroup
constexpr int kConsumerRegs = 232, kProducerRegs = 40;
static_assert(setmaxnreg_balances(launch_register_cap(kThreads, 1), 2, kConsumerRegs, 1, kProducerRegs),
              "two consumer warpgroups take at most what the producer warpgroup gives back");

__host__ __device__ constexpr int k_boxes(int rank) { return (rank + kBox - 1) / kBox; }
// The x column (of the block's 64) of B's row u within a stream: accumulator column 8 i + 2 c + e (i = 2 q + b)
// holds column 16 q + 4 c + 2 b + e, so that each thread's columns come in runs of four (8-byte loads of N's terms,
// 8- and 16-byte stores of x) instead of pairs.
__device__ __forceinline__ int b_row_column(int u) {
  const int q = u / 16, b = (u / 8) % 2, c = (u % 8) / 2, e = u % 2;
  return 16 * q + 4 * c + 2 * b + e;
}

size_t shared_bytes(int rank) {
  return static_cast<size_t>(k_boxes(rank)) * kBBoxBytes + kStages * kBoxBytes + 1024;  // + alignment
}

// Block b owns x columns [64 (b / per_slice), + 64) and the consumer tiles [first, last) of 64 tokens (its part b %
// per_slice of them); consumer warpgroup w takes tiles first + w, first + w + 2, ..., and the two take turns at the
// tensor cores (ping-pong: one's products run while the other's epilogue does). The producer warpgroup copies B
// once (before the PDL wait: weights), then its first thread fills one ring of A boxes in the order of the turns
// (per tile the hi boxes of the low terms, then the lo boxes, each against B's box of the same k; k past rank reads
// as zeros on both sides) and brings each tile's N terms into L2 for its epilogue as the tile starts.
// The epilogue: thread (warp, g, c) holds rows 16 warp + g (+ 8) and accumulator columns 8 i + 2 c (+ 1) of the
// 64 x 256 tile (wgmma_ops.cuh), i.e. x columns 16 q + 4 c + 2 b (+ 1) of stream i / 8 (i % 8 = 2 q + b,
// b_row_column): all S terms of its x values are its own. x = (1 / S) sum_s sigmoid(m_s) (N_hi + N_lo)_s in stream
// order, as hc_mix_kernel, with the sigmoid's exp and division in their fast forms (rel. error ~2^-21; the IEEE
// forms cost this kernel ~5% of a 4096-token chunk).
__global__ void __launch_bounds__(kThreads, 1)
    hc_up_mix_kernel(const __grid_constant__ CUtensorMap hi_map, const __grid_constant__ CUtensorMap lo_map,
                     const __grid_constant__ CUtensorMap n_hi_map, const __grid_constant__ CUtensorMap n_lo_map,
                     const uint16_t* up, int up_stride, const uint16_t* n_hi, const uint16_t* n_lo, int rows, int d,
                     int rank, int per_slice, float* x,
                     uint16_t* x_hi, uint16_t* x_lo, uint16_t* x16, float x16_scale) {
  extern __shared__ __align__(128) uint8_t smem[];
  uint8_t* b_tile = smem + (1024 - smem_addr(smem) % 1024) % 1024;  // [rank / 64][S][64 rows][128 bytes], swizzled
  const int kboxes = k_boxes(rank);
  uint8_t* ring = b_tile + kboxes * kBBoxBytes;                       // [kStages][kBoxBytes]
  __shared__ uint64_t b_full, full[kStages], empty[kStages];
  const int slice = blockIdx.x / per_slice, part = blockIdx.x % per_slice, j0 = slice * kCols;
  const int tiles = (rows + kTileRows - 1) / kTileRows;
  const int first = part * tiles / per_slice, last = (part + 1) * tiles / per_slice;
  const int tid = threadIdx.x;
  if (tid == 0) {
    mbarrier_init(&b_full, 128);  // the producer warpgroup's threads, once their copies of B have landed
    for (int s = 0; s < kStages; ++s) {
      mbarrier_init(&full[s], 1);   // the producer thread, announcing the box's bytes
      mbarrier_init(&empty[s], 4);  // the warps of the consumer warpgroup whose box it is
    }
  }
  __syncthreads();
  pdl_trigger();

  if (tid >= 256) {  // the producer warpgroup
    setmaxnreg_dec<kProducerRegs>();
    const int pt = tid - 256;
    // B by 16-byte copies into the 128-byte swizzle (chunk i of row n at chunk i ^ (n % 8)), rows in the order
    // b_row_column gives; chunks past rank zero-filled.
    for (int e = pt; e < kboxes * kN * 8; e += 128) {
      const int i = e % 8, n = (e / 8) % kN, kb = e / (8 * kN), k = kb * kBox + 8 * i;
      const uint16_t* src = up + (static_cast<size_t>(n / kCols) * d + j0 + b_row_column(n % kCols)) * up_stride + k;
      cp_async16(b_tile + kb * kBBoxBytes + n * 128 + 16 * (i ^ (n % 8)), k < rank ? src : up, k < rank);
    }
    cp_async_commit();
    cp_async_wait<0>();
    fence_proxy_async();  // the copies (generic proxy) before wgmma's reads (async proxy)
    mbarrier_arrive_if(true, &b_full);
    pdl_wait();  // the low terms and N are earlier kernels' outputs
    if (pt != 0) return;
    int stage = 0, round = 0;
    for (int t = first; t < last; ++t) {  // tiles alternate between the warpgroups: the order of the turns
      for (int s = 0; s < kStreams; ++s) {
        tensor_prefetch_2d(&n_hi_map, s * d + j0, t * kTileRows);
        tensor_prefetch_2d(&n_lo_map, s * d + j0, t * kTileRows);
      }
      for (int ks = 0; ks < 2 * kboxes; ++ks) {
        if (round > 0) mbarrier_wait(&empty[stage], (round - 1) & 1);
        mbarrier_arrive_expect_tx(&full[stage], kBoxBytes);
        tensor_copy_2d(ring + stage * kBoxBytes, ks < kboxes ? &hi_map : &lo_map, (ks % kboxes) * kBox, t * kTileRows,
                       &full[stage]);
        if (++stage == kStages) {
          stage = 0;
          ++round;
        }
      }
    }
    return;
  }

  setmaxnreg_inc<kConsumerRegs>();
  const int w = tid / 128, warp = (tid % 128) / 32, lane = tid % 32, g = lane >> 2, c = lane & 3;
  pdl_wait();
  mbarrier_wait(&b_full, 0);
  const uint32_t b_base = smem_addr(b_tile), ring_base = smem_addr(ring);
  const size_t width = static_cast<size_t>(kStreams) * d;
  // Ping-pong: the warpgroups take turns at the tensor cores, one's products running while the other's epilogue
  // does (named barriers 1 + w: warpgroup w's turn). WG 0's tile n follows WG 1's tile n - 1, WG 1's tile n
  // follows WG 0's tile n; a turn is handed over only to a warpgroup that has that tile.
  const int theirs = (last - first - (1 - w) + 1) / 2;  // the other warpgroup's tiles
  for (int n = 0, t = first + w; t < last; ++n, t += 2) {
    if (w == 1 || n > 0) asm volatile("bar.sync %0, 256;\n" ::"r"(1 + w) : "memory");
    const int box0 = (t - first) * 2 * kboxes;  // tile t's first box in the ring's order
    int stage = box0 % kStages, round = box0 / kStages;
    float acc[kN / 2];
#pragma unroll
    for (int i = 0; i < kN / 2; ++i) acc[i] = 0.0f;
    // One box's four k16 steps in flight while the next box is awaited; its stage is released once the next
    // box's products are issued (wgmma_wait<1>: all but the newest group done).
    int held = -1;
    for (int ks = 0; ks < 2 * kboxes; ++ks) {
      mbarrier_wait(&full[stage], round & 1);
      const uint32_t a_base = ring_base + stage * kBoxBytes;
      const uint32_t kb_base = b_base + (ks % kboxes) * kBBoxBytes;
      wgmma::wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < kBox / 16; ++kk) {
        wgmma::wgmma_ss<kN>(acc, swizzled_descriptor(a_base + kk * 32, 16), swizzled_descriptor(kb_base + kk * 32, 16));
      }
      wgmma::wgmma_commit();
      wgmma::wgmma_wait<1>();
      if (held >= 0) mbarrier_arrive_if(lane == 0, &empty[held]);
      held = stage;
      if (++stage == kStages) {
        stage = 0;
        ++round;
      }
    }
    wgmma::wgmma_wait<0>();
    mbarrier_arrive_if(lane == 0, &empty[held]);
    if (w == 0 ? n < theirs : n + 1 < theirs) asm volatile("bar.arrive %0, 256;\n" ::"r"(2 - w) : "memory");

    // Thread (g, c) holds x columns 16 q + 4 c .. + 3 of rows g, g + 8 (b_row_column): per stream, one 8-byte load
    // of each of N's terms per (row, q), all issued before use.
    const int row0 = t * kTileRows + 16 * warp + g;
    float sum[2][4][4];  // [row g, g + 8][q][4 columns]
#pragma unroll
    for (int h = 0; h < 2; ++h) {
#pragma unroll
      for (int q = 0; q < 4; ++q) sum[h][q][0] = sum[h][q][1] = sum[h][q][2] = sum[h][q][3] = 0.0f;
    }
#pragma unroll
    for (int s = 0; s < kStreams; ++s) {
      uint2 hv[2][4], lv[2][4];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = row0 + 8 * h;
        const size_t at = static_cast<size_t>(row < rows ? row : 0) * width + static_cast<size_t>(s) * d + j0 + 4 * c;
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          hv[h][q] = *reinterpret_cast<const uint2*>(n_hi + at + 16 * q);
          lv[h][q] = *reinterpret_cast<const uint2*>(n_lo + at + 16 * q);
        }
      }
#pragma unroll
      for (int h = 0; h < 2; ++h) {
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          const uint32_t hw[2] = {hv[h][q].x, hv[h][q].y}, lw[2] = {lv[h][q].x, lv[h][q].y};
#pragma unroll
          for (int b = 0; b < 2; ++b) {
            const float* m = acc + 4 * (8 * s + 2 * q + b) + 2 * h;  // accumulator block 8 s + 2 q + b
            sum[h][q][2 * b] += fast_sigmoidf(m[0]) * (bf16_bits_to_float(hw[b] & 0xffffu) + bf16_bits_to_float(lw[b] & 0xffffu));
            sum[h][q][2 * b + 1] += fast_sigmoidf(m[1]) * (bf16_bits_to_float(hw[b] >> 16) + bf16_bits_to_float(lw[b] >> 16));
          }
        }
      }
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = row0 + 8 * h;
      if (row >= rows) continue;
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        float v[4];
        uint16_t hi[4], lo[4];
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          v[e] = sum[h][q][e] * (1.0f / kStreams);
          hi[e] = bf16_bits(v[e]);
          lo[e] = bf16_bits(v[e] - bf16_bits_to_float(hi[e]));
        }
        const size_t at = static_cast<size_t>(row) * d + j0 + 16 * q + 4 * c;
        if (x != nullptr) *reinterpret_cast<float4*>(x + at) = make_float4(v[0], v[1], v[2], v[3]);
        const uint2 hw = make_uint2(hi[0] | static_cast<uint32_t>(hi[1]) << 16, hi[2] | static_cast<uint32_t>(hi[3]) << 16);
        const uint2 lw = make_uint2(lo[0] | static_cast<uint32_t>(lo[1]) << 16, lo[2] | static_cast<uint32_t>(lo[3]) << 16);
        *reinterpret_cast<uint2*>(x_hi + at) = hw;
        *reinterpret_cast<uint2*>(x_lo + at) = lw;
        if (x16 != nullptr) {  // from the terms, as launch_f16_terms
          const __half2 h[2] = {f16x2_from_terms(hw.x, lw.x, x16_scale), f16x2_from_terms(hw.y, lw.y, x16_scale)};
          *reinterpret_cast<uint2*>(x16 + at) = *reinterpret_cast<const uint2*>(h);
        }
      }
    }
  }
}

}  // namespace

bool hc_up_mix_fits(int32_t streams, int32_t d, int32_t rank) {
  return streams == kStreams && d % kCols == 0 && rank % 8 == 0 && rank > 0 && rank <= kMaxRank;
}

SplitActivations launch_hc_up_mix(const uint16_t* low_terms, const uint16_t* up, int32_t up_stride, int32_t rank,
                                  const SplitActivations& normed, int32_t streams, int32_t d, float* x,
                                  float* x_scratch, cudaStream_t stream, uint16_t* x16, float x16_scale) {
  if (!hc_up_mix_fits(streams, d, rank)) {
    throw_invalid_launch("hc_up_mix: needs 4 streams, d % 64 == 0 and rank a multiple of 8 up to 320");
  }
  if (normed.k != streams * d) throw_invalid_launch("hc_up_mix: the normed terms are not S * d wide");
  if (up_stride < rank || up_stride % 8 != 0) throw_invalid_launch("hc_up_mix: up_stride must be >= rank, a multiple of 8");
  const int32_t rows = normed.rows;
  auto* x_hi = reinterpret_cast<uint16_t*>(x_scratch);
  uint16_t* x_lo = x_hi + static_cast<size_t>(rows) * d;
  SplitActivations terms{x_hi, x_lo, rows, d};
  if (x16 != nullptr) {
    terms.x16 = x16;
    terms.x16_scale = x16_scale;
  }
  if (rows == 0) return terms;
  if (reinterpret_cast<uintptr_t>(x) % 16 != 0 || reinterpret_cast<uintptr_t>(x_scratch) % 8 != 0 ||
      reinterpret_cast<uintptr_t>(up) % 16 != 0 || reinterpret_cast<uintptr_t>(x16) % 8 != 0) {
    throw_invalid_launch("hc_up_mix: x and up must be 16-byte aligned, x_scratch and x16 8-byte");
  }
  const size_t bytes = shared_bytes(rank);
  static const bool ready = [] {
    raise_shared_limit_outside_capture(hc_up_mix_kernel, shared_bytes(kMaxRank));
    return true;
  }();
  (void)ready;
  const uint32_t width = static_cast<uint32_t>(streams * d);
  // The low terms' hi and lo halves as two tensors of rank columns (rows 2 rank apart): boxes of 64 columns read
  // zeros past rank.
  const CUtensorMap hi_map = bf16_rows_tensor_map(low_terms, rows, rank, 2 * rank, kTileRows, "hyper-connection low terms");
  const CUtensorMap lo_map =
      bf16_rows_tensor_map(low_terms + rank, rows, rank, 2 * rank, kTileRows, "hyper-connection low terms");
  const CUtensorMap n_hi_map = bf16_rows_tensor_map(normed.hi, rows, width, width, kTileRows, "normed streams");
  const CUtensorMap n_lo_map = bf16_rows_tensor_map(normed.lo, rows, width, width, kTileRows, "normed streams");
  // Blocks per 64-column slice: as many as the SMs allow (40 slices at d = 2560: 3 each, 120 blocks), at most one
  // per tile of 64 tokens.
  const int slices = d / kCols, tiles = (rows + kTileRows - 1) / kTileRows;
  const int per_slice = std::max(1, std::min(sm_count() / slices, tiles));
  launch_kernel(hc_up_mix_kernel, slices * per_slice, kThreads, bytes, stream, 1, hi_map, lo_map, n_hi_map, n_lo_map,
                up, up_stride, normed.hi, normed.lo, rows, d, rank, per_slice, x, x_hi, x_lo, x16, x16_scale);
  return terms;
}

}  // namespace imp::cuda
