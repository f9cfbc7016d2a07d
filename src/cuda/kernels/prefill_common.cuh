// Device helpers shared by the prefill kernels (tensor-core tiles): cp.async with zero fill, ldmatrix, bf16
// splitting and scaling (mma_16816 and pack_bf16x2 are in device_math.cuh).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "cuda/kernels/device_math.cuh"  // cp_async_commit
#include "cuda/kernels/fp_codes.cuh"

namespace imp::cuda::prefill {

__device__ __forceinline__ uint32_t smem_addr(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }

// 16-byte async copy global -> shared; when !valid the destination is zero-filled and nothing is read
// (src must still be a mapped address: pass the tensor base).
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, bool valid) {
  const int bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(smem)), "l"(gmem), "r"(bytes));
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ void ldmatrix_x4_at(uint32_t (&r)[4], uint32_t smem_address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_address));
}
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* smem) { ldmatrix_x4_at(r, smem_addr(smem)); }
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* smem) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(smem)));
}

__device__ __forceinline__ uint16_t bf16_bits(float v) {
  const __nv_bfloat16 b = __float2bfloat16_rn(v);
  return *reinterpret_cast<const uint16_t*>(&b);
}

// decode_e2m1x8 (eight E2M1 values to four bf16x2 words, times 2^-126) and e4m3x2_to_float2 come from fp_codes.cuh.

// The two bf16 terms of fp32-grade GEMM inputs (gemm_bf16_split.h): hi = bf16_rn(v), lo = bf16_rn(v - hi), for
// four values as two 8-byte words each.
__device__ __forceinline__ void split_bf16x4(float4 v, uint2& hi, uint2& lo) {
  const float vals[4] = {v.x, v.y, v.z, v.w};
  __nv_bfloat16 h[4], l[4];
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    h[e] = __float2bfloat16_rn(vals[e]);
    l[e] = __float2bfloat16_rn(vals[e] - __bfloat162float(h[e]));
  }
  hi = *reinterpret_cast<const uint2*>(h);
  lo = *reinterpret_cast<const uint2*>(l);
}

// x's fp16 term from its two terms (launch_f16_terms, gemm_bf16_split.h) for one packed pair each:
// fp16_rn((hi + lo) * scale), low halves first.
__device__ __forceinline__ __half2 f16x2_from_terms(uint32_t hi, uint32_t lo, float scale) {
  return __floats2half2_rn((bf16_bits_to_float(hi & 0xffffu) + bf16_bits_to_float(lo & 0xffffu)) * scale,
                           (bf16_bits_to_float(hi >> 16) + bf16_bits_to_float(lo >> 16)) * scale);
}

}  // namespace imp::cuda::prefill
