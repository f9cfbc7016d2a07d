// Why the streamed decode GEMV (9c6f385, reverted in session 10: in_proj 28.0 -> 33.3 us per call inside the decode
// graph) lost to the 128-thread block kernel: both timed alone, 20 launches per graph with programmatic dependent
// launch as in decode (so each launch's pre-wait weight loads overlap the previous launch), on the released
// one-row shapes with K = 2560. Streamed variants: warps per block, blocks per SM and ring depth (rows in flight
// per warp). Every variant's output is checked bit for bit against the block kernel's.
// Build and run on the GPU machine from the repository root:
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -Isrc bench/experiments/gemv_streamed_probe.cu \
//     -o build/exp/gemv_streamed_probe && build/exp/gemv_streamed_probe
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

#include "cuda/kernels/device_math.cuh"
#include "cuda/kernels/gemv_row.cuh"
#include "bulk_copy.cuh"
#include "probe_graph.cuh"

using namespace imp::cuda;

// The engine's kernel (dense.cu): 128 threads, one row per warp (split-K 1 at these row counts).
__global__ void block_kernel(const uint16_t* w, const float* x, int n, int k, float* y) {
  pdl_trigger();
  gemv_rows<1>(w, n, k, 1, PlainX{x, k}, [&](int row, const float (&acc)[1]) { y[row] = acc[0]; });
}

constexpr int kLaneChunks = 10;  // K = 2560: 320 chunks of 8 over 32 lanes

// Streamed: each warp a contiguous run of rows through a ring of Stages rows in shared memory (cp.async), x in
// registers; 9c6f385's loop with Warps warps per block, and a row's shared-memory loads all issued before its FMAs
// (9c6f385 interleaved them, one branch per chunk).
template <int Warps, int Stages>
__global__ void __launch_bounds__(Warps * 32) streamed_kernel(const uint16_t* w, const float* x, int n, int k, float* y) {
  pdl_trigger();
  extern __shared__ __align__(16) uint8_t rings[];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = gridDim.x * Warps;
  const int gw = blockIdx.x * Warps + warp;
  const int first = static_cast<int>(static_cast<int64_t>(gw) * n / warps);
  const int last = static_cast<int>(static_cast<int64_t>(gw + 1) * n / warps);
  const int row_bytes = k * 2, chunks = k / 8;
  uint8_t* ring = rings + static_cast<size_t>(warp) * Stages * row_bytes;
  auto issue = [&](int r, int stage) {
    if (r < last) {
      const uint8_t* src = reinterpret_cast<const uint8_t*>(w + static_cast<size_t>(r) * k);
#pragma unroll
      for (int i = 0; i < kLaneChunks; ++i) {
        const int c = lane + 32 * i;
        if (c < chunks) cp_async16(ring + stage * row_bytes + 16 * c, src + 16 * c);
      }
    }
    cp_async_commit();
  };
#pragma unroll
  for (int s = 0; s < Stages; ++s) issue(first + s, s);
  pdl_wait();
  float xr[kLaneChunks][8];
#pragma unroll
  for (int i = 0; i < kLaneChunks; ++i) {
    const int c = lane + 32 * i;
    const float4 a = *reinterpret_cast<const float4*>(x + 8 * c), b = *reinterpret_cast<const float4*>(x + 8 * c + 4);
    xr[i][0] = a.x, xr[i][1] = a.y, xr[i][2] = a.z, xr[i][3] = a.w, xr[i][4] = b.x, xr[i][5] = b.y, xr[i][6] = b.z,
    xr[i][7] = b.w;
  }
  int stage = 0;
  for (int r = first; r < last; ++r) {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(Stages - 1) : "memory");
    const uint8_t* src = ring + stage * row_bytes;
    uint4 words[kLaneChunks];  // every shared-memory load of the row before any use
#pragma unroll
    for (int i = 0; i < kLaneChunks; ++i) words[i] = *reinterpret_cast<const uint4*>(src + 16 * (lane + 32 * i));
    float acc = 0.0f;
#pragma unroll
    for (int i = 0; i < kLaneChunks; ++i) acc += dot8(words[i], xr[i]);
    issue(r + Stages, stage);
    stage = stage + 1 == Stages ? 0 : stage + 1;
    acc = warp_sum(acc);
    if (lane == 0) y[r] = acc;
  }
  cp_async_wait_all();
}

