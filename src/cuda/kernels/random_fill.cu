#include "cuda/kernels/random_fill.h"

#include "cuda/check.h"

namespace imp::cuda {
namespace {

__device__ __forceinline__ uint64_t mix64(uint64_t v) {
  v += 0x9E3779B97F4A7C15ull;
  v = (v ^ (v >> 30)) * 0xBF58476D1CE4E5B9ull;
  v = (v ^ (v >> 27)) * 0x94D049BB133111EBull;
  return v ^ (v >> 31);
}

__global__ void fill_random_bytes_kernel(uint8_t* data, size_t bytes, uint64_t seed, uint32_t lo, uint32_t span) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t word = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; word * 8 < bytes; word += stride) {
    const uint64_t r = mix64(seed ^ (word * 0xD1B54A32D192ED03ull));
    for (int b = 0; b < 8 && word * 8 + b < bytes; ++b) {
      data[word * 8 + b] = static_cast<uint8_t>(lo + ((r >> (8 * b)) & 0xffu) % span);
    }
  }
}

}  // namespace

void launch_fill_random_bytes(uint8_t* data, size_t bytes, uint64_t seed, uint8_t lo, uint8_t hi, cudaStream_t stream) {
  if (hi < lo) throw_invalid_launch("fill_random_bytes: hi < lo");
  fill_random_bytes_kernel<<<132 * 8, 256, 0, stream>>>(data, bytes, seed, lo, static_cast<uint32_t>(hi - lo) + 1);
  IMP_CUDA_CHECK_LAUNCH();
}

}  // namespace imp::cuda
