#include "cuda/kernels/gemm_bf16_split.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

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


// One block per row: the row's largest magnitude, then its E4M3 codes; eight values per 16-byte load when
// cols % 8 == 0 (and the rows 16-byte aligned), else one.
__global__ void quantize_rows_e4m3_kernel(const uint16_t* in, int cols, uint8_t* out, float* scales) {
  __shared__ float partial[kThreads / 32];
  const size_t row = blockIdx.x;
  const uint16_t* src = in + row * cols;
  uint8_t* dst = out + row * cols;
  const bool vec = cols % 8 == 0;
  float amax = 0.0f;
  if (vec) {
    for (int i = threadIdx.x; i < cols / 8; i += kThreads) {
      const uint4 v = reinterpret_cast<const uint4*>(src)[i];
      const uint32_t words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
      for (int w = 0; w < 4; ++w) {
        amax = fmaxf(amax, fmaxf(fabsf(bf16_bits_to_float(words[w] & 0xffffu)), fabsf(bf16_bits_to_float(words[w] >> 16))));
      }
    }
  } else {
    for (int i = threadIdx.x; i < cols; i += kThreads) amax = fmaxf(amax, fabsf(bf16_bits_to_float(src[i])));
  }
  for (int offset = 16; offset > 0; offset /= 2) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, offset));
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = amax;
  __syncthreads();
  amax = 0.0f;
  for (int w = 0; w < kThreads / 32; ++w) amax = fmaxf(amax, partial[w]);
  const float inv = amax > 0.0f ? 448.0f / amax : 1.0f;
  if (threadIdx.x == 0) scales[row] = amax > 0.0f ? amax / 448.0f : 1.0f;
  auto code = [&](uint32_t bits) {
    return static_cast<uint32_t>(__nv_cvt_float_to_fp8(bf16_bits_to_float(bits) * inv, __NV_SATFINITE, __NV_E4M3));
  };
  if (vec) {
    for (int i = threadIdx.x; i < cols / 8; i += kThreads) {
      const uint4 v = reinterpret_cast<const uint4*>(src)[i];
      const uint32_t words[4] = {v.x, v.y, v.z, v.w};
      uint32_t packed[2] = {0u, 0u};
#pragma unroll
      for (int w = 0; w < 4; ++w) {
        packed[w / 2] |= (code(words[w] & 0xffffu) | code(words[w] >> 16) << 8) << (16 * (w % 2));
      }
      reinterpret_cast<uint2*>(dst)[i] = make_uint2(packed[0], packed[1]);
    }
  } else {
    for (int i = threadIdx.x; i < cols; i += kThreads) dst[i] = static_cast<uint8_t>(code(src[i]));
  }
}

// fp16_rn(bf16 * scale), one value per step (a load-time conversion of the weight copies).
__global__ void f16_rows_kernel(const uint16_t* in, size_t count, float scale, __half* out) {
  const size_t step = static_cast<size_t>(gridDim.x) * blockDim.x, first = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  for (size_t i = first; i < count; i += step) out[i] = __float2half_rn(bf16_bits_to_float(in[i]) * scale);
}

