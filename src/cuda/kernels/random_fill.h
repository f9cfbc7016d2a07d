// Device-side random fill for dummy weights (full-scale benchmarks without a checkpoint): bytes uniform in
// [lo, hi] from a counter-based hash, so any size fills at memory speed and the same seed gives the same data.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace imp::cuda {

void launch_fill_random_bytes(uint8_t* data, size_t bytes, uint64_t seed, uint8_t lo, uint8_t hi, cudaStream_t stream);

// The same over `regions` regions of `region_bytes` each, `stride` bytes apart (e.g. the scale blocks of
// every slot in an expert pool).
void launch_fill_random_bytes_strided(uint8_t* data, size_t regions, size_t stride, size_t region_bytes, uint64_t seed,
                                      uint8_t lo, uint8_t hi, cudaStream_t stream);

// bf16 values uniform in [mean - sqrt(3) std, mean + sqrt(3) std] (mean and standard deviation as given).
void launch_fill_bf16(uint16_t* data, size_t count, uint64_t seed, float mean, float std, cudaStream_t stream);

}  // namespace imp::cuda
