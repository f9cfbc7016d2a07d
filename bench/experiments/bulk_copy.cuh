// Helpers shared by the GEMV probes (gemv_streamed_probe.cu, pdl_overlap_probe.cu): whole-row stages copied into
// shared memory by cp.async.bulk, completing on mbarriers, and the engine GEMV's per-chunk dot expression.
#pragma once

#include <cstdint>

#include "cuda/kernels/fp_codes.cuh"

__device__ __forceinline__ uint32_t shared_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// One thread initialises the block's barriers (each completes on one arrival plus its copy's bytes).
__device__ __forceinline__ void mbarriers_init(uint64_t* bars, int count) {
  for (int s = 0; s < count; ++s) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(shared_address(bars + s)) : "memory");
  }
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

// bytes (a multiple of 16) from global src to shared dst; bar completes when they have landed.
__device__ __forceinline__ void bulk_copy(void* dst, const void* src, uint32_t bytes, uint64_t* bar) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(shared_address(bar)), "r"(bytes)
               : "memory");
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                   shared_address(dst)),
               "l"(src), "r"(bytes), "r"(shared_address(bar))
               : "memory");
}

__device__ __forceinline__ void mbarrier_wait(uint64_t* bar, uint32_t parity) {
  asm volatile("{\n .reg .pred p;\n WAIT_%=:\n mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n @!p bra WAIT_%=;\n}" ::"r"(
                   shared_address(bar)),
               "r"(parity)
               : "memory");
}

// bf16_row_dots_range's per-chunk expression (gemv_row.cuh), so a probe's sums are the engine kernel's bits.
__device__ __forceinline__ float dot8(const uint4& packed, const float (&xv)[8]) {
  const uint32_t words[4] = {packed.x, packed.y, packed.z, packed.w};
  float wf[8];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    wf[2 * i] = imp::cuda::bf16_bits_to_float(words[i] & 0xffffu);
    wf[2 * i + 1] = imp::cuda::bf16_bits_to_float(words[i] >> 16);
  }
  return wf[0] * xv[0] + wf[1] * xv[1] + wf[2] * xv[2] + wf[3] * xv[3] + wf[4] * xv[4] + wf[5] * xv[5] + wf[6] * xv[6] +
         wf[7] * xv[7];
}
