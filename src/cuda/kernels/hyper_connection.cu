#include "cuda/kernels/hyper_connection.h"

#include "cuda/check.h"
#include "cuda/kernels/device_math.cuh"
#include "cuda/kernels/fp_codes.cuh"

namespace imp::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void silu_div_kernel(float* v, int64_t count, float inv_streams) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= count) return;
  const float x = v[i] * inv_streams;
  v[i] = x * sigmoidf(x);
}

__global__ void hc_mix_kernel(const float* mix, const float* normed, int streams, int d, float* x) {
  const int row = blockIdx.y, j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= d) return;
  const size_t base = static_cast<size_t>(row) * streams * d + j;
  float sum = 0.0f;
  for (int s = 0; s < streams; ++s) sum += sigmoidf(mix[base + static_cast<size_t>(s) * d]) * normed[base + static_cast<size_t>(s) * d];
  x[static_cast<size_t>(row) * d + j] = sum * (1.0f / static_cast<float>(streams));
}

__global__ void hc_inject_kernel(float* inject, int count, float inv_streams) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < count) inject[i] = 2.0f * sigmoidf(inject[i] * inv_streams);
}

__global__ void hc_write_kernel(const float* y, const float* inject, int streams, int d, float* rows) {
  const int row = blockIdx.y, j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= d) return;
  const float value = y[static_cast<size_t>(row) * d + j];
  for (int s = 0; s < streams; ++s) {
    rows[(static_cast<size_t>(row) * streams + s) * d + j] += inject[row * streams + s] * value;
  }
}

constexpr int kMaxStreams = 8;

// 8 bf16 values from 16 bytes.
__device__ __forceinline__ void load8_bf16(const uint16_t* p, float* out) {
  const uint4 packed = *reinterpret_cast<const uint4*>(p);
  const uint32_t words[4] = {packed.x, packed.y, packed.z, packed.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    out[2 * i] = bf16_bits_to_float(words[i] & 0xffffu);
    out[2 * i + 1] = bf16_bits_to_float(words[i] >> 16);
  }
}

// One warp per output row of down_inject: per group g, a = sum w * (1 + nw) * s and b = sum s^2; the row's
// value is sum_g a_g * rsqrt(b_g / d + eps), i.e. the GEMV of the normalised stream.
__global__ void hc_read_down_kernel(const float* s, const uint16_t* nw, const uint16_t* w, int rows_out, int rank,
                                    int streams, int d, float eps, float* low, float* inv_rms) {
  const int lane = threadIdx.x % kWarp;
  const int r = blockIdx.x * (blockDim.x / kWarp) + threadIdx.x / kWarp;
  if (r >= rows_out) return;
  const size_t width = static_cast<size_t>(streams) * d;
  const uint16_t* row = w + static_cast<size_t>(r) * width;
  float value = 0.0f;
  for (int g = 0; g < streams; ++g) {
    float a = 0.0f, b = 0.0f;
    for (int c = lane * 8; c < d; c += kWarp * 8) {
      const size_t at = static_cast<size_t>(g) * d + c;
      float wf[8], nf[8];
      load8_bf16(row + at, wf);
      load8_bf16(nw + at, nf);
      const float4 s0 = *reinterpret_cast<const float4*>(s + at);
      const float4 s1 = *reinterpret_cast<const float4*>(s + at + 4);
      const float sv[8] = {s0.x, s0.y, s0.z, s0.w, s1.x, s1.y, s1.z, s1.w};
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        a += wf[i] * (1.0f + nf[i]) * sv[i];
        b += sv[i] * sv[i];
      }
    }
    a = warp_sum(a);
    b = warp_sum(b);
    const float inv = rsqrtf(b / static_cast<float>(d) + eps);
    value += a * inv;
    if (r == 0 && lane == 0) inv_rms[g] = inv;
  }
  if (lane != 0) return;
  const float v = value / static_cast<float>(streams);
  low[r] = r < rank ? v * sigmoidf(v) : 2.0f * sigmoidf(v);
}