// Bulk-streamed: each block a contiguous run of rows, copied by one thread in stages of Rows whole rows
// (cp.async.bulk, one copy of Rows * 5 KB per stage, completing on an mbarrier), so a block keeps up to
// Stages * Rows * 5 KB in flight with no per-lane copy instructions and no registers held by loads; the first
// Stages copies go out before the PDL wait. Warp w computes rows w, w + Warps, ... of a stage; a block barrier
// frees the stage for its next copy.
template <int Warps, int Rows, int Stages>
__global__ void __launch_bounds__(Warps * 32) bulk_kernel(const uint16_t* w, const float* x, int n, int k, float* y) {
  static_assert(Rows % Warps == 0, "whole rows per warp and stage");
  pdl_trigger();
  extern __shared__ __align__(128) uint8_t stages[];
  __shared__ __align__(8) uint64_t full[Stages];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int first = static_cast<int>(static_cast<int64_t>(blockIdx.x) * n / gridDim.x);
  const int last = static_cast<int>(static_cast<int64_t>(blockIdx.x + 1) * n / gridDim.x);
  const int row_bytes = k * 2;
  const int rounds = (last - first + Rows - 1) / Rows;
  auto issue = [&](int round) {
    if (round >= rounds) return;
    const int r0 = first + round * Rows, count = min(Rows, last - r0);
    const uint32_t bytes = static_cast<uint32_t>(count * row_bytes);
    const int s = round % Stages;
    bulk_copy(stages + static_cast<size_t>(s) * Rows * row_bytes, w + static_cast<size_t>(r0) * k, bytes, &full[s]);
  };
  if (threadIdx.x == 0) {
    mbarriers_init(full, Stages);
    for (int s = 0; s < Stages; ++s) issue(s);
  }
  __syncthreads();
  pdl_wait();
  float xr[kLaneChunks][8];
#pragma unroll
  for (int i = 0; i < kLaneChunks; ++i) {
    const int c = lane + 32 * i;
    const float4 a = *reinterpret_cast<const float4*>(x + 8 * c), b = *reinterpret_cast<const float4*>(x + 8 * c + 4);
    xr[i][0] = a.x, xr[i][1] = a.y, xr[i][2] = a.z, xr[i][3] = a.w, xr[i][4] = b.x, xr[i][5] = b.y, xr[i][6] = b.z,
    xr[i][7] = b.w;
  }
  for (int round = 0; round < rounds; ++round) {
    const int s = round % Stages;
    const uint32_t parity = (round / Stages) & 1;
    mbarrier_wait(&full[s], parity);
    const int r0 = first + round * Rows;
#pragma unroll
    for (int j = 0; j < Rows / Warps; ++j) {
      const int local = warp + j * Warps, r = r0 + local;
      if (r < last) {
        const uint8_t* src = stages + (static_cast<size_t>(s) * Rows + local) * row_bytes;
        uint4 words[kLaneChunks];
#pragma unroll
        for (int i = 0; i < kLaneChunks; ++i) words[i] = *reinterpret_cast<const uint4*>(src + 16 * (lane + 32 * i));
        float acc = 0.0f;
#pragma unroll
        for (int i = 0; i < kLaneChunks; ++i) acc += dot8(words[i], xr[i]);
        acc = warp_sum(acc);
        if (lane == 0) y[r] = acc;
      }
    }
    __syncthreads();  // stage s read by every warp: it may be refilled
    if (threadIdx.x == 0) issue(round + Stages);
  }
}

