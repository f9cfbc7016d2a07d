// A streaming read of device memory for the roofline: every byte read once with 16-byte loads, one value
// written per block (so the read cannot be optimised away).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace imp::cuda {

// data: bytes % 16 == 0, 16-byte aligned; sums: [gridDim] scratch (launch_read_sweep_blocks() entries).
void launch_read_sweep(const uint8_t* data, size_t bytes, uint32_t* sums, cudaStream_t stream);
int launch_read_sweep_blocks();

}  // namespace imp::cuda