// One warp per output column j: the S mix values up[s*d + j] . low, then the gated mean over the streams.
__global__ void hc_read_up_mix_kernel(const float* s, const uint16_t* nw, const float* inv_rms, const uint16_t* up,
                                      const float* low, int rank, int streams, int d, float* x) {
  const int lane = threadIdx.x % kWarp;
  const int j = blockIdx.x * (blockDim.x / kWarp) + threadIdx.x / kWarp;
  if (j >= d) return;
  float sum = 0.0f;
  for (int g = 0; g < streams; ++g) {
    const size_t at = static_cast<size_t>(g) * d + j;
    const uint16_t* row = up + at * rank;
    float dot = 0.0f;
    for (int c = lane * 8; c < rank; c += kWarp * 8) {
      float wf[8];
      load8_bf16(row + c, wf);
      const float4 l0 = *reinterpret_cast<const float4*>(low + c);
      const float4 l1 = *reinterpret_cast<const float4*>(low + c + 4);
      dot += wf[0] * l0.x + wf[1] * l0.y + wf[2] * l0.z + wf[3] * l0.w + wf[4] * l1.x + wf[5] * l1.y + wf[6] * l1.z +
             wf[7] * l1.w;
    }
    dot = warp_sum(dot);
    const float normed = s[at] * inv_rms[g] * (1.0f + bf16_bits_to_float(nw[at]));
    sum += sigmoidf(dot) * normed;
  }
  if (lane == 0) x[j] = sum / static_cast<float>(streams);
}

}  // namespace

void launch_hc_read_down(const float* stream_row, const uint16_t* norm_weight, const uint16_t* down_inject, int32_t rows_out,
                         int32_t rank, int32_t streams, int32_t d, float eps, float* low, float* inv_rms, cudaStream_t stream) {
  if (d % 8 != 0 || streams > kMaxStreams || streams < 1) throw_invalid_launch("hc_read_down: d % 8 != 0 or streams outside [1, 8]");
  constexpr int kWarps = 8;
  hc_read_down_kernel<<<(rows_out + kWarps - 1) / kWarps, kWarps * kWarp, 0, stream>>>(
      stream_row, norm_weight, down_inject, rows_out, rank, streams, d, eps, low, inv_rms);
  IMP_CUDA_CHECK_LAUNCH();
}

void launch_hc_read_up_mix(const float* stream_row, const uint16_t* norm_weight, const float* inv_rms, const uint16_t* up,
                           const float* low, int32_t rank, int32_t streams, int32_t d, float* x, cudaStream_t stream) {
  if (rank % 8 != 0) throw_invalid_launch("hc_read_up_mix: rank % 8 != 0");
  constexpr int kWarps = 8;
  hc_read_up_mix_kernel<<<(d + kWarps - 1) / kWarps, kWarps * kWarp, 0, stream>>>(stream_row, norm_weight, inv_rms, up, low,
                                                                                  rank, streams, d, x);
  IMP_CUDA_CHECK_LAUNCH();
}

void launch_silu_div(float* v, int64_t count, float streams, cudaStream_t stream) {
  silu_div_kernel<<<static_cast<unsigned>((count + kThreads - 1) / kThreads), kThreads, 0, stream>>>(v, count, 1.0f / streams);
  IMP_CUDA_CHECK_LAUNCH();
}

void launch_hc_mix(const float* mix, const float* normed, int32_t rows, int32_t streams, int32_t d, float* x,
                   cudaStream_t stream) {
  hc_mix_kernel<<<dim3((d + kThreads - 1) / kThreads, rows), kThreads, 0, stream>>>(mix, normed, streams, d, x);
  IMP_CUDA_CHECK_LAUNCH();
}

void launch_hc_inject(float* inject, int32_t rows, int32_t streams, cudaStream_t stream) {
  const int count = rows * streams;
  hc_inject_kernel<<<(count + kThreads - 1) / kThreads, kThreads, 0, stream>>>(inject, count, 1.0f / static_cast<float>(streams));
  IMP_CUDA_CHECK_LAUNCH();
}

void launch_hc_write(const float* y, const float* inject, int32_t rows, int32_t streams, int32_t d, float* stream_rows,
                     cudaStream_t stream) {
  hc_write_kernel<<<dim3((d + kThreads - 1) / kThreads, rows), kThreads, 0, stream>>>(y, inject, streams, d, stream_rows);
  IMP_CUDA_CHECK_LAUNCH();
}

}  // namespace imp::cuda
