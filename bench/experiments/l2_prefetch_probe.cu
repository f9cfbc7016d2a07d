// Can a latency-bound kernel's idle HBM time be spent loading the next GEMV's weights into L2? In decode a GDN
// layer spends ~40 of its ~86 us in kernels that leave HBM idle (hyper-connection reads, the recurrent step, the
// router), then streams in_proj (84 MB) and out_proj (31.5 MB) at ~4 TB/s. Session 4 tried L2 prefetches with the
// GEMV of that time (then kernel-bound: 17.7 us even with its weights in L2) and saw no gain; the GEMV now streams
// at ~4.06 TB/s alone. This probe measures, in a PDL graph as in decode:
//   1. the engine's block GEMV on an L2-resident matrix (the same 16-24 MB every launch) against a cold one, i.e.
//      how much faster the L2-served part of a GEMV can be;
//   2. pairs "latency-bound predecessor (320 x 256 threads, S ns after its wait) -> GEMV" where the predecessor
//      first prefetches the first P MB of the GEMV's weights (line prefetches with evict_last or bulk L2
//      prefetches), the GEMV's matrices rotating over three copies so that nothing else is L2-warm.
// Build and run on the GPU machine from the repository root:
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -Isrc bench/experiments/l2_prefetch_probe.cu \
//     -o build/exp/l2_prefetch_probe && build/exp/l2_prefetch_probe
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

#include "cuda/kernels/device_math.cuh"
#include "cuda/kernels/gemv_row.cuh"
#include "probe_graph.cuh"

using namespace imp::cuda;

// The engine's kernel (dense.cu): 128 threads, one row per warp.
__global__ void block_kernel(const uint16_t* w, const float* x, int n, int k, float* y) {
  pdl_trigger();
  gemv_rows<1>(w, n, k, 1, PlainX{x, k}, [&](int row, const float (&acc)[1]) { y[row] = acc[0]; });
}

enum class Prefetch { kNone, kLine, kLineEvictLast, kBulk };

// A latency-bound predecessor like the hyper-connection reads: 320 blocks of 256 threads, spin_ns of waiting after
// its PDL wait. Before that wait (weights depend on nothing) it prefetches bytes [0, prefetch_bytes) of `next`:
// one 128-byte line per instruction spread over every thread, or one bulk prefetch of 16 KB per thread 0..n.
template <Prefetch kMode>
__global__ void __launch_bounds__(256) pred_kernel(const uint8_t* next, size_t prefetch_bytes, float* out, long long spin_ns) {
  pdl_trigger();
  const size_t threads = static_cast<size_t>(gridDim.x) * blockDim.x;
  const size_t tid = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if constexpr (kMode == Prefetch::kLine || kMode == Prefetch::kLineEvictLast) {
    for (size_t off = tid * 128; off < prefetch_bytes; off += threads * 128) {
      if constexpr (kMode == Prefetch::kLine) {
        asm volatile("prefetch.global.L2 [%0];" ::"l"(next + off));
      } else {
        asm volatile("prefetch.global.L2::evict_last [%0];" ::"l"(next + off));
      }
    }
  } else if constexpr (kMode == Prefetch::kBulk) {
    constexpr size_t kChunk = 16384;
    for (size_t off = tid * kChunk; off < prefetch_bytes; off += threads * kChunk) {
      const uint32_t bytes = static_cast<uint32_t>(prefetch_bytes - off < kChunk ? prefetch_bytes - off : kChunk);
      asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(next + off), "r"(bytes) : "memory");
    }
  }
  pdl_wait();
  long long t0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  long long t = t0;
  while (t - t0 < spin_ns) asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  if (t == 0) out[threadIdx.x] = 1.0f;
}

uint16_t* random_matrix(size_t elems, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<uint32_t> bits(0, 0xffff);
  std::vector<uint16_t> h(elems);
  for (auto& v : h) v = static_cast<uint16_t>((bits(rng) & 0x807f) | 0x3c00);  // |w| in [2^-7, 2^-6)
  uint16_t* d;
  CHECK(cudaMalloc(&d, elems * 2));
  CHECK(cudaMemcpy(d, h.data(), elems * 2, cudaMemcpyHostToDevice));
  return d;
}

constexpr int kK = 2560;
float* x_dev;
float* y_dev;
float* pred_out;

