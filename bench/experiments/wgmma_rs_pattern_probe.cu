// What sets the MoE prefill GEMM's time (docs/cuda_engine.md, Next steps 2)? Session 24's L2 probe says not its
// weights' DRAM reads; session 23 ruled out its MMA count, its warps per scheduler and its copy placement. This
// probe runs the k loop's compute pattern alone, on data that never changes in shared memory (no global memory,
// no cp.async), one block of two warpgroups per SM as in moe_gate_up_kernel, and adds its parts one at a time:
//   mode 0: per k16 step two RS wgmmas (m64nNk16, one per strip of the warp) on fixed A registers, with the
//           kernel's fence, commit and wait<3>;
//   mode 1: + A decoded each step from a code word (E2M1 by rotations and masks, times the E4M3 block scale, as
//           nvfp4_fragment), the words in registers;
//   mode 2: + the words and scales read from shared memory once per 64-input chunk and a block barrier per chunk;
//   mode 3: + the chunk's stage cycling over six (the B descriptors and the words' addresses change per chunk);
//   mode 4: the other design: the weights decoded to bf16 into shared memory (256 rows x 64 inputs per chunk,
//           double-buffered: chunk st + 1 is decoded while chunk st's wgmmas run), then SS wgmmas with the 256
//           weight rows as N (m64n256k16, the pairs as M: each warpgroup 64 pairs).
// Modes 0-3 wait for all but the last kWait wgmma groups after each step (the kernel: 3).
// Useful MACs are counted as the real kernel does its work: modes 0-3 N pairs x 256 rows x 64 inputs per chunk
// and block; mode 4 128 pairs x 256 rows x 64. Prints TFLOP/s and SM cycles per chunk and block (the real kernel
// at pp 4096: N = 80, ~2250 cycles per chunk, session 23's timeline).
// Build: nvcc -O3 -std=c++20 -Isrc -gencode=arch=compute_90a,code=sm_90a bench/experiments/wgmma_rs_pattern_probe.cu -o build/exp/wgmma_rs_pattern_probe
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_bf16.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "cuda/kernels/prefill_common.cuh"
#include "cuda/kernels/wgmma_ops.cuh"

using namespace imp::cuda;
using namespace imp::cuda::prefill;
using namespace imp::cuda::wgmma;

#define CK(x)                                                                 \
  do {                                                                        \
    cudaError_t e = (x);                                                      \
    if (e != cudaSuccess) {                                                   \
      std::printf("cuda: %s at line %d\n", cudaGetErrorString(e), __LINE__); \
      std::exit(2);                                                           \
    }                                                                         \
  } while (0)

constexpr int kThreads = 256, kStrips = 16, kWStage = kStrips * 576, kStages = 6;

__device__ __forceinline__ uint64_t kmajor_desc(uint32_t smem_byte_address) {
  return ((smem_byte_address >> 4) & 0x3fff) | (uint64_t{128 >> 4} << 16) | (uint64_t{256 >> 4} << 32);
}

template <int kQ>
__device__ __forceinline__ void fragment(uint32_t word, uint2 scale_words, uint32_t (&a)[4]) {
  decode_e2m1x8(word, a);
  const float2 f = e4m3x2_to_float2<kQ % 2>(kQ < 2 ? scale_words.x : scale_words.y);
  const uint32_t s0 = pack_bf16x2(f.x * 0x1p118f, f.x * 0x1p118f), s1 = pack_bf16x2(f.y * 0x1p118f, f.y * 0x1p118f);
  a[0] = bf16x2_mul(a[0], s0);
  a[2] = bf16x2_mul(a[2], s0);
  a[1] = bf16x2_mul(a[1], s1);
  a[3] = bf16x2_mul(a[3], s1);
}

__device__ void fill(uint8_t* smem, int bytes) {
  for (int e = threadIdx.x; e < bytes / 4; e += blockDim.x) {
    reinterpret_cast<uint32_t*>(smem)[e] = (e & 1) ? 0x3c003c00u : 0x2a3b4c5du ^ static_cast<uint32_t>(e * 2654435761u);
  }
  fence_proxy_async_shared();
  __syncthreads();
}

