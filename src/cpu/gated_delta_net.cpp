#include <algorithm>

#include "cpu/blocks.h"

namespace imp::cpu {
namespace {

constexpr int64_t kChunk = 64;

// Per value head, inputs of the delta rule after the conv: q, k (L2-normalised; q also scaled by
// 1/sqrt(dk)), v, beta and the log-decay g, all [T, ...] for that head.
struct HeadInputs {
  std::vector<float> q, k, v, beta, g;
};

// S <- e^g S; delta = beta (v - S^T k); S <- S + k delta^T; o = S^T q. S is [dk, dv].
void recurrent_head(const HeadInputs& in, int64_t T, int64_t dk, int64_t dv, float* S, float* out, int64_t out_stride) {
  std::vector<float> delta(static_cast<size_t>(dv));
  for (int64_t t = 0; t < T; ++t) {
    const float* q = in.q.data() + t * dk;
    const float* k = in.k.data() + t * dk;
    const float* v = in.v.data() + t * dv;
    const float decay = std::exp(in.g[static_cast<size_t>(t)]);
    for (int64_t i = 0; i < dk * dv; ++i) S[i] *= decay;
    for (int64_t j = 0; j < dv; ++j) {
      float kv = 0.0f;
      for (int64_t i = 0; i < dk; ++i) kv += S[i * dv + j] * k[i];
      delta[static_cast<size_t>(j)] = (v[j] - kv) * in.beta[static_cast<size_t>(t)];
    }
    for (int64_t i = 0; i < dk; ++i) {
      for (int64_t j = 0; j < dv; ++j) S[i * dv + j] += k[i] * delta[static_cast<size_t>(j)];
    }
    for (int64_t j = 0; j < dv; ++j) {
      float o = 0.0f;
      for (int64_t i = 0; i < dk; ++i) o += S[i * dv + j] * q[i];
      out[t * out_stride + j] = o;
    }
  }
}

// The chunked (WY) form of the same recurrence, chunk C = 64, tail padded with zeros (a no-op):
// L = I + strictlower((beta K) K^T * Gamma), U = L^-1 beta V, W = L^-1 (beta e^gamma K),
// V' = U - W S, O = (Q e^gamma) S + ((Q K^T) * Gamma) V', S <- e^gamma_C S + (K e^(gamma_C - gamma))^T V'.
void chunked_head(const HeadInputs& in, int64_t T, int64_t dk, int64_t dv, float* S, float* out, int64_t out_stride) {
  const int64_t C = kChunk;
  std::vector<float> gamma(C), L(C * C), U(C * dv), W(C * dk), Vn(C * dv);
  for (int64_t c0 = 0; c0 < T; c0 += C) {
    const int64_t n = std::min(C, T - c0);
    const float* q = in.q.data() + c0 * dk;
    const float* k = in.k.data() + c0 * dk;
    const float* v = in.v.data() + c0 * dv;
    const float* beta = in.beta.data() + c0;
    float running = 0.0f;
    for (int64_t i = 0; i < n; ++i) gamma[static_cast<size_t>(i)] = running += in.g[static_cast<size_t>(c0 + i)];
    auto decay = [&](int64_t i, int64_t j) { return std::exp(gamma[static_cast<size_t>(i)] - gamma[static_cast<size_t>(j)]); };

    // Forward substitution for U and W (L is unit lower triangular).
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < i; ++j) L[static_cast<size_t>(i * C + j)] = beta[i] * dot(k + i * dk, k + j * dk, dk) * decay(i, j);
      const float scale_w = beta[i] * std::exp(gamma[static_cast<size_t>(i)]);
      for (int64_t c = 0; c < dv; ++c) {
        float value = beta[i] * v[i * dv + c];
        for (int64_t j = 0; j < i; ++j) value -= L[static_cast<size_t>(i * C + j)] * U[static_cast<size_t>(j * dv + c)];
        U[static_cast<size_t>(i * dv + c)] = value;
      }
      for (int64_t c = 0; c < dk; ++c) {
        float value = scale_w * k[i * dk + c];
        for (int64_t j = 0; j < i; ++j) value -= L[static_cast<size_t>(i * C + j)] * W[static_cast<size_t>(j * dk + c)];
        W[static_cast<size_t>(i * dk + c)] = value;
      }
    }
    // V' = U - W S
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t c = 0; c < dv; ++c) {
        float ws = 0.0f;
        for (int64_t r = 0; r < dk; ++r) ws += W[static_cast<size_t>(i * dk + r)] * S[r * dv + c];
        Vn[static_cast<size_t>(i * dv + c)] = U[static_cast<size_t>(i * dv + c)] - ws;
      }
    }
    // Outputs: inter-chunk read of the old state plus intra-chunk attention (diagonal included).
    for (int64_t i = 0; i < n; ++i) {
      const float qscale = std::exp(gamma[static_cast<size_t>(i)]);
      std::vector<float> a(static_cast<size_t>(i + 1));
      for (int64_t j = 0; j <= i; ++j) a[static_cast<size_t>(j)] = dot(q + i * dk, k + j * dk, dk) * decay(i, j);
      for (int64_t c = 0; c < dv; ++c) {
        float o = 0.0f;
        for (int64_t r = 0; r < dk; ++r) o += q[i * dk + r] * S[r * dv + c];
        o *= qscale;
        for (int64_t j = 0; j <= i; ++j) o += a[static_cast<size_t>(j)] * Vn[static_cast<size_t>(j * dv + c)];
        out[(c0 + i) * out_stride + c] = o;
      }
    }
    // State update. Padding rows have g = 0, so gamma_C equals gamma of the last real row.
    const float last = gamma[static_cast<size_t>(n - 1)];
    const float chunk_decay = std::exp(last);
    for (int64_t r = 0; r < dk * dv; ++r) S[r] *= chunk_decay;
    for (int64_t i = 0; i < n; ++i) {
      const float kscale = std::exp(last - gamma[static_cast<size_t>(i)]);
      for (int64_t r = 0; r < dk; ++r) {
        const float kr = k[i * dk + r] * kscale;
        for (int64_t c = 0; c < dv; ++c) S[r * dv + c] += kr * Vn[static_cast<size_t>(i * dv + c)];
      }
    }
  }
}