__global__ void bf16_abs_max_kernel(const uint16_t* in, size_t count, float offset, float* out) {
  const size_t step = static_cast<size_t>(gridDim.x) * blockDim.x, first = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  float m = 0.0f;
  for (size_t i = first; i < count; i += step) m = fmaxf(m, fabsf(bf16_bits_to_float(in[i]) + offset));
  for (int o = 16; o > 0; o /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  // Non-negative floats order as their bits.
  if (threadIdx.x % 32 == 0) atomicMax(reinterpret_cast<unsigned int*>(out), __float_as_uint(m));
}

// One warp per row: the row's sum of magnitudes (fp32; a bound, not an exact figure), then the largest.
__global__ void bf16_row_abs_sum_max_kernel(const uint16_t* in, int rows, int cols, float* out) {
  const int row = blockIdx.x * (kThreads / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (row >= rows) return;
  float sum = 0.0f;
  for (int c = lane; c < cols; c += 32) sum += fabsf(bf16_bits_to_float(in[static_cast<size_t>(row) * cols + c]));
  for (int o = 16; o > 0; o /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  if (lane == 0) atomicMax(reinterpret_cast<unsigned int*>(out), __float_as_uint(sum));
}

// x16 = fp16_rn((hi + lo) * scale), four values per step (8-byte loads and stores) when count % 4 == 0.
__global__ void f16_terms_kernel(const uint16_t* hi, const uint16_t* lo, size_t count, float scale, __half* out) {
  const size_t step = static_cast<size_t>(gridDim.x) * blockDim.x, first = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  if (count % 4 == 0) {
    for (size_t i = first; i < count / 4; i += step) {
      const uint2 h = reinterpret_cast<const uint2*>(hi)[i], l = reinterpret_cast<const uint2*>(lo)[i];
      const __half2 o[2] = {prefill::f16x2_from_terms(h.x, l.x, scale), prefill::f16x2_from_terms(h.y, l.y, scale)};
      reinterpret_cast<uint2*>(out)[i] = *reinterpret_cast<const uint2*>(o);
    }
    return;
  }
  for (size_t i = first; i < count; i += step) out[i] = __float2half_rn((bf16_bits_to_float(hi[i]) + bf16_bits_to_float(lo[i])) * scale);
}

// x16 = fp16_rn(x * scale), four values per step (16-byte loads, 8-byte stores) when count % 4 == 0.
__global__ void f16_values_kernel(const float* x, size_t count, float scale, __half* out) {
  const size_t step = static_cast<size_t>(gridDim.x) * blockDim.x, first = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  if (count % 4 == 0) {
    for (size_t i = first; i < count / 4; i += step) {
      const float4 v = reinterpret_cast<const float4*>(x)[i];
      const __half2 o[2] = {__floats2half2_rn(v.x * scale, v.y * scale), __floats2half2_rn(v.z * scale, v.w * scale)};
      reinterpret_cast<uint2*>(out)[i] = *reinterpret_cast<const uint2*>(o);
    }
    return;
  }
  for (size_t i = first; i < count; i += step) out[i] = __float2half_rn(x[i] * scale);
}

unsigned grid_for(size_t items) { return static_cast<unsigned>(std::clamp<size_t>((items + kThreads - 1) / kThreads, 1, 132 * 16)); }

}  // namespace

void launch_f16_rows(const uint16_t* in, size_t count, float scale, uint16_t* out, cudaStream_t stream) {
  if (count == 0) return;
  f16_rows_kernel<<<grid_for(count), kThreads, 0, stream>>>(in, count, scale, reinterpret_cast<__half*>(out));
  IMP_CUDA_CHECK_LAUNCH();
}

void launch_bf16_abs_max(const uint16_t* in, size_t count, float offset, float* out, cudaStream_t stream) {
  IMP_CUDA_CHECK(cudaMemsetAsync(out, 0, sizeof(float), stream));
  if (count == 0) return;
  bf16_abs_max_kernel<<<grid_for(count), kThreads, 0, stream>>>(in, count, offset, out);
  IMP_CUDA_CHECK_LAUNCH();
}

void launch_bf16_row_abs_sum_max(const uint16_t* in, int32_t rows, int32_t cols, float* out, cudaStream_t stream) {
  IMP_CUDA_CHECK(cudaMemsetAsync(out, 0, sizeof(float), stream));
  if (rows == 0) return;
  const int per_block = kThreads / 32;
  bf16_row_abs_sum_max_kernel<<<(rows + per_block - 1) / per_block, kThreads, 0, stream>>>(in, rows, cols, out);
  IMP_CUDA_CHECK_LAUNCH();
}

SplitActivations launch_f16_values(const float* x, int32_t rows, int32_t k, float scale, uint16_t* out, cudaStream_t stream) {
  const size_t count = static_cast<size_t>(rows) * static_cast<size_t>(k);
  if (count > 0) {
    if (count % 4 == 0 && (reinterpret_cast<uintptr_t>(x) % 16 != 0 || reinterpret_cast<uintptr_t>(out) % 8 != 0)) {
      throw_invalid_launch("f16_values: x must be 16-byte aligned, the output 8-byte");
    }
    f16_values_kernel<<<grid_for(count / 4), kThreads, 0, stream>>>(x, count, scale, reinterpret_cast<__half*>(out));
    IMP_CUDA_CHECK_LAUNCH();
  }
  SplitActivations result{nullptr, nullptr, rows, k};
  result.x16 = out;
  result.x16_scale = scale;
  return result;
}

SplitActivations launch_f16_terms(const SplitActivations& x, float scale, uint16_t* out, cudaStream_t stream) {
  const size_t count = static_cast<size_t>(x.rows) * static_cast<size_t>(x.k);
  if (count > 0) {
    if (count % 4 == 0 && (reinterpret_cast<uintptr_t>(x.hi) % 8 != 0 || reinterpret_cast<uintptr_t>(x.lo) % 8 != 0 ||
                           reinterpret_cast<uintptr_t>(out) % 8 != 0)) {
      throw_invalid_launch("f16_terms: the terms and the output must be 8-byte aligned");
    }
    f16_terms_kernel<<<grid_for(count / 4), kThreads, 0, stream>>>(x.hi, x.lo, count, scale, reinterpret_cast<__half*>(out));
    IMP_CUDA_CHECK_LAUNCH();
  }
  SplitActivations result = x;
  result.x16 = out;
  result.x16_scale = scale;
  return result;
}

void launch_quantize_rows_e4m3(const uint16_t* in, int32_t rows, int32_t cols, uint8_t* out, float* scales,
                               cudaStream_t stream) {
  if (rows == 0 || cols == 0) return;
  if (cols % 8 == 0 && (reinterpret_cast<uintptr_t>(in) % 16 != 0 || reinterpret_cast<uintptr_t>(out) % 8 != 0)) {
    throw_invalid_launch("quantize_rows_e4m3: rows of a multiple of 8 values need 16-byte aligned input, 8-byte output");
  }
  quantize_rows_e4m3_kernel<<<rows, kThreads, 0, stream>>>(in, cols, out, scales);
  IMP_CUDA_CHECK_LAUNCH();
}

SplitActivations launch_low_term_fp8(const SplitActivations& x, uint8_t* out, float* scales, cudaStream_t stream) {
  launch_quantize_rows_e4m3(x.lo, x.rows, x.k, out, scales, stream);
  SplitActivations result = x;
  result.lo8 = out;
  result.lo8_scales = scales;
  return result;
}

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
                            cudaStream_t stream, bool accumulate, Fp8Rows weight8, F16Rows weight16, int32_t ldy) {
  if (x.x16 != nullptr && weight16.data != nullptr) {
    gemm_f16_rows(x.x16, weight16.data, x.rows, n_out, x.k, 1.0f / (x.x16_scale * weight16.scale), y, accumulate, stream, ldy);
    return;
  }
  gemm_bf16_rows(x.hi, weight, x.rows, n_out, x.k, y, accumulate, stream, ldy);
  const bool fp8 = x.lo8 != nullptr && weight8.data != nullptr &&
                   gemm_fp8_rows_accumulate(x.lo8, x.lo8_scales, weight8.data, weight8.scales, x.rows, n_out, x.k, y, stream, ldy);
  if (!fp8) gemm_bf16_rows(x.lo, weight, x.rows, n_out, x.k, y, true, stream, ldy);
}

void launch_gemm_bf16_split(const float* x, const uint16_t* weight, int32_t rows, int32_t n_out, int32_t k, float* y,
                            float* scratch, cudaStream_t stream) {
  launch_gemm_bf16_split(launch_split_bf16(x, rows, k, scratch, stream), weight, n_out, y, stream);
}

}  // namespace imp::cuda