unsigned gemv_blocks(int n) { return static_cast<unsigned>((n + kGemvWarps - 1) / kGemvWarps); }

// GEMV alone, 20 launches per graph, over `copies` matrices in rotation (1: the same matrix, L2-warm if it fits).
double gemv_alone(uint16_t* const* w, int copies, int n) {
  return time_graph([&](cudaStream_t s, int i) {
    launch_pdl(block_kernel, gemv_blocks(n), kGemvThreads, size_t{0}, s, (const uint16_t*)w[i % copies], (const float*)x_dev, n,
               kK, y_dev);
  }, 21, 10);
}

template <Prefetch kMode>
double pair(uint16_t* const* w, int copies, int n, size_t prefetch_bytes, long long spin_ns) {
  return time_graph([&](cudaStream_t s, int i) {
    const uint16_t* m = w[i % copies];
    launch_pdl(pred_kernel<kMode>, 320u, 256u, size_t{0}, s, reinterpret_cast<const uint8_t*>(m), prefetch_bytes, pred_out, spin_ns);
    launch_pdl(block_kernel, gemv_blocks(n), kGemvThreads, size_t{0}, s, m, (const float*)x_dev, n, kK, y_dev);
  }, 21, 10);
}

int main() {
  CHECK(cudaMalloc(&x_dev, kK * 4));
  std::vector<float> hx(kK);
  std::mt19937 rng(7);
  for (auto& v : hx) v = static_cast<float>(rng() % 65536) / 65536.0f - 0.5f;
  CHECK(cudaMemcpy(x_dev, hx.data(), kK * 4, cudaMemcpyHostToDevice));
  CHECK(cudaMalloc(&y_dev, 16480 * 4));
  CHECK(cudaMalloc(&pred_out, 256 * 4));
  int l2 = 0, persist = 0;
  CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0));
  CHECK(cudaDeviceGetAttribute(&persist, cudaDevAttrMaxPersistingL2CacheSize, 0));
  std::printf("L2 %.1f MiB, max persisting %.1f MiB\n", l2 / 1048576.0, persist / 1048576.0);

  // 1. L2-served GEMV: the same matrix every launch against three in rotation.
  for (int n : {3200, 6144, 9600}) {
    uint16_t* w[3];
    for (int c = 0; c < 3; ++c) w[c] = random_matrix(static_cast<size_t>(n) * kK, 11 + c);
    const double mb = static_cast<double>(n) * kK * 2 / 1e6;
    const double same = gemv_alone(w, 1, n), cold = gemv_alone(w, 3, n);
    std::printf("GEMV %d x %d (%.1f MB): same matrix %.2f us (%.2f TB/s), three in rotation %.2f us (%.2f TB/s)\n", n,
                kK, mb, same, mb / same, cold, mb / cold);  // MB / us = TB/s
    for (auto* p : w) CHECK(cudaFree(p));
  }

  // 2. predecessor -> in_proj-shaped GEMV (16480 x 2560, 84.4 MB), three copies in rotation.
  const int n = 16480;
  uint16_t* w[3];
  for (int c = 0; c < 3; ++c) w[c] = random_matrix(static_cast<size_t>(n) * kK, 21 + c);
  const double alone = gemv_alone(w, 3, n);
  std::printf("in_proj GEMV alone (rotating): %.2f us\n", alone);
  for (long long spin : {4000LL, 8000LL}) {
    const double base = pair<Prefetch::kNone>(w, 3, n, 0, spin);
    std::printf("spin %lld ns: pair without prefetch %.2f us\n", spin, base);
    for (size_t mb : {8, 16, 24, 32, 40}) {
      const size_t bytes = mb << 20;
      const double line = pair<Prefetch::kLine>(w, 3, n, bytes, spin);
      const double last = pair<Prefetch::kLineEvictLast>(w, 3, n, bytes, spin);
      const double bulk = pair<Prefetch::kBulk>(w, 3, n, bytes, spin);
      std::printf("  prefetch %2zu MiB: line %.2f (%+.2f), line evict_last %.2f (%+.2f), bulk %.2f (%+.2f) us\n", mb,
                  line, line - base, last, last - base, bulk, bulk - base);
    }
  }
  for (auto* p : w) CHECK(cudaFree(p));
  return 0;
}
