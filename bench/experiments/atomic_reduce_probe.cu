// How fast can many blocks sum their partial vectors into one vector of the hidden size through L2 atomics?
// A fused decode MoE (gate/up and down of a slice of the intermediate rows in one block, no down kernel) would
// need it: each of B blocks holds a partial of all 2560 outputs. This probe times, in a PDL graph of 48 launches
// as in decode, B blocks of 256 threads that each add 2560 values into one 2560-vector, per mode:
//   none   computes the values and writes nothing (the baseline),
//   store  writes its partial row [B][2560] (what a reduction by a later kernel would start from),
//   f32    red.global.add.f32 per value (order-dependent, not deterministic),
//   f32x4  red.global.add.v4.f32 (sm_90),
//   u64    red.global.add.u64 of the value in 32.32 fixed point (integer sums: the same bits in any order).
// Build and run on the GPU machine from the repository root:
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -Isrc -Ibench/experiments \
//     bench/experiments/atomic_reduce_probe.cu -o build/probes/atomic_reduce_probe && build/probes/atomic_reduce_probe
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>

#include "cuda/kernels/device_math.cuh"
#include "probe_graph.cuh"

using namespace imp::cuda;

constexpr int kOut = 2560, kThreads = 256, kPer = kOut / kThreads;

enum class Mode { kNone, kStore, kF32, kF32x4, kU64 };

template <Mode kMode>
__global__ void __launch_bounds__(kThreads) reduce_kernel(float* sum, unsigned long long* fixed, float* rows, int salt) {
  pdl_trigger();
  pdl_wait();
  float v[kPer];
#pragma unroll
  for (int i = 0; i < kPer; ++i) v[i] = __sinf(0.001f * (blockIdx.x * 7 + threadIdx.x * 13 + i * 101 + salt));
  if constexpr (kMode == Mode::kNone) {
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < kPer; ++i) s += v[i];
    if (s == 12345.0f) sum[0] = s;
  } else if constexpr (kMode == Mode::kStore) {
#pragma unroll
    for (int i = 0; i < kPer; ++i) rows[static_cast<size_t>(blockIdx.x) * kOut + i * kThreads + threadIdx.x] = v[i];
  } else if constexpr (kMode == Mode::kF32) {
#pragma unroll
    for (int i = 0; i < kPer; ++i) atomicAdd(sum + i * kThreads + threadIdx.x, v[i]);
  } else if constexpr (kMode == Mode::kF32x4) {
    // Thread t adds elements 4t..4t+3 (t < 640 over a block's first 2.5 passes): 16-byte red per thread.
    for (int c = threadIdx.x; c < kOut / 4; c += kThreads) {
      const int i = (c / kThreads) * 4;  // reuse the values as they fall
      asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(sum + 4 * c), "f"(v[i % kPer]),
                   "f"(v[(i + 1) % kPer]), "f"(v[(i + 2) % kPer]), "f"(v[(i + 3) % kPer])
                   : "memory");
    }
  } else {
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      const long long q = __float2ll_rn(v[i] * 4294967296.0f);
      atomicAdd(fixed + i * kThreads + threadIdx.x, static_cast<unsigned long long>(q));
    }
  }
}

template <Mode kMode>
double time_mode(int blocks, float* sum, unsigned long long* fixed, float* rows) {
  return time_graph([&](cudaStream_t s, int i) { launch_pdl(reduce_kernel<kMode>, blocks, kThreads, 0, s, sum, fixed, rows, i); },
                    48, 20);
}

int main() {
  float *sum = nullptr, *rows = nullptr;
  unsigned long long* fixed = nullptr;
  CHECK(cudaMalloc(&sum, kOut * sizeof(float)));
  CHECK(cudaMalloc(&fixed, kOut * sizeof(unsigned long long)));
  CHECK(cudaMalloc(&rows, static_cast<size_t>(1024) * kOut * sizeof(float)));
  CHECK(cudaMemset(sum, 0, kOut * sizeof(float)));
  CHECK(cudaMemset(fixed, 0, kOut * sizeof(unsigned long long)));
  std::printf("us per launch (median of 20 replays of 48 PDL launches), 256 threads, 2560 values per block\n");
  std::printf("%6s %8s %8s %8s %8s %8s\n", "blocks", "none", "store", "f32", "f32x4", "u64");
  for (int blocks : {100, 132, 200, 264, 400}) {
    std::printf("%6d %8.2f %8.2f %8.2f %8.2f %8.2f\n", blocks, time_mode<Mode::kNone>(blocks, sum, fixed, rows),
                time_mode<Mode::kStore>(blocks, sum, fixed, rows), time_mode<Mode::kF32>(blocks, sum, fixed, rows),
                time_mode<Mode::kF32x4>(blocks, sum, fixed, rows), time_mode<Mode::kU64>(blocks, sum, fixed, rows));
  }
  return 0;
}
