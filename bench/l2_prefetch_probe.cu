// Does asking L2 for weights ahead (src/cuda/kernels/l2_prefetch.h) make the next GEMV faster? A GEMV of the
// GDN out_proj shape (2560 x 6144 bf16, 31.5 MB) timed after: an L2 flush (cold), a previous run (warm), bulk
// prefetches (cp.async.bulk.prefetch.L2, as the decode kernels issue them), per-line prefetch.global.L2, and a
// kernel that loads every byte; then the decode pattern in a graph with programmatic dependent launch: a
// ~10 us latency-bound kernel followed by the GEMV, 20 times over different weights, with and without the
// latency-bound kernel asking L2 for the GEMV's weights.
#include "l2_prefetch_probe.h"

#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

#include "cuda/check.h"
#include "cuda/kernels/dense.h"
#include "cuda/kernels/device_math.cuh"
#include "cuda/kernels/l2_prefetch.h"
#include "cuda/kernels/random_fill.h"
#include "cuda/launch.h"

namespace imp::bench {
namespace {

using cuda::L2Prefetch;

constexpr int kBlocks = 132;

__global__ void bulk_prefetch_kernel(L2Prefetch p) { cuda::l2_prefetch_share(p, blockIdx.x, gridDim.x); }

__global__ void line_prefetch_kernel(const char* data, size_t bytes) {
  for (size_t at = (blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x) * 128; at < bytes;
       at += static_cast<size_t>(gridDim.x) * blockDim.x * 128) {
    asm volatile("prefetch.global.L2 [%0];" ::"l"(data + at));
  }
}

__global__ void touch_kernel(const uint4* data, size_t count, uint32_t* sink) {
  uint32_t acc = 0;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const uint4 v = __ldcg(data + i);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x12345678u) *sink = acc;  // keeps the loads
}

// A latency-bound stand-in (spins `cycles`), optionally asking L2 for p first; PDL like the decode kernels.
__global__ void spin_kernel(L2Prefetch p, long long cycles) {
  cuda::l2_prefetch_share(p, blockIdx.x, gridDim.x);
  cuda::pdl_begin();
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

double elapsed_us(cudaEvent_t a, cudaEvent_t b) {
  float ms = 0;
  IMP_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
  return ms * 1000.0;
}

template <typename T>
T* device_alloc(size_t count) {  // (device_buffer.h is C++20; this file is nvcc's C++17)
  void* p = nullptr;
  IMP_CUDA_CHECK(cudaMalloc(&p, count * sizeof(T)));
  return static_cast<T*>(p);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

L2ProbeResult l2_prefetch_probe() {
  const int n = 2560, k = 6144, copies = 20;
  const size_t bytes = static_cast<size_t>(n) * k * 2;
  std::vector<uint16_t*> w;
  for (int i = 0; i < copies; ++i) {
    w.push_back(device_alloc<uint16_t>(static_cast<size_t>(n) * k));
    cuda::launch_fill_random_bytes(reinterpret_cast<uint8_t*>(w.back()), bytes, 900 + i, 0x00, 0x3c, nullptr);
  }
  float* x = device_alloc<float>(k);
  float* y = device_alloc<float>(n);
  IMP_CUDA_CHECK(cudaMemset(x, 0, k * sizeof(float)));
  const size_t flush_bytes = 512ull << 20;
  uint8_t* flush = device_alloc<uint8_t>(flush_bytes);
  uint32_t* sink = device_alloc<uint32_t>(1);
  cudaEvent_t a, b;
  IMP_CUDA_CHECK(cudaEventCreate(&a));
  IMP_CUDA_CHECK(cudaEventCreate(&b));
  const L2Prefetch whole{w[0], bytes};

  auto timed_gemv_after = [&](auto&& prepare) {
    std::vector<double> times;
    for (int r = 0; r < 9; ++r) {
      IMP_CUDA_CHECK(cudaMemset(flush, r, flush_bytes));  // evicts L2
      prepare();
      IMP_CUDA_CHECK(cudaDeviceSynchronize());
      std::this_thread::sleep_for(std::chrono::microseconds(200));  // prefetches have no completion: let them land
      IMP_CUDA_CHECK(cudaEventRecord(a));
      cuda::launch_gemv_bf16(w[0], x, 1, n, k, y, nullptr);
      IMP_CUDA_CHECK(cudaEventRecord(b));
      IMP_CUDA_CHECK(cudaEventSynchronize(b));
      times.push_back(elapsed_us(a, b));
    }
    return median(times);
  };
  L2ProbeResult out;
  out.gemv_bytes = static_cast<double>(bytes);
  out.cold_us = timed_gemv_after([] {});
  out.warm_us = timed_gemv_after([&] { cuda::launch_gemv_bf16(w[0], x, 1, n, k, y, nullptr); });
  out.bulk_prefetch_us = timed_gemv_after([&] { bulk_prefetch_kernel<<<kBlocks, 32>>>(whole); });
  out.line_prefetch_us = timed_gemv_after([&] {
    line_prefetch_kernel<<<kBlocks * 4, 256>>>(reinterpret_cast<const char*>(w[0]), bytes);
  });
  out.touch_us = timed_gemv_after([&] {
    touch_kernel<<<kBlocks * 4, 256>>>(reinterpret_cast<const uint4*>(w[0]), bytes / 16, sink);
  });

  // The decode pattern: spin (~10 us at ~1.9 GHz) -> GEMV, over 20 weights, in one PDL graph.
  cudaStream_t stream;
  IMP_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  auto pattern_us = [&](bool prefetch) {
    cudaGraph_t g;
    cudaGraphExec_t e;
    IMP_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    {
      const cuda::PdlScope pdl;
      for (int i = 0; i < copies; ++i) {
        const L2Prefetch p = prefetch ? L2Prefetch{w[i], bytes} : L2Prefetch{};
        cuda::launch_kernel(spin_kernel, kBlocks, 32, 0, stream, 1, p, 19000LL);
        cuda::launch_gemv_bf16(w[i], x, 1, n, k, y, stream);
      }
    }
    IMP_CUDA_CHECK(cudaStreamEndCapture(stream, &g));
    IMP_CUDA_CHECK(cudaGraphInstantiate(&e, g, 0));
    std::vector<double> times;
    for (int r = 0; r < 9; ++r) {
      IMP_CUDA_CHECK(cudaMemsetAsync(flush, r, flush_bytes, stream));
      IMP_CUDA_CHECK(cudaEventRecord(a, stream));
      IMP_CUDA_CHECK(cudaGraphLaunch(e, stream));
      IMP_CUDA_CHECK(cudaEventRecord(b, stream));
      IMP_CUDA_CHECK(cudaEventSynchronize(b));
      times.push_back(elapsed_us(a, b) / copies);
    }
    IMP_CUDA_CHECK(cudaGraphExecDestroy(e));
    IMP_CUDA_CHECK(cudaGraphDestroy(g));
    return median(times);
  };
  out.pattern_plain_us = pattern_us(false);
  out.pattern_prefetch_us = pattern_us(true);
  IMP_CUDA_CHECK(cudaStreamDestroy(stream));
  IMP_CUDA_CHECK(cudaEventDestroy(a));
  IMP_CUDA_CHECK(cudaEventDestroy(b));
  for (uint16_t* p : w) IMP_CUDA_CHECK(cudaFree(p));
  for (void* p : {static_cast<void*>(x), static_cast<void*>(y), static_cast<void*>(flush), static_cast<void*>(sink)}) {
    IMP_CUDA_CHECK(cudaFree(p));
  }
  return out;
}

}  // namespace imp::bench
