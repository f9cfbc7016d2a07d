// Streamed decode GEMV for projections with many rows and K <= kStreamMaxK (one fp32 input row): one 256-thread
// block per SM for the whole kernel; each warp owns a contiguous run of rows and streams their weights through a
// ring of kStreamStages rows in shared memory by cp.async (the first stages before the PDL wait: weights never
// depend on an earlier kernel), with its lanes' share of x in registers. Rows stay in flight until the last one,
// where the 128-thread kernel of gemv_row.cuh ramps up and drains in waves of short blocks (16480 x 2560 at 3.55
// TB/s against 4.50 for the 248320-row LM head). Each lane reads back only the chunks it copied, so no lane waits
// for another's copies; its dot visits the same chunks in the same order with the same expression as
// bf16_row_dots_range without split-K, so every row's value is bit-identical to the 128-thread kernel's.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/check.h"
#include "cuda/kernels/device_math.cuh"
#include "cuda/kernels/gemv_row.cuh"

namespace imp::cuda {

constexpr int kStreamThreads = 256;
constexpr int kStreamWarps = kStreamThreads / kWarp;
constexpr int kStreamStages = 4;
constexpr int kStreamMaxK = 2560;                          // x in registers: K / 256 chunks of 8 per lane
constexpr int kStreamLaneChunks = kStreamMaxK / 8 / kWarp;  // 10
constexpr size_t kStreamSmemBytes = static_cast<size_t>(kStreamWarps) * kStreamStages * kStreamMaxK * 2;  // 160 KB
constexpr int kStreamMinRowsPerWarp = 8;  // below this the ring never fills: the 128-thread kernel serves

// The warp's rows [first, last) of n over `warps` warps in all (contiguous runs, sizes differing by at most one).
__device__ __forceinline__ void streamed_row_range(int n, int warps, int& first, int& last) {
  const int w = blockIdx.x * kStreamWarps + static_cast<int>(threadIdx.x) / kWarp;
  first = static_cast<int>(static_cast<int64_t>(w) * n / warps);
  last = static_cast<int>(static_cast<int64_t>(w + 1) * n / warps);
}

// Every row r in [first, last) of W [n, k] times x: epilogue(r, dot) in every lane (warp-summed dots), rows in order.
template <class Epilogue>
__device__ __forceinline__ void gemv_streamed_rows(const uint16_t* weight, const float* x, int k, int first, int last,
                                                   uint8_t* ring, Epilogue epilogue) {
  const int lane = threadIdx.x % kWarp, chunks = k / 8;
  const int row_bytes = k * 2;
  auto issue = [&](int r, int stage) {  // one commit group per call, empty past the last row
    if (r < last) {
      const uint8_t* src = reinterpret_cast<const uint8_t*>(weight + static_cast<size_t>(r) * k);
      uint8_t* dst = ring + stage * row_bytes;
#pragma unroll
      for (int i = 0; i < kStreamLaneChunks; ++i) {
        const int c = lane + i * kWarp;
        if (c < chunks) cp_async16(dst + 16 * c, src + 16 * c);
      }
    }
    cp_async_commit();
  };
#pragma unroll
  for (int s = 0; s < kStreamStages; ++s) issue(first + s, s);
  pdl_wait();
  float xr[kStreamLaneChunks][8];
#pragma unroll
  for (int i = 0; i < kStreamLaneChunks; ++i) {
    const int c = lane + i * kWarp;
    if (c < chunks) {
      const float4 a = *reinterpret_cast<const float4*>(x + 8 * c);
      const float4 b = *reinterpret_cast<const float4*>(x + 8 * c + 4);
      xr[i][0] = a.x, xr[i][1] = a.y, xr[i][2] = a.z, xr[i][3] = a.w;
      xr[i][4] = b.x, xr[i][5] = b.y, xr[i][6] = b.z, xr[i][7] = b.w;
    }
  }
  int stage = 0;
  for (int r = first; r < last; ++r) {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(kStreamStages - 1) : "memory");  // this lane's copies of row r
    const uint8_t* src = ring + stage * row_bytes;
    float acc = 0.0f;
#pragma unroll
    for (int i = 0; i < kStreamLaneChunks; ++i) {
      const int c = lane + i * kWarp;
      if (c < chunks) acc += bf16x8_dot(*reinterpret_cast<const uint4*>(src + 16 * c), xr[i]);
    }
    issue(r + kStreamStages, stage);  // the stage is free: its words are in this lane's sums already
    stage = stage + 1 == kStreamStages ? 0 : stage + 1;
    epilogue(r, warp_sum(acc));
  }
  cp_async_wait_all();
}

// Host side. The device's SM count, queried once: the streamed kernels run one block per SM.
inline int streamed_sm_count() {
  static const int count = [] {
    int device = 0, sms = 0;
    IMP_CUDA_CHECK(cudaGetDevice(&device));
    IMP_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    return sms;
  }();
  return count;
}

// Whether a one-row GEMV of n x k takes the streamed kernel: k fits the registers and every warp gets rows to stream.
inline bool gemv_streams(int n, int k) {
  return k % 8 == 0 && k <= kStreamMaxK && n >= kStreamMinRowsPerWarp * kStreamWarps * streamed_sm_count();
}

inline size_t streamed_smem_bytes(int k) { return static_cast<size_t>(kStreamWarps) * kStreamStages * k * 2; }

// The grid of a streamed kernel (one block per SM), after raising its shared-memory limit once per kernel (in
// relaxed capture mode: the first decode step may be being captured).
template <class Kernel>
unsigned streamed_gemv_blocks(Kernel kernel) {
  static const bool raised = [kernel] {
    cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    IMP_CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&mode));
    const cudaError_t status =
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kStreamSmemBytes));
    IMP_CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&mode));
    IMP_CUDA_CHECK(status);
    return true;
  }();
  (void)raised;
  return static_cast<unsigned>(streamed_sm_count());
}

}  // namespace imp::cuda
