// The building block the MoE prefill GEMM needs next (docs/cuda_engine.md, "Next steps"): one warpgroup's
// wgmma.mma_async m64nNk16 (bf16 in, fp32 accumulate) with both operands K-major in shared memory, no swizzle,
// against a double-precision product on the host. It checks the shared-memory layout, the matrix descriptors and
// the accumulator fragment layout below before a real kernel is built on them; it prints the largest error per
// shape and exits non-zero on a mismatch. Also checks A from registers (RS) and measures RS throughput.
// Result (H200, session 8, bench/results/2026-11-30_wgmma_probe.txt): LBO = the K step (128 bytes), SBO = the M/N
// step (256 bytes); the RS fragment is the mma.m16n8k16 A fragment; RS runs at 944-971 TFLOP/s for N = 32..256.
// Build: nvcc -O3 -std=c++20 -Isrc -gencode=arch=compute_90a,code=sm_90a bench/experiments/wgmma_probe.cu -o build/exp/wgmma_probe
//
// Layout (K-major, no swizzle): 8 x 8 "core matrices" of 8 rows x 16 bytes, each 128 contiguous bytes (row r at
// +16 r). Within one k16 step, the two core matrices along K are LBO = 128 bytes apart and the ones along M (or N)
// SBO = 256 bytes apart; k16 steps follow each other every rows * 32 bytes. Element (row m, k) of an operand with
// `rows` rows: (k / 16) * rows * 32 + (m / 8) * 256 + ((k % 16) / 8) * 128 + (m % 8) * 16 + (k % 8) * 2 bytes.
//
// Descriptor (64 bits): start address >> 4 in bits 0-13, LBO >> 4 in bits 16-29, SBO >> 4 in bits 32-45, layout
// type in bits 62-63 (0: no swizzle). The probe runs both assignments of the two offsets (see descriptor()) and
// succeeds when one matches at every shape.
//
// Accumulators of m64nN: N / 2 floats per thread; warp w of the warpgroup holds rows 16 w .. 16 w + 15 and, per
// n8 block j, d[4 j + 0, 1] = (row 16 w + g, cols 8 j + 2 c, + 1), d[4 j + 2, 3] = (row 16 w + g + 8, same cols)
// with g = lane / 4, c = lane % 4 (the mma.m16n8 layout repeated over N).
#include <cuda_bf16.h>

#include "cuda/kernels/wgmma_ops.cuh"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

using namespace imp::cuda::wgmma;

#define CK(x)                                                                               \
  do {                                                                                      \
    cudaError_t e = (x);                                                                    \
    if (e != cudaSuccess) {                                                                 \
      std::printf("cuda: %s at line %d\n", cudaGetErrorString(e), __LINE__);               \
      std::exit(2);                                                                         \
    }                                                                                       \
  } while (0)

__host__ __device__ constexpr uint32_t kmajor_offset(int m, int k, int rows) {
  return static_cast<uint32_t>((k / 16) * rows * 32 + (m / 8) * 256 + ((k % 16) / 8) * 128 + (m % 8) * 16 + (k % 8) * 2);
}

// swap = true puts the two offsets in each other's fields: sources disagree on which field is which for K-major
// tiles without swizzle, so the probe reports the one that matches.
__device__ uint64_t descriptor(uint32_t smem_byte_address, bool swap) {
  const uint64_t k_step = 128 >> 4, mn_step = 256 >> 4;
  const uint64_t start = (smem_byte_address >> 4) & 0x3fff, lbo = swap ? mn_step : k_step, sbo = swap ? k_step : mn_step;
  return start | (lbo << 16) | (sbo << 32);  // layout type 0: no swizzle
}

// Operand x [rows, K] (row-major bf16) into shared memory in the K-major core-matrix layout above.
__device__ void stage_kmajor(const __nv_bfloat16* x, int rows, int K, uint8_t* dst) {
  for (int e = threadIdx.x; e < rows * K; e += blockDim.x) {
    *reinterpret_cast<__nv_bfloat16*>(dst + kmajor_offset(e / K, e % K, rows)) = x[e];
  }
}

// The accumulators of m64nN (layout at the top) into row-major c [64, N].
template <int N>
__device__ void store_accumulators(const float (&d)[N / 2], float* c) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, cq = lane % 4;
  for (int j = 0; j < N / 8; ++j) {
    const int row = 16 * warp + g, col = 8 * j + 2 * cq;
    c[row * N + col] = d[4 * j];
    c[row * N + col + 1] = d[4 * j + 1];
    c[(row + 8) * N + col] = d[4 * j + 2];
    c[(row + 8) * N + col + 1] = d[4 * j + 3];
  }
}

