#include "cuda/kernels/bandwidth.h"

#include "cuda/check.h"

namespace imp::cuda {
namespace {

constexpr int kBlocks = 132 * 8, kThreads = 512;

__global__ void read_sweep_kernel(const uint4* data, size_t count, uint32_t* sums) {
  uint32_t acc = 0;
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < count; i += stride) {
    const uint4 v = __ldcs(data + i);  // streaming: do not keep in L2
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  for (int o = 16; o > 0; o /= 2) acc ^= __shfl_xor_sync(0xffffffffu, acc, o);
  if (threadIdx.x % 32 == 0) atomicXor(sums + blockIdx.x, acc);
}

}  // namespace

int launch_read_sweep_blocks() { return kBlocks; }

void launch_read_sweep(const uint8_t* data, size_t bytes, uint32_t* sums, cudaStream_t stream) {
  if (bytes % 16 != 0 || reinterpret_cast<uintptr_t>(data) % 16 != 0) throw_invalid_launch("read_sweep: needs 16-byte alignment");
  read_sweep_kernel<<<kBlocks, kThreads, 0, stream>>>(reinterpret_cast<const uint4*>(data), bytes / 16, sums);
  IMP_CUDA_CHECK_LAUNCH();
}

}  // namespace imp::cuda
