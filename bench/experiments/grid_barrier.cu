// What does a grid-wide barrier cost on the H200? Prepared in session 4, NOT RUN YET (the device time was spent).
// The one-kernel hyper-connection read (a down GEMV, a grid barrier, an up GEMV) measured 26.6 us per read
// against 6.6 + 6.7 us for two kernels, cause unknown; a persistent decode kernel would rest on such barriers.
// Per launch of 324 blocks x 256 threads (the read's grid), each timed as a graph of 100 launches:
//   empty            the launch alone
//   barrier          one atomic-counter barrier (the read's: arrive with atomicAdd, poll a generation word)
//   barrier_sleep    the same, polling with __nanosleep(64)
//   barrier_cpasync  the same, with 80 B per thread of cp.async still in flight at the barrier (as in the read)
//   two_kernels      a 6.6 MB GEMV-like load kernel, then a second one (the read as two kernels)
//   fused            both loads issued first, the barrier between the two halves' use
// (The 13 MB of weights stay in L2 across the 100 launches: this isolates launches and barriers, not HBM.)
// Standalone: nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a bench/experiments/grid_barrier.cu
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

constexpr int kBlocks = 324, kThreads = 256;

__device__ __forceinline__ void grid_barrier(uint32_t* barrier, bool sleep) {
  __syncthreads();
  if (threadIdx.x == 0) {
    volatile uint32_t* generation = barrier + 1;
    const uint32_t seen = *generation;
    __threadfence();
    if (atomicAdd(barrier, 1u) == gridDim.x - 1) {
      atomicExch(barrier, 0u);
      __threadfence();
      atomicAdd(barrier + 1, 1u);
    } else {
      while (*generation == seen) {
        if (sleep) __nanosleep(64);
      }
    }
    __threadfence();
  }
  __syncthreads();
}

__global__ void empty_kernel() {}

__global__ void barrier_kernel(uint32_t* barrier, bool sleep) { grid_barrier(barrier, sleep); }

__global__ void barrier_cpasync_kernel(uint32_t* barrier, const uint4* src) {
  __shared__ uint4 stage[5][kThreads];
  for (int i = 0; i < 5; ++i) {
    const uint32_t dst = static_cast<uint32_t>(__cvta_generic_to_shared(&stage[i][threadIdx.x]));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst),
                 "l"(src + (static_cast<size_t>(blockIdx.x) * 5 + i) * kThreads + threadIdx.x)
                 : "memory");
  }
  asm volatile("cp.async.commit_group;\n" ::: "memory");
  grid_barrier(barrier, false);
  asm volatile("cp.async.wait_group 0;\n" ::: "memory");
}

// 6.6 MB over the grid: 5 loads of 16 bytes per thread, summed.
__device__ __forceinline__ uint32_t load5(const uint4* w, int part) {
  uint4 v[5];
  for (int i = 0; i < 5; ++i) v[i] = __ldg(w + ((static_cast<size_t>(part) * kBlocks + blockIdx.x) * 5 + i) * kThreads + threadIdx.x);
  uint32_t acc = 0;
  for (int i = 0; i < 5; ++i) acc ^= v[i].x ^ v[i].y ^ v[i].z ^ v[i].w;
  return acc;
}

__global__ void load_kernel(const uint4* w, int part, uint32_t* sink) {
  const uint32_t acc = load5(w, part);
  if (acc == 0x9e3779b9u) *sink = acc;
}

__global__ void fused_kernel(const uint4* w, uint32_t* barrier, uint32_t* sink) {
  uint4 second[5];
  for (int i = 0; i < 5; ++i) second[i] = __ldg(w + ((static_cast<size_t>(kBlocks) + blockIdx.x) * 5 + i) * kThreads + threadIdx.x);
  uint32_t acc = load5(w, 0);
  grid_barrier(barrier, false);
  for (int i = 0; i < 5; ++i) acc ^= second[i].x ^ second[i].y ^ second[i].z ^ second[i].w;
  if (acc == 0x9e3779b9u) *sink = acc;
}

template <typename Enqueue>
double per_launch_us(Enqueue&& enqueue) {
  cudaStream_t s;
  cudaStreamCreate(&s);
  cudaGraph_t g;
  cudaGraphExec_t e;
  cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
  for (int i = 0; i < 100; ++i) enqueue(s);
  cudaStreamEndCapture(s, &g);
  cudaGraphInstantiate(&e, g, 0);
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  std::vector<float> t;
  for (int r = 0; r < 6; ++r) {
    cudaEventRecord(a, s);
    cudaGraphLaunch(e, s);
    cudaEventRecord(b, s);
    cudaEventSynchronize(b);
    float ms;
    cudaEventElapsedTime(&ms, a, b);
    if (r) t.push_back(ms * 10.0f);  // us per launch
  }
  std::sort(t.begin(), t.end());
  cudaGraphExecDestroy(e);
  cudaGraphDestroy(g);
  cudaStreamDestroy(s);
  return t[t.size() / 2];
}

int main() {
  int per_sm = 0, sms = 0;
  cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fused_kernel, kThreads, 0);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  printf("resident blocks %d (grid %d)\n", per_sm * sms, kBlocks);
  uint32_t *barrier, *sink;
  cudaMalloc(&barrier, 8);
  cudaMemset(barrier, 0, 8);
  cudaMalloc(&sink, 4);
  const size_t bytes = 2ull * kBlocks * 5 * kThreads * 16;  // two 6.6 MB halves
  uint4* w;
  cudaMalloc(&w, bytes);
  cudaMemset(w, 1, bytes);
  printf("empty %.2f us\n", per_launch_us([&](cudaStream_t s) { empty_kernel<<<kBlocks, kThreads, 0, s>>>(); }));
  printf("barrier %.2f us\n", per_launch_us([&](cudaStream_t s) { barrier_kernel<<<kBlocks, kThreads, 0, s>>>(barrier, false); }));
  printf("barrier_sleep %.2f us\n", per_launch_us([&](cudaStream_t s) { barrier_kernel<<<kBlocks, kThreads, 0, s>>>(barrier, true); }));
  printf("barrier_cpasync %.2f us\n",
         per_launch_us([&](cudaStream_t s) { barrier_cpasync_kernel<<<kBlocks, kThreads, 0, s>>>(barrier, w); }));
  printf("two_kernels %.2f us\n", per_launch_us([&](cudaStream_t s) {
           load_kernel<<<kBlocks, kThreads, 0, s>>>(w, 0, sink);
           load_kernel<<<kBlocks, kThreads, 0, s>>>(w, 1, sink);
         }));
  printf("fused %.2f us\n", per_launch_us([&](cudaStream_t s) { fused_kernel<<<kBlocks, kThreads, 0, s>>>(w, barrier, sink); }));
  const cudaError_t status = cudaDeviceSynchronize();
  printf("status %s\n", cudaGetErrorString(status));
  return status == cudaSuccess ? 0 : 1;
}