// The bulk kernel with x in shared memory instead of registers (~40 registers instead of ~116), so a block fits
// beside a latency-bound predecessor's blocks and its first stages go out while that kernel still runs.
template <int Warps, int Rows, int Stages>
__global__ void __launch_bounds__(Warps * 32) bulk_small_kernel(const uint16_t* w, const float* x, int n, int k, float* y) {
  static_assert(Rows % Warps == 0, "whole rows per warp and stage");
  pdl_trigger();
  extern __shared__ __align__(128) uint8_t stages[];
  __shared__ __align__(8) uint64_t full[Stages];
  __shared__ __align__(16) float xs[kLaneChunks * 32 * 8];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int first = static_cast<int>(static_cast<int64_t>(blockIdx.x) * n / gridDim.x);
  const int last = static_cast<int>(static_cast<int64_t>(blockIdx.x + 1) * n / gridDim.x);
  const int row_bytes = k * 2;
  const int rounds = (last - first + Rows - 1) / Rows;
  auto issue = [&](int round) {
    if (round >= rounds) return;
    const int r0 = first + round * Rows, count = min(Rows, last - r0);
    const uint32_t bytes = static_cast<uint32_t>(count * row_bytes);
    const int s = round % Stages;
    bulk_copy(stages + static_cast<size_t>(s) * Rows * row_bytes, w + static_cast<size_t>(r0) * k, bytes, &full[s]);
  };
  if (threadIdx.x == 0) {
    mbarriers_init(full, Stages);
    for (int s = 0; s < Stages; ++s) issue(s);
  }
  pdl_wait();
  for (int i = threadIdx.x; i < k / 4; i += Warps * 32) reinterpret_cast<float4*>(xs)[i] = reinterpret_cast<const float4*>(x)[i];
  __syncthreads();
  for (int round = 0; round < rounds; ++round) {
    const int s = round % Stages;
    const uint32_t parity = (round / Stages) & 1;
    mbarrier_wait(&full[s], parity);
    const int r0 = first + round * Rows;
#pragma unroll 1
    for (int j = 0; j < Rows / Warps; ++j) {
      const int local = warp + j * Warps, r = r0 + local;
      if (r < last) {
        const uint8_t* src = stages + (static_cast<size_t>(s) * Rows + local) * row_bytes;
        float acc = 0.0f;
#pragma unroll
        for (int i = 0; i < kLaneChunks; ++i) {
          const int c = lane + 32 * i;
          const uint4 word = *reinterpret_cast<const uint4*>(src + 16 * c);
          const float4 a = *reinterpret_cast<const float4*>(xs + 8 * c), b = *reinterpret_cast<const float4*>(xs + 8 * c + 4);
          const float xv[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
          acc += dot8(word, xv);
        }
        acc = warp_sum(acc);
        if (lane == 0) y[r] = acc;
      }
    }
    __syncthreads();  // stage s read by every warp: it may be refilled
    if (threadIdx.x == 0) issue(round + Stages);
  }
}

// A latency-bound predecessor like the hyper-connection read-up (320 blocks of 256 threads, ~75 registers): every
// block resident first, then ~4 us of waiting after its own PDL wait, holding 64 loaded values live.
__global__ void __launch_bounds__(256) pred_kernel(const float4* in, float* out, long long spin_ns) {
  pdl_trigger();
  float4 v[16];
#pragma unroll
  for (int i = 0; i < 16; ++i) v[i] = in[(blockIdx.x * 16 + i) * 256 + threadIdx.x];
  pdl_wait();
  long long t0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  long long t = t0;
  while (t - t0 < spin_ns) asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  float sum = 0.0f;
#pragma unroll
  for (int i = 0; i < 16; ++i) sum += v[i].x * v[i].y + v[i].z * v[i].w;
  if (sum == 12345.0f) out[threadIdx.x] = sum;
}

// 20 launches per graph, the median of 8 replays.
template <class Launch>
double time_graph(Launch launch) {
  return time_graph([&](cudaStream_t s, int) { launch(s); }, 20, 8);
}

int sms = 0;

template <int Warps, int Stages, int PerSm>
void streamed(const char* name, const uint16_t* w, const float* x, int n, int k, float* y, const std::vector<float>& want,
              double bytes) {
  const size_t smem = static_cast<size_t>(Warps) * Stages * k * 2;
  auto kernel = streamed_kernel<Warps, Stages>;
  CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  const unsigned grid = static_cast<unsigned>(sms * PerSm);
  CHECK(cudaMemset(y, 0, static_cast<size_t>(n) * 4));  // so a variant that writes nothing cannot match
  const double us = time_graph([&](cudaStream_t s) { launch_pdl(kernel, grid, Warps * 32, smem, s, w, x, n, k, y); });
  std::vector<float> got(want.size());
  CHECK(cudaMemcpy(got.data(), y, got.size() * 4, cudaMemcpyDeviceToHost));
  const bool same = std::equal(got.begin(), got.end(), want.begin());
  std::printf("  %-26s %7.1f us %5.2f TB/s %s\n", name, us, bytes / us / 1e6, same ? "same bits" : "DIFFERENT");
}

template <int Warps, int Rows, int Stages, int PerSm>
void bulk(const char* name, const uint16_t* w, const float* x, int n, int k, float* y, const std::vector<float>& want,
          double bytes) {
  const size_t smem = static_cast<size_t>(Stages) * Rows * k * 2;
  auto kernel = bulk_kernel<Warps, Rows, Stages>;
  CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  const unsigned grid = static_cast<unsigned>(sms * PerSm);
  CHECK(cudaMemset(y, 0, static_cast<size_t>(n) * 4));  // so a variant that writes nothing cannot match
  const double us = time_graph([&](cudaStream_t s) { launch_pdl(kernel, grid, Warps * 32, smem, s, w, x, n, k, y); });
  std::vector<float> got(want.size());
  CHECK(cudaMemcpy(got.data(), y, got.size() * 4, cudaMemcpyDeviceToHost));
  const bool same = std::equal(got.begin(), got.end(), want.begin());
  std::printf("  %-26s %7.1f us %5.2f TB/s %s\n", name, us, bytes / us / 1e6, same ? "same bits" : "DIFFERENT");
}

float4* pred_in = nullptr;
float* pred_out = nullptr;
constexpr long long kSpinNs = 4000;

// Per pair: the predecessor then the GEMV variant, 20 pairs per graph, minus nothing (the pred alone is printed).
template <class Kernel>
double time_pairs(Kernel kernel, unsigned grid, unsigned block, size_t smem, const uint16_t* w, const float* x, int n,
                  int k, float* y) {
  return time_graph([&](cudaStream_t s) {
    launch_pdl(pred_kernel, 320u, 256u, size_t{0}, s, (const float4*)pred_in, pred_out, kSpinNs);
    launch_pdl(kernel, grid, block, smem, s, w, x, n, k, y);
  });
}

template <int Warps, int Rows, int Stages, int PerSm>
void bulk_small(const char* name, const uint16_t* w, const float* x, int n, int k, float* y,
                const std::vector<float>& want, double bytes) {
  const size_t smem = static_cast<size_t>(Stages) * Rows * k * 2;
  auto kernel = bulk_small_kernel<Warps, Rows, Stages>;
  CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  const unsigned grid = static_cast<unsigned>(sms * PerSm);
  CHECK(cudaMemset(y, 0, static_cast<size_t>(n) * 4));  // so a variant that writes nothing cannot match
  const double us = time_graph([&](cudaStream_t s) { launch_pdl(kernel, grid, Warps * 32, smem, s, w, x, n, k, y); });
  const double pair = time_pairs(kernel, grid, Warps * 32, smem, w, x, n, k, y);
  std::vector<float> got(want.size());
  CHECK(cudaMemcpy(got.data(), y, got.size() * 4, cudaMemcpyDeviceToHost));
  const bool same = std::equal(got.begin(), got.end(), want.begin());
  std::printf("  %-26s %7.1f us %5.2f TB/s, after pred %7.1f us %s\n", name, us, bytes / us / 1e6, pair,
              same ? "same bits" : "DIFFERENT");
}

int main() {
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  CHECK(cudaMalloc(&pred_in, size_t{320} * 16 * 256 * sizeof(float4)));
  CHECK(cudaMemset(pred_in, 0, size_t{320} * 16 * 256 * sizeof(float4)));
  CHECK(cudaMalloc(&pred_out, 256 * sizeof(float)));
  const double pred_alone = time_graph([&](cudaStream_t s) {
    launch_pdl(pred_kernel, 320u, 256u, size_t{0}, s, (const float4*)pred_in, pred_out, kSpinNs);
  });
  std::printf("predecessor alone (320 x 256, %lld ns after its wait): %.1f us\n", kSpinNs, pred_alone);
  const int k = 2560;
  for (int n : {16480, 13952, 248320}) {
    std::mt19937 rng(n);
    std::uniform_int_distribution<uint32_t> bits(0, 0xffff);
    std::vector<uint16_t> hw(static_cast<size_t>(n) * k);
    for (auto& v : hw) v = static_cast<uint16_t>((bits(rng) & 0x807f) | 0x3c00);  // |w| in [2^-7, 2^-6): finite
    std::vector<float> hx(k);
    for (auto& v : hx) v = static_cast<float>(bits(rng)) / 65536.0f - 0.5f;
    uint16_t* w;
    float *x, *y;
    CHECK(cudaMalloc(&w, hw.size() * 2));
    CHECK(cudaMalloc(&x, hx.size() * 4));
    CHECK(cudaMalloc(&y, static_cast<size_t>(n) * 4));
    CHECK(cudaMemcpy(w, hw.data(), hw.size() * 2, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(x, hx.data(), hx.size() * 4, cudaMemcpyHostToDevice));
    const double bytes = static_cast<double>(n) * k * 2;
    const unsigned blocks = static_cast<unsigned>((n + kGemvWarps - 1) / kGemvWarps);
    const double us = time_graph([&](cudaStream_t s) { launch_pdl(block_kernel, blocks, kGemvThreads, 0, s, (const uint16_t*)w, (const float*)x, n, k, y); });
    std::vector<float> want(n);
    CHECK(cudaMemcpy(want.data(), y, want.size() * 4, cudaMemcpyDeviceToHost));
    std::printf("%d x %d (%.1f MB):\n  %-26s %7.1f us %5.2f TB/s\n", n, k, bytes / 1e6, "block kernel (engine)", us,
                bytes / us / 1e6);
    const uint16_t* cw = w;
    const float* cx = x;
    const double block_pair = time_pairs(block_kernel, blocks, kGemvThreads, 0, cw, cx, n, k, y);
    std::printf("  %-26s after pred %7.1f us\n", "block kernel (engine)", block_pair);
    bulk_small<4, 8, 4, 1>("bulk-small 4w, 8 rows x 4", cw, cx, n, k, y, want, bytes);
    bulk_small<4, 4, 8, 1>("bulk-small 4w, 4 rows x 8", cw, cx, n, k, y, want, bytes);
    bulk_small<8, 8, 4, 1>("bulk-small 8w, 8 rows x 4", cw, cx, n, k, y, want, bytes);
    bulk_small<4, 4, 4, 2>("bulk-small 4w, 4x4, 2/SM", cw, cx, n, k, y, want, bytes);
    bulk_small<4, 8, 2, 2>("bulk-small 4w, 8x2, 2/SM", cw, cx, n, k, y, want, bytes);
    bulk_small<4, 4, 6, 1>("bulk-small 4w, 4 rows x 6", cw, cx, n, k, y, want, bytes);
    streamed<8, 4, 1>("streamed 8 warps x 4 rows", cw, cx, n, k, y, want, bytes);  // 9c6f385's shape
    streamed<8, 2, 2>("streamed 8 warps x 2, 2/SM", cw, cx, n, k, y, want, bytes);
    streamed<16, 2, 1>("streamed 16 warps x 2 rows", cw, cx, n, k, y, want, bytes);
    streamed<4, 3, 3>("streamed 4 warps x 3, 3/SM", cw, cx, n, k, y, want, bytes);
    streamed<8, 5, 1>("streamed 8 warps x 5 rows", cw, cx, n, k, y, want, bytes);
    bulk<8, 8, 4, 1>("bulk 8 warps, 8 rows x 4", cw, cx, n, k, y, want, bytes);
    bulk<8, 8, 2, 2>("bulk 8 warps, 8 rows x 2, 2/SM", cw, cx, n, k, y, want, bytes);
    bulk<4, 4, 4, 2>("bulk 4 warps, 4 rows x 4, 2/SM", cw, cx, n, k, y, want, bytes);
    bulk<8, 16, 2, 1>("bulk 8 warps, 16 rows x 2", cw, cx, n, k, y, want, bytes);
    bulk<16, 16, 2, 1>("bulk 16 warps, 16 rows x 2", cw, cx, n, k, y, want, bytes);
    bulk<4, 8, 5, 1>("bulk 4 warps, 8 rows x 5", cw, cx, n, k, y, want, bytes);
    CHECK(cudaFree(w));
    CHECK(cudaFree(x));
    CHECK(cudaFree(y));
  }
  return 0;
}