template <int N, int kMode, int kWait>
__global__ void __launch_bounds__(kThreads, 1) rs_kernel(int chunks, float* sink) {
  extern __shared__ __align__(128) uint8_t smem[];
  constexpr int kX = N * 128, kStage = kX + kWStage;
  fill(smem, kStages * kStage);
  const int lane = threadIdx.x & 31, g = lane >> 2, warp = threadIdx.x >> 5, wg = warp >> 2, w = warp & 3;
  const int entry0 = wg * 4 + w, entry1 = 8 + wg * 4 + w;
  const uint32_t base = smem_addr(smem);
  float acc0[N / 2], acc1[N / 2];
#pragma unroll
  for (int i = 0; i < N / 2; ++i) acc0[i] = acc1[i] = 0.0f;
  const uint32_t fixed[4] = {0x3c003c00u, 0x3c013c01u, 0x3c023c02u, 0x3c033c03u};
  for (int st = 0; st < chunks; ++st) {
    const int stage = kMode >= 3 ? st % kStages : 0;
    uint32_t w0[4], w1[4];
    uint2 s0, s1;
    if constexpr (kMode >= 2) {
      __syncthreads();
      const uint8_t* ws = smem + stage * kStage + kX;
      const uint4 c0 = *reinterpret_cast<const uint4*>(ws + entry0 * 512 + lane * 16);
      const uint4 c1 = *reinterpret_cast<const uint4*>(ws + entry1 * 512 + lane * 16);
      const uint2* sc = reinterpret_cast<const uint2*>(ws + kStrips * 512);
      s0 = sc[entry0 * 8 + g];
      s1 = sc[entry1 * 8 + g];
      w0[0] = c0.x; w0[1] = c0.y; w0[2] = c0.z; w0[3] = c0.w;
      w1[0] = c1.x; w1[1] = c1.y; w1[2] = c1.z; w1[3] = c1.w;
    } else {
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        w0[q] = 0x12345678u * (q + 1) ^ static_cast<uint32_t>(st);
        w1[q] = 0x9abcdef1u * (q + 1) ^ static_cast<uint32_t>(st);
      }
      s0 = make_uint2(0x38383838u ^ (st & 1), 0x30303030u);
      s1 = make_uint2(0x34343434u, 0x3a3a3a3au ^ (st & 1));
    }
    const uint32_t x_stage = base + stage * kStage;
    auto step = [&]<int kQ>() {
      uint32_t a0[4], a1[4];
      if constexpr (kMode == 0) {
#pragma unroll
        for (int i = 0; i < 4; ++i) a0[i] = a1[i] = fixed[i];
      } else {
        fragment<kQ>(w0[kQ], s0, a0);
        fragment<kQ>(w1[kQ], s1, a1);
      }
      wgmma_fence();
      const uint64_t desc = kmajor_desc(x_stage + kQ * 32 * N);
      wgmma_rs<N>(acc0, a0, desc);
      wgmma_rs<N>(acc1, a1, desc);
      wgmma_commit();
      wgmma_wait<kWait>();
    };
    step.template operator()<0>();
    step.template operator()<1>();
    step.template operator()<2>();
    step.template operator()<3>();
  }
  wgmma_wait<0>();
  float s = 0.0f;
#pragma unroll
  for (int i = 0; i < N / 2; ++i) s += acc0[i] + acc1[i];
  if (s == 12345.0f) *sink = s;
}

