// Per-block timestamps of the decode attention kernels for bench/experiments/attention_phase_probe.cu, which
// compiles attention_decode.cu and attention_decode_mma.cu with IMP_PHASE_PROBE: phase(kernel, i) has thread 0
// of the block stamp step i of kernel 0 (partial, either one) or 1 (combine); no-ops otherwise.
#pragma once

namespace imp::cuda::attention {
namespace {

#ifdef IMP_PHASE_PROBE
__device__ unsigned long long g_attention_phase[2][512][8];
__device__ __forceinline__ void phase(int kernel, int i) {
  if (threadIdx.x != 0) return;
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  g_attention_phase[kernel][(blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x][i] = t;
}
#else
__device__ __forceinline__ void phase(int, int) {}
#endif

}  // namespace
}  // namespace imp::cuda::attention
