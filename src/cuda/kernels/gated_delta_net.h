// Gated DeltaNet decode step (one token per row) on the GPU, after the input projections and before
// out_proj, exactly the math of cpu::gated_delta_net's token-by-token path in fp32:
//   conv:  c = silu(sum_j w[c, j] * [conv_state ++ mixed][j]), the conv state shifts by one row;
//   head h (key head h / (value_heads / key_heads)): q = l2(q) / sqrt(dk), k = l2(k), beta = sigmoid(b),
//          g = -exp(A_log) * softplus(a + dt_bias); S <- e^g S; delta = beta (v - S^T k); S += k delta^T;
//          o = S^T q; then the gated RMSNorm o * rsqrt(mean(o^2) + eps) * w * act(z), act sigmoid or silu.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace imp::cuda {

struct GatedDeltaNetShape {
  int32_t key_heads = 0, value_heads = 0, key_dim = 0, value_dim = 0, conv_kernel = 0;
  float eps = 1e-6f;
  bool sigmoid_gate = true;
  constexpr int32_t conv_channels() const { return 2 * key_heads * key_dim + value_heads * value_dim; }
};

struct GatedDeltaNetWeightsDevice {
  const uint16_t* conv1d;   // bf16 [conv_channels, kernel]
  const uint16_t* a_log;    // bf16 [value_heads]
  const uint16_t* dt_bias;  // bf16 [value_heads]
  const uint16_t* norm;     // bf16 [value_dim]
};

// mixed [rows, conv_channels] (in_proj_qkv output, fp32) is convolved in place (silu applied);
// conv_state [rows, kernel - 1, conv_channels] advances by one token.
void launch_gdn_conv_step(const GatedDeltaNetShape& shape, const GatedDeltaNetWeightsDevice& w, float* mixed,
                          float* conv_state, int32_t rows, cudaStream_t stream);

// The decode in_proj kernel keeps a channel's taps in registers: conv kernels of 2 to this many taps (the release: 4).
constexpr int32_t kGdnMaxConvTaps = 4;

// Decode (one row): y [n] = in_proj [n, k] . x with the conv step applied to y's first conv_channels outputs
// (launch_gdn_conv_step fused into the projection), except the z rows [conv_channels, conv_channels + value_heads *
// value_dim), which this kernel neither computes nor writes (launch_gdn_gate_act makes act(z) from them).
// k % 8 == 0, n >= conv_channels + value_heads * value_dim.
void launch_gdn_in_proj_conv(const GatedDeltaNetShape& shape, const GatedDeltaNetWeightsDevice& w,
                             const uint16_t* in_proj, const float* x, int32_t n, int32_t k, float* conv_state, float* y,
                             cudaStream_t stream);

// Decode (one row): gate [value_heads * value_dim] = act(z), z = in_proj's z rows . x, act sigmoid or silu; the
// output projection multiplies it in (launch_gemv_bf16_hc_write's gate). It needs only x, so the decode step runs
// it on a side branch at low priority, beside the in-projection and the recurrent step (forward.cpp).
void launch_gdn_gate_act(const GatedDeltaNetShape& shape, const uint16_t* in_proj, const float* x, int32_t k,
                         float* gate, cudaStream_t stream);

// z [rows, value_heads * value_dim] or null (then out is the normed output before its gate: out * act(z) is the
// gated output bit for bit), b and a [rows, value_heads]; recurrent [rows, value_heads, key_dim,
// value_dim] fp32 is updated in place; out [rows, value_heads * value_dim] receives the gated-normed output.
// Head dims up to 1024. A cluster of up to 8 blocks per (value head, row), each a share of the value columns
// times key slices (up to 1024 threads).
void launch_gdn_recurrent_step(const GatedDeltaNetShape& shape, const GatedDeltaNetWeightsDevice& w,
                               const float* mixed, const float* z, const float* b, const float* a, float* recurrent,
                               float* out, int32_t rows, cudaStream_t stream);

}  // namespace imp::cuda