// Mode 4: weights decoded into shared memory as B (256 rows x 64 inputs of bf16 per chunk, two buffers), the
// activations (128 pairs x 64 inputs, fixed) as A; warpgroup wg takes pairs 64 wg .. 64 wg + 63.
constexpr int kSsRows = 256, kSsPairs = 128, kSsB = kSsRows * 64 * 2, kSsA = kSsPairs * 64 * 2;
constexpr int kSsSmem = 2 * kSsB + kSsA + kWStage * 2;
__global__ void __launch_bounds__(kThreads, 1) ss_decode_kernel(int chunks, float* sink) {
  extern __shared__ __align__(128) uint8_t smem[];
  fill(smem, kSsSmem);
  const int wg = threadIdx.x >> 7;
  const uint32_t base = smem_addr(smem);
  uint8_t* codes = smem + 2 * kSsB + kSsA;  // two stages of codes and scales (8 KB + 1 KB each)
  float acc[kSsRows / 2];
#pragma unroll
  for (int i = 0; i < kSsRows / 2; ++i) acc[i] = 0.0f;
  // 256 rows x 64 inputs = 2048 code words per chunk: 8 per thread, each to 16 bytes (8 inputs of one row) of B.
  auto decode = [&](int st) {
    const int buf = st & 1;
    const uint32_t* cw = reinterpret_cast<const uint32_t*>(codes + buf * kWStage);
    const uint2* sc = reinterpret_cast<const uint2*>(codes + buf * kWStage + kStrips * 512);
    uint8_t* b = smem + buf * kSsB;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const int word = threadIdx.x + kThreads * i;  // row = word / 8, inputs 8 (word % 8) ..
      const int row = word >> 3, k8 = word & 7;
      uint32_t a[4];
      const uint2 s = sc[(word >> 4) & 127];
      if (i % 2 == 0) fragment<0>(cw[word] ^ static_cast<uint32_t>(st), s, a); else fragment<3>(cw[word] ^ static_cast<uint32_t>(st), s, a);
      const uint32_t at = (k8 >> 1) * kSsRows * 32 + (row >> 3) * 256 + (k8 & 1) * 128 + (row & 7) * 16;
      *reinterpret_cast<uint4*>(b + at) = make_uint4(a[0], a[1], a[2], a[3]);
    }
    fence_proxy_async_shared();
  };
  decode(0);
  __syncthreads();
  for (int st = 0; st < chunks; ++st) {
    const int buf = st & 1;
    wgmma_fence();
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const uint64_t da = kmajor_desc(base + 2 * kSsB + q * kSsPairs * 32 + wg * 64 / 8 * 256);
      const uint64_t db = kmajor_desc(base + buf * kSsB + q * kSsRows * 32);
      wgmma_ss<kSsRows>(acc, da, db);
    }
    wgmma_commit();
    if (st + 1 < chunks) decode(st + 1);  // into the other buffer, while this chunk's wgmmas run
    wgmma_wait<0>();
    __syncthreads();  // both warpgroups done with buffer st & 1, the next chunk's B written
  }
  wgmma_wait<0>();
  float s = 0.0f;
#pragma unroll
  for (int i = 0; i < kSsRows / 2; ++i) s += acc[i];
  if (s == 12345.0f) *sink = s;
}

// Modes 5-7: mode 3's compute on real copies, one block per SM, tiles of 40 chunks (K = 2560) with the kernel's
// pipeline: stages of 64 inputs in the kernel's 150 KB, refilled kAhead = stages - 2 chunks ahead after the block
// barrier, a fill at each tile's start and a drain at its end (no epilogue). Each block reads its own weights (16
// strips x 40 chunks) and N token rows of a [4096, 2560] bf16 x.
//   mode 5 (kCopy 0): every thread's cp.async, as moe_gate_up_kernel: strip-major weights (512 code and 64 scale
//           bytes per strip and chunk), x rows gathered by token into the core-matrix layout;
//   mode 6 (kCopy 1): one thread's two bulk copies per chunk on the stage's mbarrier, from images laid out as a
//           stage (9216 weight bytes, then N x 128 x bytes, contiguous per chunk);
//   mode 7 (kCopy 2): the weights as 32 bulk copies of 512 and 64 bytes (warp 0's lanes, as session 8 tried),
//           the x image as one;
//   mode 8 (kCopy 3): the weight image by one bulk copy, x by cp.async;
//   mode 9 (kCopy 4): the weights from the strip-major layout by four tensor copies (TMA: gate and up codes, gate
//           and up scales, each a box of 8 strips of one chunk), the x image by one bulk copy;
//   mode 10 (kCopy 5): the weights by the four tensor copies, x by cp.async.
constexpr int kChunks = 40, kK = kChunks * 64, kTokens = 4096, kCopySmem = 6 * (128 * 128 + kWStage);
constexpr size_t kBlockCodes = size_t{kStrips} * kChunks * 512, kBlockW = kBlockCodes + size_t{kStrips} * kChunks * 64;

__device__ __forceinline__ void tensor_copy_4d(void* dst, const CUtensorMap& map, int c0, int c1, int c2, int c3, uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5}], [%6];\n" ::"r"(
          shared_address(dst)),
      "l"(reinterpret_cast<uint64_t>(&map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(shared_address(bar))
      : "memory");
}