void l2_normalize(float* x, int64_t n, float scale) {
  const float inv = 1.0f / std::sqrt(dot(x, x, n) + 1e-6f);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv * scale;
}

}  // namespace

void gated_delta_net(const model::ModelConfig& config, const model::GatedDeltaNetWeights& w, const float* x,
                     int64_t T, GatedDeltaNetState& state, bool chunked, float* y) {
  const int64_t conv_dim = config.gdn_conv_dim();
  const int64_t hk = config.linear_num_key_heads, hv = config.linear_num_value_heads;
  const int64_t dk = config.linear_key_head_dim, dv = config.linear_value_head_dim;
  const int64_t key_dim = config.gdn_key_dim(), value_dim = config.gdn_value_dim();
  const int64_t kernel = config.linear_conv_kernel_dim;

  // 1. Projections.
  std::vector<float> mixed(static_cast<size_t>(T * conv_dim)), z(static_cast<size_t>(T * value_dim));
  std::vector<float> b(static_cast<size_t>(T * hv)), a(static_cast<size_t>(T * hv));
  linear(w.in_proj_qkv, x, T, mixed.data());
  linear(w.in_proj_z, x, T, z.data());
  linear(w.in_proj_b, x, T, b.data());
  linear(w.in_proj_a, x, T, a.data());

  // 2. Causal depthwise conv over [state ++ new inputs], tap kernel-1 on the current token, then SiLU.
  const int64_t history = kernel - 1;
  std::vector<float> rows(static_cast<size_t>((history + T) * conv_dim));
  std::copy(state.conv.begin(), state.conv.end(), rows.begin());
  std::copy(mixed.begin(), mixed.end(), rows.begin() + history * conv_dim);
  const std::vector<float> conv_w = to_f32(w.conv1d);
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t c = 0; c < conv_dim; ++c) {
      float sum = 0.0f;
      for (int64_t j = 0; j < kernel; ++j) sum += conv_w[static_cast<size_t>(c * kernel + j)] * rows[static_cast<size_t>((t + j) * conv_dim + c)];
      mixed[static_cast<size_t>(t * conv_dim + c)] = silu(sum);
    }
  }
  state.conv.assign(rows.end() - history * conv_dim, rows.end());

  // 3. Per value head: q/k from key head h / (hv/hk), decay g and beta, then the delta rule.
  const std::vector<float> a_log = to_f32(w.a_log), dt_bias = to_f32(w.dt_bias);
  const int64_t group = hv / hk;
  const float q_scale = 1.0f / std::sqrt(static_cast<float>(dk));
  std::vector<float> core(static_cast<size_t>(T * value_dim));
  for (int64_t h = 0; h < hv; ++h) {
    const int64_t kh = h / group;
    HeadInputs in;
    in.q.resize(static_cast<size_t>(T * dk));
    in.k.resize(static_cast<size_t>(T * dk));
    in.v.resize(static_cast<size_t>(T * dv));
    in.beta.resize(static_cast<size_t>(T));
    in.g.resize(static_cast<size_t>(T));
    for (int64_t t = 0; t < T; ++t) {
      const float* row = mixed.data() + t * conv_dim;
      std::copy_n(row + kh * dk, dk, in.q.data() + t * dk);
      std::copy_n(row + key_dim + kh * dk, dk, in.k.data() + t * dk);
      std::copy_n(row + 2 * key_dim + h * dv, dv, in.v.data() + t * dv);
      l2_normalize(in.q.data() + t * dk, dk, q_scale);
      l2_normalize(in.k.data() + t * dk, dk, 1.0f);
      in.beta[static_cast<size_t>(t)] = sigmoid(b[static_cast<size_t>(t * hv + h)]);
      in.g[static_cast<size_t>(t)] = -std::exp(a_log[static_cast<size_t>(h)]) * softplus(a[static_cast<size_t>(t * hv + h)] + dt_bias[static_cast<size_t>(h)]);
    }
    float* S = state.recurrent.data() + h * dk * dv;
    float* out = core.data() + h * dv;
    if (chunked) {
      chunked_head(in, T, dk, dv, S, out, value_dim);
    } else {
      recurrent_head(in, T, dk, dv, S, out, value_dim);
    }
  }
  state.has_previous = true;

  // 4. Gated RMSNorm per head (plain w, gate sigmoid or SiLU), then the output projection.
  const std::vector<float> norm_w = to_f32(w.norm);
  const bool sigmoid_gate = config.output_gate_type == "sigmoid";
  for (int64_t i = 0; i < T * hv; ++i) {
    float* o = core.data() + i * dv;
    const float* gate = z.data() + i * dv;
    const float inv = 1.0f / std::sqrt(dot(o, o, dv) / static_cast<float>(dv) + static_cast<float>(config.rms_norm_eps));
    for (int64_t j = 0; j < dv; ++j) {
      const float act = sigmoid_gate ? sigmoid(gate[j]) : silu(gate[j]);
      o[j] = norm_w[static_cast<size_t>(j)] * (o[j] * inv) * act;
    }
  }
  linear(w.out_proj, core.data(), T, y);
}

}  // namespace imp::cpu
