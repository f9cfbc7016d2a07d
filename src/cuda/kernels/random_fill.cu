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

__global__ void fill_random_bytes_strided_kernel(uint8_t* data, size_t regions, size_t stride, size_t region_bytes,
                                                 uint64_t seed, uint32_t lo, uint32_t span) {
  const size_t total = regions * region_bytes, step = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < total; i += step) {
    const uint64_t r = mix64(seed ^ (i * 0xD1B54A32D192ED03ull));
    data[(i / region_bytes) * stride + i % region_bytes] = static_cast<uint8_t>(lo + (r & 0xffffu) % span);
  }
}

__global__ void fill_bf16_kernel(uint16_t* data, size_t count, uint64_t seed, float lo, float width) {
  const size_t step = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < count; i += step) {
    const uint64_t r = mix64(seed ^ (i * 0xD1B54A32D192ED03ull));
    const float u = static_cast<float>(r >> 40) * (1.0f / 16777216.0f);  // [0, 1)
    data[i] = static_cast<uint16_t>(__float_as_uint(lo + u * width) >> 16);
  }
}

}  // namespace

void launch_fill_random_bytes_strided(uint8_t* data, size_t regions, size_t stride, size_t region_bytes, uint64_t seed,
                                      uint8_t lo, uint8_t hi, cudaStream_t stream) {
  if (hi < lo || region_bytes > stride) throw_invalid_launch("fill_random_bytes_strided: bad range or region");
  fill_random_bytes_strided_kernel<<<132 * 8, 256, 0, stream>>>(data, regions, stride, region_bytes, seed, lo,
                                                                static_cast<uint32_t>(hi - lo) + 1);
  IMP_CUDA_CHECK_LAUNCH();
}

void launch_fill_bf16(uint16_t* data, size_t count, uint64_t seed, float mean, float std, cudaStream_t stream) {
  const float half_width = 1.7320508f * std;
  fill_bf16_kernel<<<132 * 8, 256, 0, stream>>>(data, count, seed, mean - half_width, 2.0f * half_width);
  IMP_CUDA_CHECK_LAUNCH();
}

void launch_fill_random_bytes(uint8_t* data, size_t bytes, uint64_t seed, uint8_t lo, uint8_t hi, cudaStream_t stream) {
  if (hi < lo) throw_invalid_launch("fill_random_bytes: hi < lo");
  fill_random_bytes_kernel<<<132 * 8, 256, 0, stream>>>(data, bytes, seed, lo, static_cast<uint32_t>(hi - lo) + 1);
  IMP_CUDA_CHECK_LAUNCH();
}

}  // namespace imp::cuda
