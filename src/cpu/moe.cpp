#include <algorithm>
#include <numeric>

#include "cpu/blocks.h"

namespace imp::cpu {

void route(const model::ModelConfig& config, std::span<const float> logits, std::span<int64_t> experts,
           std::span<float> weights) {
  const int64_t count = static_cast<int64_t>(logits.size());
  const int64_t k = config.num_experts_per_tok;
  // Softmax in fp32 over every expert (there may be far more than 256).
  const float max_logit = *std::max_element(logits.begin(), logits.end());
  std::vector<float> probs(static_cast<size_t>(count));
  double sum = 0.0;
  for (int64_t e = 0; e < count; ++e) {
    probs[static_cast<size_t>(e)] = std::exp(logits[static_cast<size_t>(e)] - max_logit);
    sum += probs[static_cast<size_t>(e)];
  }
  for (float& p : probs) p = static_cast<float>(p / sum);
  // Top-k by probability; equal probabilities keep the lower expert id first.
  std::vector<int64_t> order(static_cast<size_t>(count));
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int64_t a, int64_t b) {
    return probs[static_cast<size_t>(a)] != probs[static_cast<size_t>(b)] ? probs[static_cast<size_t>(a)] > probs[static_cast<size_t>(b)]
                                                                            : a < b;
  });
  float top_sum = 0.0f;
  for (int64_t i = 0; i < k; ++i) top_sum += probs[static_cast<size_t>(order[static_cast<size_t>(i)])];
  for (int64_t i = 0; i < k; ++i) {
    experts[static_cast<size_t>(i)] = order[static_cast<size_t>(i)];
    const float p = probs[static_cast<size_t>(order[static_cast<size_t>(i)])];
    weights[static_cast<size_t>(i)] = config.norm_topk_prob ? p / top_sum : p;
  }
}

namespace {

// SwiGLU MLP on one row: down(silu(gate x) * up x).
void swiglu(const auto& gate, const auto& up, const auto& down, int64_t inter, const float* x, float* y) {
  std::vector<float> g(static_cast<size_t>(inter)), u(static_cast<size_t>(inter));
  linear(gate, x, 1, g.data());
  linear(up, x, 1, u.data());
  for (int64_t i = 0; i < inter; ++i) g[static_cast<size_t>(i)] = silu(g[static_cast<size_t>(i)]) * u[static_cast<size_t>(i)];
  linear(down, g.data(), 1, y);
}

}  // namespace

void moe_block(const model::ModelConfig& config, const model::MoeWeights& w, const float* x, int64_t tokens, float* y) {
  const int64_t d = config.hidden_size, k = config.num_experts_per_tok;
  std::vector<float> logits(static_cast<size_t>(tokens * config.num_experts));
  linear(w.router, x, tokens, logits.data());
  std::vector<float> shared_gate(static_cast<size_t>(tokens));
  linear(w.shared_expert_gate, x, tokens, shared_gate.data());

  std::vector<int64_t> experts(static_cast<size_t>(k));
  std::vector<float> weights(static_cast<size_t>(k));
  std::vector<float> out(static_cast<size_t>(d));
  for (int64_t t = 0; t < tokens; ++t) {
    const float* row = x + t * d;
    float* result = y + t * d;
    route(config, std::span<const float>(logits).subspan(static_cast<size_t>(t * config.num_experts), static_cast<size_t>(config.num_experts)),
          experts, weights);
    std::fill(result, result + d, 0.0f);
    for (int64_t i = 0; i < k; ++i) {
      const model::ExpertWeights& e = w.experts[static_cast<size_t>(experts[static_cast<size_t>(i)])];
      swiglu(e.gate, e.up, e.down, config.moe_intermediate_size, row, out.data());
      for (int64_t j = 0; j < d; ++j) result[j] += weights[static_cast<size_t>(i)] * out[static_cast<size_t>(j)];
    }
    swiglu(w.shared_gate_proj, w.shared_up_proj, w.shared_down_proj, config.shared_expert_intermediate_size, row,
           out.data());
    const float gate = sigmoid(shared_gate[static_cast<size_t>(t)]);
    for (int64_t j = 0; j < d; ++j) result[j] += gate * out[static_cast<size_t>(j)];
  }
}

}  // namespace imp::cpu
