// What a wgmma flash attention needs before it is built (docs/cuda_engine.md, prefill next steps): O = P V with
// P from registers (RS) and V as it is stored, [keys, d] with d contiguous, i.e. B "MN-major" (N = d contiguous,
// K = keys), read through the transpose bit of wgmma. wgmma_probe.cu confirmed the K-major layout without swizzle
// (session 8); this probe checks the MN-major one against a double-precision product on the host, for N = 64 and
// 256 and K = 16 and 64, with both assignments of the two descriptor offsets, and prints which one matches (it
// exits non-zero when none does). Written in session 25. Its first run (session 26) faulted: the first assignment
// tried (LBO = the N step) makes wgmma step N core matrices by N * 16 bytes, past a tile-sized buffer, so every
// launch now gets 64 KB of shared memory, which holds what either assignment reads.
// Build: nvcc -O3 -std=c++20 -Isrc -gencode=arch=compute_90a,code=sm_90a bench/experiments/wgmma_mn_major_probe.cu \
//   -o build/exp/wgmma_mn_major_probe
//
// The layout tried (MN-major, no swizzle; CUTLASS's canonical "interleave" MN-major form, ((8, n), (8, k)) :
// ((1, LBO), (8, SBO)) in elements): core matrices of 8 K-rows x 8 MN-elements (16 bytes per K-row, 128
// contiguous bytes); element (n, k) of a [K, N] operand at (n % 8) * 2 + (k % 8) * 16 + (n / 8) * 128 +
// (k / 8) * (N / 8) * 128 bytes: the core matrices along N are 128 bytes apart, those along K N * 16 bytes. One
// assignment puts 128 in LBO and N * 16 in SBO, the other the reverse; a k16 step advances the start address by
// two K core-matrix rows (N * 32 bytes). For V in a flash attention this is each key's 8 d values per 16 bytes,
// exactly what one 16-byte copy of a cache row brings, so a producer can copy V without transposing it.
#include <cuda_bf16.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

#include "cuda/kernels/wgmma_ops.cuh"  // wgmma_rs_tb<64>: B MN-major (imm-trans-b 1)

#define CK(x)                                                                 \
  do {                                                                        \
    cudaError_t e = (x);                                                      \
    if (e != cudaSuccess) {                                                   \
      std::printf("cuda: %s at line %d\n", cudaGetErrorString(e), __LINE__); \
      std::exit(2);                                                           \
    }                                                                         \
  } while (0)

__host__ __device__ constexpr uint32_t mn_major_offset(int n, int k, int N) {
  return static_cast<uint32_t>((n % 8) * 2 + (k % 8) * 16 + (n / 8) * 128 + (k / 8) * (N / 8) * 128);
}

__device__ uint64_t descriptor(uint32_t smem_byte_address, uint32_t lbo, uint32_t sbo) {
  return ((smem_byte_address >> 4) & 0x3fff) | (static_cast<uint64_t>(lbo >> 4) << 16) | (static_cast<uint64_t>(sbo >> 4) << 32);
}

// N = 256 as four m64n64 products on 64-column slices of B: the slice starting at column 64 s is the same layout
// with the start address moved by 8 core matrices (s * 8 * 128 bytes), which this also checks.

// C [64, N] = A [64, K] . B [K, N] with B row-major [K, N] staged MN-major; one warpgroup.
template <int N>
__global__ void __launch_bounds__(128) probe_kernel(const __nv_bfloat16* a, const __nv_bfloat16* b, int K, bool swap,
                                                    float* c) {
  extern __shared__ __align__(128) uint8_t smem[];
  for (int e = threadIdx.x; e < K * N; e += blockDim.x) {
    *reinterpret_cast<__nv_bfloat16*>(smem + mn_major_offset(e % N, e / N, N)) = b[e];
  }
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
  __syncthreads();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, cq = lane % 4;
  const uint32_t base = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  const uint32_t along_n = 128, along_k = N * 16;
  const uint32_t lbo = swap ? along_k : along_n, sbo = swap ? along_n : along_k;
  auto pair_at = [&](int row, int k) { return *reinterpret_cast<const uint32_t*>(a + (16 * warp + row) * K + k); };
  for (int s = 0; s < N / 64; ++s) {
    float d[32];
    for (float& v : d) v = 0.0f;
    for (int k0 = 0; k0 < K; k0 += 16) {
      const uint32_t frag[4] = {pair_at(g, k0 + 2 * cq), pair_at(g + 8, k0 + 2 * cq), pair_at(g, k0 + 2 * cq + 8),
                                pair_at(g + 8, k0 + 2 * cq + 8)};
      asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
      imp::cuda::wgmma::wgmma_rs_tb<64>(d, frag, descriptor(base + mn_major_offset(64 * s, k0, N), lbo, sbo));
      asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
      asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
    }
    for (int j = 0; j < 8; ++j) {
      const int row = 16 * warp + g, col = 64 * s + 8 * j + 2 * cq;
      c[row * N + col] = d[4 * j];
      c[row * N + col + 1] = d[4 * j + 1];
      c[(row + 8) * N + col] = d[4 * j + 2];
      c[(row + 8) * N + col + 1] = d[4 * j + 3];
    }
  }
}

template <int N>
bool check(int K, bool swap) {
  std::mt19937 rng(11 + K + N);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<__nv_bfloat16> a(64 * K), b(static_cast<size_t>(K) * N);
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
  const int smem = 64 * 1024;  // >= K * N * 2 and >= what the wrong assignment reads (N / 8 steps of N * 16 bytes)
  CK(cudaFuncSetAttribute(probe_kernel<N>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  probe_kernel<N><<<1, 128, smem>>>(da, db, K, swap, dc);
  CK(cudaGetLastError());
  std::vector<float> c(64 * N);
  CK(cudaMemcpy(c.data(), dc, c.size() * 4, cudaMemcpyDeviceToHost));
  double worst = 0.0, scale = 0.0;
  for (int m = 0; m < 64; ++m) {
    for (int n = 0; n < N; ++n) {
      double ref = 0.0;
      for (int k = 0; k < K; ++k) ref += double(__bfloat162float(a[m * K + k])) * double(__bfloat162float(b[k * N + n]));
      worst = std::max(worst, std::fabs(ref - double(c[m * N + n])));
      scale = std::max(scale, std::fabs(ref));
    }
  }
  // bf16 products are exact in fp32; only the fp32 sums of K terms differ.
  const bool ok = worst <= 1e-5 * scale;
  std::printf("RS, B MN-major (trans-b), N = %d, K = %d, %s: max |err| %.3g of max |ref| %.3g: %s\n", N, K,
              swap ? "LBO = K step, SBO = N step" : "LBO = N step, SBO = K step", worst, scale, ok ? "ok" : "MISMATCH");
  cudaFree(da);
  cudaFree(db);
  cudaFree(dc);
  return ok;
}

int main() {
  int found = -1;
  for (bool swap : {false, true}) {
    bool ok = true;
    ok &= check<64>(16, swap);
    ok &= check<64>(64, swap);
    ok &= check<256>(64, swap);
    if (ok && found < 0) found = swap ? 1 : 0;
  }
  if (found < 0) {
    std::printf("no descriptor assignment matched: the MN-major layout above is not what wgmma reads\n");
    return 1;
  }
  std::printf("match: %s\n", found ? "LBO = the K step (N * 16 bytes), SBO = the N step (128 bytes)"
                                   : "LBO = the N step (128 bytes), SBO = the K step (N * 16 bytes)");
  return 0;
}
