// Device-side random fill for dummy weights (full-scale benchmarks without a checkpoint): bytes uniform in
// [lo, hi] from a counter-based hash, so any size fills at memory speed and the same seed gives the same data.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace imp::cuda {

void launch_fill_random_bytes(uint8_t* data, size_t bytes, uint64_t seed, uint8_t lo, uint8_t hi, cudaStream_t stream);

}  // namespace imp::cuda