template <int N, int kCopy>
__global__ void __launch_bounds__(kThreads, 1)
    copy_kernel(int tiles, const uint8_t* __restrict__ wsrc, const uint16_t* __restrict__ x16,
                const int* __restrict__ tok, const uint8_t* __restrict__ wimg, const uint8_t* __restrict__ ximg, float* sink,
                const __grid_constant__ CUtensorMap codes_map, const __grid_constant__ CUtensorMap scales_map) {
  extern __shared__ __align__(128) uint8_t smem[];
  constexpr int kX = N * 128, kStage = kX + kWStage, kCount = kCopySmem / kStage, kAhead = kCount - 2;
  __shared__ uint64_t bars[16];
  static_assert(kCount <= 16, "one barrier per stage");
  const int b = blockIdx.x, t = threadIdx.x;
  const int lane = t & 31, g = lane >> 2, warp = t >> 5, wg = warp >> 2, w = warp & 3;
  const int entry0 = wg * 4 + w, entry1 = 8 + wg * 4 + w;
  if (t < kCount) mbarrier_init(&bars[t], 1);
  __syncthreads();
  const uint8_t* wb = wsrc + b * kBlockW;
  const int n = (t & 7) + 8 * (t >> 4), half = (t >> 3) & 1;
  const uint16_t* xrow = x16 + static_cast<size_t>(tok[b * 128 + (n < N ? n : 0)]) * kK + 8 * half;
  // Which operand comes how: weights by every thread's cp.async (0), one bulk copy of an image (1, 3), 32 bulk
  // copies (2), four tensor copies from the strip-major layout (4, 5); x by cp.async (0, 3, 5) or one bulk copy (1, 2, 4).
  constexpr bool kWAsync = kCopy == 0, kXAsync = kCopy == 0 || kCopy == 3 || kCopy == 5;
  constexpr uint32_t kTx = (kWAsync ? 0 : kWStage) + (kXAsync ? 0 : kX);
  auto load = [&](int gl, int c) {  // chunk c of the tile into the stage of global chunk gl
    uint8_t* stage = smem + (gl % kCount) * kStage;
    uint64_t* bar = &bars[gl % kCount];
    const uint8_t* wi = wimg + (static_cast<size_t>(b) * kChunks + c) * kWStage;
    const uint8_t* xi = ximg + (static_cast<size_t>(b) * kChunks + c) * kX;
    if constexpr (kWAsync) {
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const int id = t + kThreads * i, e = id >> 5, piece = id & 31;
        cp_async16(stage + kX + e * 512 + piece * 16, wb + (static_cast<size_t>(e) * kChunks + c) * 512 + piece * 16, true);
      }
      if (t < kStrips * 4) {
        const int e = t >> 2, piece = t & 3;
        cp_async16(stage + kX + kStrips * 512 + e * 64 + piece * 16,
                   wb + kBlockCodes + (static_cast<size_t>(e) * kChunks + c) * 64 + piece * 16, true);
      }
    }
    if constexpr (kXAsync) {
      if (n < N) {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          cp_async16(stage + (n >> 3) * 256 + half * 128 + (n & 7) * 16 + j * 32 * N, xrow + c * 64 + 16 * j, true);
        }
      }
    }
    if constexpr (kCopy == 2) {
      if (warp == 0) {
        if (lane == 0) mbarrier_arrive_expect_tx(bar, kTx);
        __syncwarp();
        if (lane < 16) {
          bulk_copy_to_shared(stage + kX + lane * 512, wi + lane * 512, 512, bar);
        } else {
          bulk_copy_to_shared(stage + kX + kStrips * 512 + (lane - 16) * 64, wi + kStrips * 512 + (lane - 16) * 64, 64, bar);
        }
        if (lane == 0) bulk_copy_to_shared(stage, xi, kX, bar);
      }
    } else if (kTx > 0 && t == 0) {
      mbarrier_arrive_expect_tx(bar, kTx);
      if constexpr (kCopy == 1 || kCopy == 3) bulk_copy_to_shared(stage + kX, wi, kWStage, bar);
      if constexpr (kCopy == 4 || kCopy == 5) {
        tensor_copy_4d(stage + kX, codes_map, 0, c, 0, b, bar);                        // gate strips' codes
        tensor_copy_4d(stage + kX + 8 * 512, codes_map, 0, c, 8, b, bar);              // up strips' codes
        tensor_copy_4d(stage + kX + kStrips * 512, scales_map, 0, c, 0, b, bar);       // gate scales
        tensor_copy_4d(stage + kX + kStrips * 512 + 8 * 64, scales_map, 0, c, 8, b, bar);  // up scales
      }
      if constexpr (!kXAsync) bulk_copy_to_shared(stage, xi, kX, bar);
    }
  };
  const uint32_t base = smem_addr(smem);
  float acc0[N / 2], acc1[N / 2];
