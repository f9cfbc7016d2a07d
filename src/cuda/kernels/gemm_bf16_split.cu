#include "cuda/kernels/gemm_bf16_split.h"

#include <cuda_bf16.h>

#include <algorithm>

#include "cuda/blas.h"
#include "cuda/check.h"
#include "cuda/kernels/prefill_common.cuh"

namespace imp::cuda {
namespace {

constexpr int kThreads = 256;

// hi = bf16_rn(x), lo = bf16_rn(x - hi): x == hi + lo to about 16 significant bits (prefill::split_bf16x4). Four
// values per thread and step (16-byte loads, 8-byte stores) when count % 4 == 0 (lo = hi + count is then 8-byte
// aligned), else one.
__global__ void split_bf16_kernel(const float* x, size_t count, __nv_bfloat16* hi, __nv_bfloat16* lo) {
  const size_t step = static_cast<size_t>(gridDim.x) * blockDim.x, first = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  if (count % 4 == 0) {
    for (size_t i = first; i < count / 4; i += step) {
      prefill::split_bf16x4(reinterpret_cast<const float4*>(x)[i], reinterpret_cast<uint2*>(hi)[i], reinterpret_cast<uint2*>(lo)[i]);
    }
    return;
  }
  for (size_t i = first; i < count; i += step) {
    const __nv_bfloat16 h = __float2bfloat16_rn(x[i]);
    hi[i] = h;
    lo[i] = __float2bfloat16_rn(x[i] - __bfloat162float(h));
  }
}

// out [rows, 2k]: row t = [hi of x_t | lo of x_t] (launch_split_bf16_rows); quads when k % 4 == 0.
__global__ void split_bf16_rows_kernel(const float* x, int rows, int k, __nv_bfloat16* out) {
  const size_t step = static_cast<size_t>(gridDim.x) * blockDim.x, first = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  if (k % 4 == 0) {
    const int quads = k / 4;
    for (size_t i = first; i < static_cast<size_t>(rows) * quads; i += step) {
      const size_t t = i / quads, q = i % quads;
      uint2* row = reinterpret_cast<uint2*>(out + t * 2 * k);
      prefill::split_bf16x4(reinterpret_cast<const float4*>(x)[i], row[q], row[quads + q]);
    }
    return;
  }
  for (size_t i = first; i < static_cast<size_t>(rows) * k; i += step) {
    const size_t t = i / k, c = i % k;
    const __nv_bfloat16 h = __float2bfloat16_rn(x[i]);
    out[t * 2 * k + c] = h;
    out[t * 2 * k + k + c] = __float2bfloat16_rn(x[i] - __bfloat162float(h));
  }
}

}  // namespace

const uint16_t* launch_split_bf16_rows(const float* x, int32_t rows, int32_t k, float* scratch, cudaStream_t stream) {
  auto* out = reinterpret_cast<__nv_bfloat16*>(scratch);
  const size_t count = static_cast<size_t>(rows) * static_cast<size_t>(k);
  if (count > 0) {
    if (k % 4 == 0 && (reinterpret_cast<uintptr_t>(x) % 16 != 0 || reinterpret_cast<uintptr_t>(scratch) % 8 != 0)) {
      throw_invalid_launch("split_bf16_rows: x must be 16-byte aligned, the scratch 8-byte");
    }
    const size_t blocks = std::min<size_t>((count / 4 + kThreads) / kThreads, 132 * 16);
    split_bf16_rows_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(x, rows, k, out);
    IMP_CUDA_CHECK_LAUNCH();
  }
  return reinterpret_cast<const uint16_t*>(out);
}

SplitActivations launch_split_bf16(const float* x, int32_t rows, int32_t k, float* scratch, cudaStream_t stream) {
  const size_t count = static_cast<size_t>(rows) * static_cast<size_t>(k);
  auto* hi = reinterpret_cast<__nv_bfloat16*>(scratch);
  __nv_bfloat16* lo = hi + count;
  if (count > 0) {
    if (count % 4 == 0 && reinterpret_cast<uintptr_t>(x) % 16 != 0) throw_invalid_launch("split_bf16: x must be 16-byte aligned");
    const size_t blocks = std::min<size_t>((count / 4 + kThreads) / kThreads, 132 * 16);
    split_bf16_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(x, count, hi, lo);
    IMP_CUDA_CHECK_LAUNCH();
  }
  return {reinterpret_cast<const uint16_t*>(hi), reinterpret_cast<const uint16_t*>(lo), rows, k};
}

void launch_gemm_bf16_split(const SplitActivations& x, const uint16_t* weight, int32_t n_out, float* y,
                            cudaStream_t stream, bool accumulate) {
  gemm_bf16_rows(x.hi, weight, x.rows, n_out, x.k, y, accumulate, stream);
  gemm_bf16_rows(x.lo, weight, x.rows, n_out, x.k, y, true, stream);
}

void launch_gemm_bf16_split(const float* x, const uint16_t* weight, int32_t rows, int32_t n_out, int32_t k, float* y,
                            float* scratch, cudaStream_t stream) {
  launch_gemm_bf16_split(launch_split_bf16(x, rows, k, scratch, stream), weight, n_out, y, stream);
}

}  // namespace imp::cuda
