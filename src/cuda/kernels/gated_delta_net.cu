#include "cuda/kernels/gated_delta_net.h"

#include "cuda/check.h"
#include "cuda/kernels/device_math.cuh"
#include "cuda/kernels/fp_codes.cuh"

namespace imp::cuda {
namespace {

constexpr int kMaxDim = 1024;  // one thread per value column; q and k staged in shared memory

__global__ void gdn_conv_step_kernel(GatedDeltaNetShape shape, const uint16_t* conv_w, float* mixed, float* state,
                                     int channels) {
  const int row = blockIdx.y;
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= channels) return;
  const int K = shape.conv_kernel;
  float* st = state + static_cast<size_t>(row) * (K - 1) * channels;
  float* x = mixed + static_cast<size_t>(row) * channels;
  const float current = x[c];
  float sum = bf16_bits_to_float(conv_w[c * K + K - 1]) * current;
  for (int j = 0; j < K - 1; ++j) sum += bf16_bits_to_float(conv_w[c * K + j]) * st[j * channels + c];
  for (int j = 0; j + 1 < K - 1; ++j) st[j * channels + c] = st[(j + 1) * channels + c];
  st[(K - 2) * channels + c] = current;
  x[c] = sum * sigmoidf(sum);
}

__device__ __forceinline__ float block_sum(float v, float* scratch) {
  for (int o = kWarp / 2; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  __syncthreads();  // scratch may still be read from a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float total = 0.0f;
  for (int w = 0; w < static_cast<int>(blockDim.x) / kWarp; ++w) total += scratch[w];
  return total;
}

// Block (value head h, row): thread j owns value column j of the head's state.
__global__ void gdn_recurrent_step_kernel(GatedDeltaNetShape shape,
                                                                         GatedDeltaNetWeightsDevice w,
                                                                         const float* mixed, const float* z,
                                                                         const float* b, const float* a,
                                                                         float* recurrent, float* out) {
  __shared__ float q[kMaxDim], k[kMaxDim];
  __shared__ float scratch[kMaxDim / kWarp];
  const int h = blockIdx.x, row = blockIdx.y, j = threadIdx.x;
  const int dk = shape.key_dim, dv = shape.value_dim, hv = shape.value_heads;
  const bool active = j < dv;
  const int kh = h / (hv / shape.key_heads);
  const int channels = shape.conv_channels(), key_total = shape.key_heads * dk;
  const float* x = mixed + static_cast<size_t>(row) * channels;

  // q and k of the key head, L2-normalised (eps on the sum, as the reference), q also by 1/sqrt(dk).
  float qq = 0.0f, kk = 0.0f;
  for (int i = j; i < dk; i += blockDim.x) {
    q[i] = x[kh * dk + i];
    k[i] = x[key_total + kh * dk + i];
    qq += q[i] * q[i];
    kk += k[i] * k[i];
  }
  qq = block_sum(qq, scratch);
  kk = block_sum(kk, scratch);
  const float q_scale = rsqrtf(qq + 1e-6f) * rsqrtf(static_cast<float>(dk));
  const float k_scale = rsqrtf(kk + 1e-6f);
  for (int i = j; i < dk; i += blockDim.x) {
    q[i] *= q_scale;
    k[i] *= k_scale;
  }
  __syncthreads();

  const float beta = sigmoidf(b[row * hv + h]);
  const float a_in = a[row * hv + h] + bf16_bits_to_float(w.dt_bias[h]);
  const float softplus = a_in > 20.0f ? a_in : log1pf(expf(a_in));
  const float decay = expf(-expf(bf16_bits_to_float(w.a_log[h])) * softplus);

  // Pass 1 over the column: the decayed state's S^T k and S^T q. Pass 2 writes S' = s + k delta^T, and
  // o = S'^T q = S^T q + delta (k . q). Coalesced: thread j reads column j of each row i.
  float* S = recurrent + (static_cast<size_t>(row) * hv + h) * dk * dv;
  float o = 0.0f;
  if (active) {
    float kv = 0.0f, sq = 0.0f, kq = 0.0f;
    for (int i = 0; i < dk; ++i) {
      const float s = S[i * dv + j] * decay;
      kv += s * k[i];
      sq += s * q[i];
      kq += k[i] * q[i];
    }
    const float v = x[2 * key_total + h * dv + j];
    const float delta = beta * (v - kv);
    for (int i = 0; i < dk; ++i) S[i * dv + j] = S[i * dv + j] * decay + k[i] * delta;
    o = sq + delta * kq;
  }

  // Gated RMSNorm over the head's value_dim outputs.
  const float mean_sq = block_sum(o * o, scratch) / static_cast<float>(dv);
  if (!active) return;
  const float gate = z[(static_cast<size_t>(row) * hv + h) * dv + j];
  const float act = shape.sigmoid_gate ? sigmoidf(gate) : gate * sigmoidf(gate);
  out[(static_cast<size_t>(row) * hv + h) * dv + j] =
      bf16_bits_to_float(w.norm[j]) * (o * rsqrtf(mean_sq + shape.eps)) * act;
}

}  // namespace

void launch_gdn_conv_step(const GatedDeltaNetShape& shape, const GatedDeltaNetWeightsDevice& w, float* mixed,
                          float* conv_state, int32_t rows, cudaStream_t stream) {
  if (shape.conv_kernel < 2) throw_invalid_launch("gdn conv: kernel must be >= 2");
  const int channels = shape.conv_channels();
  const dim3 grid((channels + 255) / 256, rows);
  gdn_conv_step_kernel<<<grid, 256, 0, stream>>>(shape, w.conv1d, mixed, conv_state, channels);
  IMP_CUDA_CHECK_LAUNCH();
}

void launch_gdn_recurrent_step(const GatedDeltaNetShape& shape, const GatedDeltaNetWeightsDevice& w,
                               const float* mixed, const float* z, const float* b, const float* a, float* recurrent,
                               float* out, int32_t rows, cudaStream_t stream) {
  if (shape.value_dim > kMaxDim || shape.key_dim > kMaxDim || shape.value_heads % shape.key_heads != 0) {
    throw_invalid_launch("gdn recurrent step: head dims above 1024, or value heads not a multiple of key heads");
  }
  const int threads = (shape.value_dim + kWarp - 1) / kWarp * kWarp;
  gdn_recurrent_step_kernel<<<dim3(shape.value_heads, rows), threads, 0, stream>>>(shape, w, mixed, z, b, a,
                                                                                    recurrent, out);
  IMP_CUDA_CHECK_LAUNCH();
}

}  // namespace imp::cuda