#pragma unroll
  for (int i = 0; i < N / 2; ++i) acc0[i] = acc1[i] = 0.0f;
  for (int tile = 0; tile < tiles; ++tile) {
    const int g0 = tile * kChunks;
#pragma unroll
    for (int s = 0; s < kAhead; ++s) {
      load(g0 + s, s);
      cp_async_commit();
    }
    for (int st = 0; st < kChunks; ++st) {
      const int gl = g0 + st, stage = gl % kCount;
      if constexpr (kTx > 0) mbarrier_wait(&bars[stage], (gl / kCount) & 1);
      if constexpr (kCopy == 0 || kXAsync) {
        cp_async_wait<kAhead - 1>();
        fence_proxy_async_shared();
      }
      __syncthreads();
      if (st + kAhead < kChunks) load(gl + kAhead, st + kAhead);
      cp_async_commit();
      const uint8_t* ws = smem + stage * kStage + kX;
      const uint4 c0 = *reinterpret_cast<const uint4*>(ws + entry0 * 512 + lane * 16);
      const uint4 c1 = *reinterpret_cast<const uint4*>(ws + entry1 * 512 + lane * 16);
      const uint2* sc = reinterpret_cast<const uint2*>(ws + kStrips * 512);
      const uint2 s0 = sc[entry0 * 8 + g], s1 = sc[entry1 * 8 + g];
      const uint32_t w0[4] = {c0.x, c0.y, c0.z, c0.w}, w1[4] = {c1.x, c1.y, c1.z, c1.w};
      const uint32_t x_stage = base + stage * kStage;
      auto step = [&]<int kQ>() {
        uint32_t a0[4], a1[4];
        fragment<kQ>(w0[kQ], s0, a0);
        fragment<kQ>(w1[kQ], s1, a1);
        wgmma_fence();
        const uint64_t desc = kmajor_desc(x_stage + kQ * 32 * N);
        wgmma_rs<N>(acc0, a0, desc);
        wgmma_rs<N>(acc1, a1, desc);
        wgmma_commit();
        wgmma_wait<3>();
      };
      step.template operator()<0>();
      step.template operator()<1>();
      step.template operator()<2>();
      step.template operator()<3>();
    }
    wgmma_wait<0>();
    cp_async_wait<0>();
    __syncthreads();
  }
  float s = 0.0f;
#pragma unroll
  for (int i = 0; i < N / 2; ++i) s += acc0[i] + acc1[i];
  if (s == 12345.0f) *sink = s;
}

// The tensor copies' layout: chunk c of strips s0 .. s0 + 7 of block b lands as [8 strips][unit] (checked against
// the bytes in global memory, which pattern_kernel fills with a hash of their offset).
__global__ void pattern_kernel(uint8_t* p, size_t bytes) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < bytes; i += size_t{gridDim.x} * blockDim.x) {
    p[i] = static_cast<uint8_t>((i * 2654435761u) >> 13);
  }
}
__global__ void layout_check_kernel(const uint8_t* wsrc, int b, int c, int s0, const __grid_constant__ CUtensorMap codes_map,
                                    const __grid_constant__ CUtensorMap scales_map, int* mismatches) {
  __shared__ __align__(128) uint8_t got[8 * 576];
  __shared__ uint64_t bar;
  if (threadIdx.x == 0) {
    mbarrier_init(&bar, 1);
    mbarrier_arrive_expect_tx(&bar, 8 * 576);
    tensor_copy_4d(got, codes_map, 0, c, s0, b, &bar);
    tensor_copy_4d(got + 8 * 512, scales_map, 0, c, s0, b, &bar);
  }
  __syncthreads();
  mbarrier_wait(&bar, 0);
  for (int i = threadIdx.x; i < 8 * 576; i += blockDim.x) {
    const bool code = i < 8 * 512;
    const int e = code ? i / 512 : (i - 8 * 512) / 64, at = code ? i % 512 : (i - 8 * 512) % 64;
    const size_t want = b * kBlockW + (code ? 0 : kBlockCodes) + (static_cast<size_t>(s0 + e) * kChunks + c) * (code ? 512 : 64) + at;
    if (got[i] != wsrc[want]) atomicAdd(mismatches, 1);
  }
}

