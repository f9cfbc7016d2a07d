// The building block the MoE prefill GEMM needs next (docs/cuda_engine.md, "Next steps"): one warpgroup's
// wgmma.mma_async m64nNk16 (bf16 in, fp32 accumulate) with both operands K-major in shared memory, no swizzle,
// against a double-precision product on the host. It checks the shared-memory layout, the matrix descriptors and
// the accumulator fragment layout below before a real kernel is built on them; it prints the largest error per
// shape and exits non-zero on a mismatch. Written in session 7 after the last device visit: not yet run.
// Build: nvcc -O3 -std=c++20 -gencode=arch=compute_90a,code=sm_90a bench/experiments/wgmma_probe.cu -o build/exp/wgmma_probe
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

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

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

template <int N>
__device__ void wgmma_bf16(float (&d)[N / 2], uint64_t desc_a, uint64_t desc_b);

// m64n64k16: 32 accumulators per thread. scale-d = 1 (accumulate), scale-a = scale-b = 1, no transposes.
template <>
__device__ void wgmma_bf16<64>(float (&d)[32], uint64_t desc_a, uint64_t desc_b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
      "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
      "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, %32, %33, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
        "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),
        "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),
        "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "l"(desc_a), "l"(desc_b));
}

// C [64, N] = A [64, K] . B [N, K]^T, one warpgroup, everything in shared memory at once (K <= 256).
template <int N>
__global__ void __launch_bounds__(128) probe_kernel(const __nv_bfloat16* a, const __nv_bfloat16* b, int K, bool swap, float* c) {
  extern __shared__ __align__(128) uint8_t smem[];
  uint8_t* sa = smem;
  uint8_t* sb = smem + 64 * K * 2;
  for (int e = threadIdx.x; e < 64 * K; e += blockDim.x) {
    const int m = e / K, k = e % K;
    *reinterpret_cast<__nv_bfloat16*>(sa + kmajor_offset(m, k, 64)) = a[e];
  }
  for (int e = threadIdx.x; e < N * K; e += blockDim.x) {
    const int n = e / K, k = e % K;
    *reinterpret_cast<__nv_bfloat16*>(sb + kmajor_offset(n, k, N)) = b[e];
  }
  // Generic-proxy stores must be visible to the async proxy that wgmma reads shared memory through.
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
  __syncthreads();

  float d[N / 2];
  for (float& v : d) v = 0.0f;
  const uint32_t base_a = static_cast<uint32_t>(__cvta_generic_to_shared(sa));
  const uint32_t base_b = static_cast<uint32_t>(__cvta_generic_to_shared(sb));
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
  for (int k0 = 0; k0 < K; k0 += 16) {
    wgmma_bf16<N>(d, descriptor(base_a + kmajor_offset(0, k0, 64), swap), descriptor(base_b + kmajor_offset(0, k0, N), swap));
  }
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, cq = lane % 4;
  for (int j = 0; j < N / 8; ++j) {
    const int row = 16 * warp + g, col = 8 * j + 2 * cq;
    c[row * N + col] = d[4 * j];
    c[row * N + col + 1] = d[4 * j + 1];
    c[(row + 8) * N + col] = d[4 * j + 2];
    c[(row + 8) * N + col + 1] = d[4 * j + 3];
  }
}

template <int N>
bool check(int K, bool swap) {
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
  const int smem = (64 + N) * K * 2;
  CK(cudaFuncSetAttribute(probe_kernel<N>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  probe_kernel<N><<<1, 128, smem>>>(da, db, K, swap, dc);
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
  std::printf("m64n%dk16 x %d steps, %s: max |err| %.3g of max |ref| %.3g: %s\n", N, K / 16,
              swap ? "LBO = M/N step, SBO = K step" : "LBO = K step, SBO = M/N step", worst, scale, ok ? "ok" : "MISMATCH");
  cudaFree(da);
  cudaFree(db);
  cudaFree(dc);
  return ok;
}

int main() {
  bool any = false;
  for (bool swap : {false, true}) {
    bool ok = true;
    ok &= check<64>(16, swap);   // one k step: layout and fragments
    ok &= check<64>(64, swap);   // descriptor advance over k steps
    ok &= check<64>(256, swap);  // a 256-wide K, as the MoE GEMM's supertiles would stage it
    any |= ok;
  }
  return any ? 0 : 1;
}
