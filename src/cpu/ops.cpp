#include "cpu/ops.h"

#include <cstring>

#include "core/error.h"
#include "core/nvfp4.h"
#include "core/thread_pool.h"

namespace imp::cpu {
namespace {

void row_to_f32(Tensor tensor, int64_t row, int64_t cols, float* out) {
  const size_t offset = static_cast<size_t>(row * cols);
  switch (tensor->dtype) {
    case DType::kF32:
      std::memcpy(out, reinterpret_cast<const float*>(tensor->data) + offset, static_cast<size_t>(cols) * sizeof(float));
      return;
    case DType::kBF16: {
      const uint16_t* src = reinterpret_cast<const uint16_t*>(tensor->data) + offset;
      for (int64_t i = 0; i < cols; ++i) out[i] = bf16_to_f32(src[i]);
      return;
    }
    case DType::kF16: {
      const uint16_t* src = reinterpret_cast<const uint16_t*>(tensor->data) + offset;
      for (int64_t i = 0; i < cols; ++i) out[i] = f16_to_f32(src[i]);
      return;
    }
    default:
      fail("tensor '{}' has dtype {}, which is not a dense float type", tensor->name, dtype_name(tensor->dtype));
  }
}

// Runs fn(n, row_buffer) for every output row with that row of W in fp32, in parallel.
template <typename RowLoader>
void matmul_rows(int64_t out_features, int64_t in_features, const float* x, int64_t rows, float* y,
                 const RowLoader& load_row) {
  ThreadPool::global().parallel_for(out_features, 16, [&](int64_t begin, int64_t end) {
    std::vector<float> w(static_cast<size_t>(in_features));
    for (int64_t n = begin; n < end; ++n) {
      load_row(n, w.data());
      for (int64_t t = 0; t < rows; ++t) y[t * out_features + n] = dot(x + t * in_features, w.data(), in_features);
    }
  });
}

}  // namespace

float dot(const float* a, const float* b, int64_t n) {
  // Eight partial sums let the compiler vectorise without reassociation flags.
  float partial[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int j = 0; j < 8; ++j) partial[j] += a[i + j] * b[i + j];
  }
  float sum = 0.0f;
  for (; i < n; ++i) sum += a[i] * b[i];
  for (float p : partial) sum += p;
  return sum;
}

void read_row(Tensor tensor, int64_t row, float* out) {
  const int64_t cols = tensor->numel() / tensor->shape[0];
  row_to_f32(tensor, row, cols, out);
}

std::vector<float> to_f32(Tensor tensor) {
  std::vector<float> out(static_cast<size_t>(tensor->numel()));
  row_to_f32(tensor, 0, tensor->numel(), out.data());
  return out;
}

void linear(Tensor weight, const float* x, int64_t rows, float* y) {
  const int64_t out_features = weight->shape[0];
  const int64_t in_features = weight->numel() / out_features;
  matmul_rows(out_features, in_features, x, rows, y,
              [&](int64_t n, float* w) { row_to_f32(weight, n, in_features, w); });
}

void linear(const model::ExpertProjection& weight, const float* x, int64_t rows, float* y) {
  if (!weight.nvfp4()) return linear(weight.weight, x, rows, y);
  const int64_t cols = weight.cols;
  matmul_rows(weight.rows, cols, x, rows, y, [&](int64_t n, float* w) {
    const std::span<const uint8_t> codes(weight.weight->data + n * cols / 2, static_cast<size_t>(cols / 2));
    const std::span<const uint8_t> scales(weight.weight_scale->data + n * cols / kNvfp4BlockSize,
                                          static_cast<size_t>(cols / kNvfp4BlockSize));
    dequantize_nvfp4(codes, scales, weight.weight_scale_2, 1, cols, std::span<float>(w, static_cast<size_t>(cols)));
  });
}

void rms_norm(const float* x, std::span<const float> weight, int64_t rows, int64_t width, int64_t group, double eps,
              float* y) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t g0 = 0; g0 < width; g0 += group) {
      const float* in = x + r * width + g0;
      float* out = y + r * width + g0;
      double sum = 0.0;
      for (int64_t i = 0; i < group; ++i) sum += static_cast<double>(in[i]) * in[i];
      const float inv = static_cast<float>(1.0 / std::sqrt(sum / static_cast<double>(group) + eps));
      for (int64_t i = 0; i < group; ++i) out[i] = in[i] * inv * (1.0f + weight[static_cast<size_t>(g0 + i)]);
    }
  }
}

Rope::Rope(const model::ModelConfig& config) {
  const int64_t dim = config.rotary_dim();
  // As the reference: base ** (arange(0, dim, 2) / dim) in fp32, then its reciprocal.
  for (int64_t i = 0; i < dim; i += 2) {
    const float exponent = static_cast<float>(i) / static_cast<float>(dim);
    inv_freq.push_back(1.0f / std::pow(static_cast<float>(config.rope_theta), exponent));
  }
}

void Rope::apply(float* head, int64_t position) const {
  const int64_t half = static_cast<int64_t>(inv_freq.size());
  for (int64_t i = 0; i < half; ++i) {
    const float angle = static_cast<float>(position) * inv_freq[static_cast<size_t>(i)];
    const float c = std::cos(angle), s = std::sin(angle);
    const float x0 = head[i], x1 = head[i + half];
    head[i] = x0 * c - x1 * s;
    head[i + half] = x1 * c + x0 * s;
  }
}

}  // namespace imp::cpu
