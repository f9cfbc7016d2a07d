// Plain fp32 reference operations shared by the CPU blocks. Activations are row-major [rows, width]
// float arrays; weights are views into the checkpoint converted to fp32 as they are read.
#pragma once

#include <cmath>
#include <cstdint>
#include <span>
#include <vector>

#include "model/weights.h"

namespace imp::cpu {

using model::Tensor;

// Row `row` of a dense 2-D tensor [rows, cols] as fp32.
void read_row(Tensor tensor, int64_t row, float* out);

// Whole tensor as fp32 (BF16/F16/F32). Used for the small per-layer vectors (norms, conv kernels).
std::vector<float> to_f32(Tensor tensor);

// y[t, n] = sum_k x[t, k] * W[n, k] for a dense W [out, in]; y is overwritten. Parallel over n.
void linear(Tensor weight, const float* x, int64_t rows, float* y);
// The same for a routed-expert projection, dense or NVFP4 (dequantised row by row, W4A16 math).
void linear(const model::ExpertProjection& weight, const float* x, int64_t rows, float* y);

// (1 + w) RMSNorm over groups of `group` consecutive elements of each row of `width`; w spans the width.
void rms_norm(const float* x, std::span<const float> weight, int64_t rows, int64_t width, int64_t group, double eps,
              float* y);

inline float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
inline float silu(float x) { return x * sigmoid(x); }
// torch.nn.functional.softplus with beta 1 and threshold 20.
inline float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

float dot(const float* a, const float* b, int64_t n);

// Partial NeoX rotary embedding: rotates dims [0, rotary_dim) of a head in pairs (i, i + rotary_dim/2).
struct Rope {
  std::vector<float> inv_freq;  // rotary_dim / 2
  explicit Rope(const model::ModelConfig& config);
  int64_t rotary_dim() const { return static_cast<int64_t>(inv_freq.size()) * 2; }
  void apply(float* head, int64_t position) const;
};

}  // namespace imp::cpu
