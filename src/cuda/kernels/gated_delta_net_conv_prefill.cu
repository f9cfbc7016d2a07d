#include "cuda/kernels/gated_delta_net_prefill.h"

#include "cuda/check.h"
#include "cuda/kernels/device_math.cuh"
#include "cuda/kernels/fp_codes.cuh"

namespace imp::cuda {
namespace {

constexpr int kConvTokens = 32;  // tokens per conv thread

template <int K>
__global__ void conv_prefill_kernel(const uint16_t* conv_w, const float* __restrict__ mixed, const float* __restrict__ state,
                                    int channels, int tokens, float* __restrict__ out) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  const int t0 = blockIdx.y * kConvTokens;
  if (c >= channels) return;
  float w[K], hist[K - 1];
#pragma unroll
  for (int j = 0; j < K; ++j) w[j] = bf16_bits_to_float(conv_w[static_cast<size_t>(c) * K + j]);
#pragma unroll
  for (int j = 0; j < K - 1; ++j) {
    const int t = t0 - (K - 1) + j;  // input time; negative times come from the state
    hist[j] = t >= 0 ? mixed[static_cast<size_t>(t) * channels + c] : state[static_cast<size_t>(t + K - 1) * channels + c];
  }
  // The thread's inputs loaded all at once first (one load per step in flight waited a round trip per token).
  const int t_end = min(t0 + kConvTokens, tokens);
  float xs[kConvTokens];
#pragma unroll
  for (int u = 0; u < kConvTokens; ++u) xs[u] = t0 + u < t_end ? mixed[static_cast<size_t>(t0 + u) * channels + c] : 0.0f;
#pragma unroll
  for (int u = 0; u < kConvTokens; ++u) {
    const int t = t0 + u;
    if (t >= t_end) break;
    const float xin = xs[u];
    float sum = 0.0f;
#pragma unroll
    for (int j = 0; j < K - 1; ++j) sum += w[j] * hist[j];
    sum += w[K - 1] * xin;
    out[static_cast<size_t>(t) * channels + c] = sum * sigmoidf(sum);
#pragma unroll
    for (int j = 0; j + 1 < K - 1; ++j) hist[j] = hist[j + 1];
    hist[K - 2] = xin;
  }
}

// The state becomes the last K-1 rows of [state ++ mixed]; row r reads index tokens + r >= r, so ascending r
// in place is safe.
__global__ void conv_state_kernel(const float* __restrict__ mixed, float* state, int channels, int tokens, int K) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= channels) return;
  for (int r = 0; r < K - 1; ++r) {
    const int s = tokens + r;
    state[static_cast<size_t>(r) * channels + c] =
        s < K - 1 ? state[static_cast<size_t>(s) * channels + c] : mixed[static_cast<size_t>(s - (K - 1)) * channels + c];
  }
}

}  // namespace

void launch_gdn_conv_prefill(const GatedDeltaNetShape& shape, const GatedDeltaNetWeightsDevice& w, const float* mixed,
                             float* conv_state, int32_t tokens, float* out, cudaStream_t stream) {
  if (tokens <= 0) return;
  const int channels = shape.conv_channels();
  const dim3 grid((channels + 127) / 128, (tokens + kConvTokens - 1) / kConvTokens);
  switch (shape.conv_kernel) {
#define IMP_CONV_CASE(K) \
  case K: conv_prefill_kernel<K><<<grid, 128, 0, stream>>>(w.conv1d, mixed, conv_state, channels, tokens, out); break;
    IMP_CONV_CASE(2) IMP_CONV_CASE(3) IMP_CONV_CASE(4) IMP_CONV_CASE(5) IMP_CONV_CASE(6) IMP_CONV_CASE(7) IMP_CONV_CASE(8)
#undef IMP_CONV_CASE
    default:
      throw_invalid_launch("gdn conv prefill: kernel size must be 2..8");
  }
  IMP_CUDA_CHECK_LAUNCH();
  conv_state_kernel<<<(channels + 255) / 256, 256, 0, stream>>>(mixed, conv_state, channels, tokens, shape.conv_kernel);
  IMP_CUDA_CHECK_LAUNCH();
}

}  // namespace imp::cuda