// C [64, N] = A [64, K] . B [N, K]^T, one warpgroup, everything in shared memory at once (K <= 256).
template <int N>
__global__ void __launch_bounds__(128) probe_kernel(const __nv_bfloat16* a, const __nv_bfloat16* b, int K, bool swap, float* c) {
  extern __shared__ __align__(128) uint8_t smem[];
  uint8_t* sa = smem;
  uint8_t* sb = smem + 64 * K * 2;
  stage_kmajor(a, 64, K, sa);
  stage_kmajor(b, N, K, sb);
  // Generic-proxy stores must be visible to the async proxy that wgmma reads shared memory through.
  fence_proxy_async_shared();
  __syncthreads();

  float d[N / 2];
  for (float& v : d) v = 0.0f;
  const uint32_t base_a = static_cast<uint32_t>(__cvta_generic_to_shared(sa));
  const uint32_t base_b = static_cast<uint32_t>(__cvta_generic_to_shared(sb));
  wgmma_fence();
  for (int k0 = 0; k0 < K; k0 += 16) {
    wgmma_ss<N>(d, descriptor(base_a + kmajor_offset(0, k0, 64), swap), descriptor(base_b + kmajor_offset(0, k0, N), swap));
  }
  wgmma_commit();
  wgmma_wait<0>();
  store_accumulators<N>(d, c);
}

// The same product with A from registers: warp w loads the mma.m16n8k16 A fragment of rows 16 w .. 16 w + 15
// straight from global memory (a0 = (g, 2c), a1 = (g + 8, 2c), a2 = (g, 2c + 8), a3 = (g + 8, 2c + 8)).
template <int N>
__global__ void __launch_bounds__(128) probe_rs_kernel(const __nv_bfloat16* a, const __nv_bfloat16* b, int K, bool swap, float* c) {
  extern __shared__ __align__(128) uint8_t smem[];
  uint8_t* sb = smem;
  stage_kmajor(b, N, K, sb);
  fence_proxy_async_shared();
  __syncthreads();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, cq = lane % 4;
  float d[N / 2];
  for (float& v : d) v = 0.0f;
  const uint32_t base_b = static_cast<uint32_t>(__cvta_generic_to_shared(sb));
  auto pair_at = [&](int row, int k) {
    return *reinterpret_cast<const uint32_t*>(a + (16 * warp + row) * K + k);
  };
  for (int k0 = 0; k0 < K; k0 += 16) {
    const uint32_t frag[4] = {pair_at(g, k0 + 2 * cq), pair_at(g + 8, k0 + 2 * cq), pair_at(g, k0 + 2 * cq + 8),
                              pair_at(g + 8, k0 + 2 * cq + 8)};
    wgmma_fence();
    wgmma_rs<N>(d, frag, descriptor(base_b + kmajor_offset(0, k0, N), swap));
    wgmma_commit();
    wgmma_wait<0>();  // frag is rewritten next step
  }
  store_accumulators<N>(d, c);
}