struct Timer {
  cudaEvent_t t0, t1;
  Timer() {
    CK(cudaEventCreate(&t0));
    CK(cudaEventCreate(&t1));
  }
};

template <typename Launch>
double time_ms(Launch launch) {
  Timer t;
  launch(64);  // warm-up
  CK(cudaDeviceSynchronize());
  float best = 1e30f;
  for (int r = 0; r < 5; ++r) {
    CK(cudaEventRecord(t.t0));
    launch(4096);
    CK(cudaEventRecord(t.t1));
    CK(cudaEventSynchronize(t.t1));
    float ms = 0.0f;
    CK(cudaEventElapsedTime(&ms, t.t0, t.t1));
    best = ms < best ? ms : best;
  }
  return best;
}

int sms = 0, clock_khz = 0;
float* sink = nullptr;

void report(const char* what, double ms, double macs_per_chunk) {
  const double chunks = 4096.0;
  const double tflops = 2.0 * macs_per_chunk * chunks * sms / (ms * 1e-3) / 1e12;
  const double cycles = ms * 1e-3 * clock_khz * 1e3 / chunks;
  std::printf("%-58s %7.1f TFLOP/s  %6.0f cycles per chunk and block\n", what, tflops, cycles);
}

template <int N, int kMode, int kWait = 3>
void rs() {
  constexpr int smem = kStages * (N * 128 + kWStage);
  CK(cudaFuncSetAttribute(rs_kernel<N, kMode, kWait>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  const double ms = time_ms([&](int chunks) { rs_kernel<N, kMode, kWait><<<sms, kThreads, smem>>>(chunks, sink); CK(cudaGetLastError()); });
  char what[96];
  std::snprintf(what, sizeof what, "RS N = %3d, mode %d, wait<%d>", N, kMode, kWait);
  report(what, ms, 256.0 * N * 64);
}


CUtensorMap codes_map, scales_map;

// [blocks][strips][chunks][unit] as a 4D tensor of 32-bit words, boxes of one chunk of 8 strips.
CUtensorMap strip_map(const uint8_t* base, int unit_bytes) {
  static PFN_cuTensorMapEncodeTiled_v12000 encode = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult q;
    CK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &q));
    if (q != cudaDriverEntryPointSuccess) std::exit(3);
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
  }();
  CUtensorMap map;
  const cuuint64_t dims[4] = {static_cast<cuuint64_t>(unit_bytes / 4), kChunks, kStrips, static_cast<cuuint64_t>(sms)};
  const cuuint64_t strides[3] = {static_cast<cuuint64_t>(unit_bytes), static_cast<cuuint64_t>(unit_bytes) * kChunks, kBlockW};
  const cuuint32_t box[4] = {static_cast<cuuint32_t>(unit_bytes / 4), 1, 8, 1}, unit[4] = {1, 1, 1, 1};
  const CUresult r = encode(&map, CU_TENSOR_MAP_DATA_TYPE_UINT32, 4, const_cast<uint8_t*>(base), dims, strides, box, unit,
                            CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    std::printf("cuTensorMapEncodeTiled: %d\n", static_cast<int>(r));
    std::exit(3);
  }
  return map;
}

template <int N, int kCopy>
void copies(const uint8_t* wsrc, const uint16_t* x16, const int* tok, const uint8_t* wimg, const uint8_t* ximg) {
  CK(cudaFuncSetAttribute(copy_kernel<N, kCopy>, cudaFuncAttributeMaxDynamicSharedMemorySize, kCopySmem));
  constexpr int kTiles = 100;
  const double ms = time_ms([&](int) {
    copy_kernel<N, kCopy><<<sms, kThreads, kCopySmem>>>(kTiles, wsrc, x16, tok, wimg, ximg, sink, codes_map, scales_map);
    CK(cudaGetLastError());
  });
  char what[96];
  std::snprintf(what, sizeof what, "copies N = %3d, mode %d", N, kCopy == 0 ? 5 : kCopy <= 2 ? 5 + kCopy : 5 + kCopy);
  const double chunks = double{kTiles} * kChunks;
  std::printf("%-58s %7.1f TFLOP/s  %6.0f cycles per chunk and block\n", what,
              2.0 * 256.0 * N * 64 * chunks * sms / (ms * 1e-3) / 1e12, ms * 1e-3 * clock_khz * 1e3 / chunks);
}

int main() {
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  CK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));
  CK(cudaMalloc(&sink, 4));
  std::printf("%d SMs, clock %d MHz (cycles below use it; the SM may run slower under load)\n", sms, clock_khz / 1000);
  rs<80, 0>(); rs<80, 1>(); rs<80, 2>(); rs<80, 3>();
  rs<128, 0>(); rs<128, 1>(); rs<128, 2>(); rs<128, 3>();
  rs<32, 0>(); rs<32, 3>();
  rs<80, 3, 1>(); rs<80, 3, 5>();
  CK(cudaFuncSetAttribute(ss_decode_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSsSmem));
  const double ms = time_ms([&](int chunks) { ss_decode_kernel<<<sms, kThreads, kSsSmem>>>(chunks, sink); CK(cudaGetLastError()); });
  report("SS decode-to-shared, 128 pairs x 256 rows, mode 4", ms, 128.0 * 256 * 64);
  // Modes 5-7: real copies. Buffers of arbitrary bytes (the codes decode to finite values; the bf16 x are small).
  uint8_t *wsrc, *wimg, *ximg;
  uint16_t* x16;
  int* tok;
  const size_t w_bytes = kBlockW * sms, x_bytes = size_t{kTokens} * kK * 2, xi_bytes = size_t{sms} * kChunks * 128 * 128;
  CK(cudaMalloc(&wsrc, w_bytes));
  CK(cudaMalloc(&wimg, w_bytes));
  CK(cudaMalloc(&ximg, xi_bytes));
  CK(cudaMalloc(&x16, x_bytes));
  CK(cudaMalloc(&tok, size_t{sms} * 128 * 4));
  CK(cudaMemset(wsrc, 0x35, w_bytes));
  CK(cudaMemset(wimg, 0x35, w_bytes));
  CK(cudaMemset(ximg, 0x3c, xi_bytes));
  CK(cudaMemset(x16, 0x3c, x_bytes));
  std::vector<int> host_tok(size_t{sms} * 128);
  uint32_t h = 12345;
  for (int& v : host_tok) v = static_cast<int>((h = h * 1664525u + 1013904223u) >> 8) % kTokens;
  CK(cudaMemcpy(tok, host_tok.data(), host_tok.size() * 4, cudaMemcpyHostToDevice));
  codes_map = strip_map(wsrc, 512);
  scales_map = strip_map(wsrc + kBlockCodes, 64);
  {
    pattern_kernel<<<1024, 256>>>(wsrc, w_bytes);
    int* mism;
    CK(cudaMalloc(&mism, 4));
    CK(cudaMemset(mism, 0, 4));
    layout_check_kernel<<<1, 256>>>(wsrc, 3, 5, 8, codes_map, scales_map, mism);
    layout_check_kernel<<<1, 256>>>(wsrc, sms - 1, kChunks - 1, 0, codes_map, scales_map, mism);
    int host = -1;
    CK(cudaMemcpy(&host, mism, 4, cudaMemcpyDeviceToHost));
    std::printf("tensor copy layout: %d mismatching bytes of 2 x %d\n", host, 8 * 576);
    CK(cudaMemset(wsrc, 0x35, w_bytes));
  }
  copies<80, 0>(wsrc, x16, tok, wimg, ximg);
  copies<80, 3>(wsrc, x16, tok, wimg, ximg);
  copies<80, 4>(wsrc, x16, tok, wimg, ximg);
  copies<80, 5>(wsrc, x16, tok, wimg, ximg);
  copies<80, 1>(wsrc, x16, tok, wimg, ximg);
  copies<80, 2>(wsrc, x16, tok, wimg, ximg);
  copies<128, 0>(wsrc, x16, tok, wimg, ximg);
  copies<128, 1>(wsrc, x16, tok, wimg, ximg);
  copies<128, 4>(wsrc, x16, tok, wimg, ximg);
  copies<128, 5>(wsrc, x16, tok, wimg, ximg);
  copies<32, 0>(wsrc, x16, tok, wimg, ximg);
  copies<32, 1>(wsrc, x16, tok, wimg, ximg);
  copies<32, 4>(wsrc, x16, tok, wimg, ximg);
  copies<32, 5>(wsrc, x16, tok, wimg, ximg);
  return 0;
}