template <int N>
bool check(int K, bool swap, bool rs) {
  std::mt19937 rng(7 + K);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<__nv_bfloat16> a(64 * K), b(N * K);
  for (auto& v : a) v = __float2bfloat16(dist(rng));
  for (auto& v : b) v = __float2bfloat16(dist(rng));
  __nv_bfloat16 *da, *db;
  float* dc;
  CK(cudaMalloc(&da, a.size() * 2));
  CK(cudaMalloc(&db, b.size() * 2));
  CK(cudaMalloc(&dc, 64 * N * 4));
  CK(cudaMemcpy(da, a.data(), a.size() * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(db, b.data(), b.size() * 2, cudaMemcpyHostToDevice));
  CK(cudaMemset(dc, 0, 64 * N * 4));
  const int smem = (rs ? N : 64 + N) * K * 2;
  if (rs) {
    CK(cudaFuncSetAttribute(probe_rs_kernel<N>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    probe_rs_kernel<N><<<1, 128, smem>>>(da, db, K, swap, dc);
  } else {
    CK(cudaFuncSetAttribute(probe_kernel<N>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    probe_kernel<N><<<1, 128, smem>>>(da, db, K, swap, dc);
  }
  CK(cudaGetLastError());
  std::vector<float> c(64 * N);
  CK(cudaMemcpy(c.data(), dc, c.size() * 4, cudaMemcpyDeviceToHost));
  double worst = 0.0, scale = 0.0;
  for (int m = 0; m < 64; ++m) {
    for (int n = 0; n < N; ++n) {
      double ref = 0.0;
      for (int k = 0; k < K; ++k) ref += double(__bfloat162float(a[m * K + k])) * double(__bfloat162float(b[n * K + k]));
      worst = std::max(worst, std::fabs(ref - double(c[m * N + n])));
      scale = std::max(scale, std::fabs(ref));
    }
  }
  // bf16 products are exact in fp32; only the fp32 sums of K terms differ: 1e-5 of the scale is generous.
  const bool ok = worst <= 1e-5 * scale;
  std::printf("%s m64n%dk16 x %d steps, %s: max |err| %.3g of max |ref| %.3g: %s\n", rs ? "RS" : "SS", N, K / 16,
              swap ? "LBO = M/N step, SBO = K step" : "LBO = K step, SBO = M/N step", worst, scale, ok ? "ok" : "MISMATCH");
  cudaFree(da);
  cudaFree(db);
  cudaFree(dc);
  return ok;
}

// Throughput of back-to-back RS wgmmas (A fixed in registers, B cycling over four k16 steps of an N x 64 tile),
// `wgs` warpgroups per block, two blocks per SM: TFLOP/s over the whole GPU.
template <int N>
__global__ void throughput_kernel(int iters, bool swap, float* sink) {
  extern __shared__ __align__(128) uint8_t smem[];
  for (int e = threadIdx.x; e < N * 64 * 2 / 4; e += blockDim.x) reinterpret_cast<uint32_t*>(smem)[e] = 0x3c003c00u;
  fence_proxy_async_shared();
  __syncthreads();
  const uint32_t base_b = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  uint64_t desc[4];
  for (int q = 0; q < 4; ++q) desc[q] = descriptor(base_b + kmajor_offset(0, 16 * q, N), swap);
  const uint32_t frag[4] = {threadIdx.x, threadIdx.x + 1, threadIdx.x + 2, threadIdx.x + 3};
  float d[N / 2];
  for (float& v : d) v = 0.0f;
  wgmma_fence();
  for (int it = 0; it < iters; ++it) {
#pragma unroll
    for (int q = 0; q < 4; ++q) wgmma_rs<N>(d, frag, desc[q]);
    wgmma_commit();
    wgmma_wait<1>();
  }
  wgmma_wait<0>();
  float s = 0.0f;
  for (float v : d) s += v;
  if (s == 12345.0f) *sink = s;
}

template <int N>
void throughput(int wgs, bool swap) {
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const int smem = N * 64 * 2, iters = 4096, blocks = 2 * sms;
  CK(cudaFuncSetAttribute(throughput_kernel<N>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  float* sink;
  CK(cudaMalloc(&sink, 4));
  cudaEvent_t t0, t1;
  CK(cudaEventCreate(&t0));
  CK(cudaEventCreate(&t1));
  throughput_kernel<N><<<blocks, 128 * wgs, smem>>>(16, swap, sink);
  CK(cudaEventRecord(t0));
  throughput_kernel<N><<<blocks, 128 * wgs, smem>>>(iters, swap, sink);
  CK(cudaEventRecord(t1));
  CK(cudaEventSynchronize(t1));
  float ms = 0.0f;
  CK(cudaEventElapsedTime(&ms, t0, t1));
  const double flops = 2.0 * 64 * N * 16 * 4.0 * iters * wgs * blocks;
  std::printf("RS m64n%dk16 throughput, %d warpgroup(s) per block, %d blocks: %.1f TFLOP/s\n", N, wgs, blocks,
              flops / (ms * 1e-3) / 1e12);
  cudaFree(sink);
}

int main() {
  int swap_ok = -1;
  for (bool swap : {false, true}) {
    bool ok = true;
    ok &= check<64>(16, swap, false);   // one k step: layout and fragments
    ok &= check<64>(64, swap, false);   // descriptor advance over k steps
    ok &= check<64>(256, swap, false);  // a 256-wide K
    if (ok && swap_ok < 0) swap_ok = swap ? 1 : 0;
  }
  if (swap_ok < 0) return 1;
  const bool swap = swap_ok == 1;
  bool ok = true;
  ok &= check<16>(64, swap, true);
  ok &= check<48>(64, swap, true);
  ok &= check<128>(128, swap, true);
  ok &= check<256>(64, swap, true);
  ok &= check<256>(64, swap, false);
  for (int wgs : {1, 2}) {
    throughput<32>(wgs, swap);
    throughput<64>(wgs, swap);
    throughput<128>(wgs, swap);
    throughput<256>(wgs, swap);
  }
  return ok ? 0 : 1;
}
