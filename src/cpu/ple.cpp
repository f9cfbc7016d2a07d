#include <cstring>

#include "core/error.h"
#include "cpu/blocks.h"

namespace imp::cpu {
namespace {

// One n-gram table row in fp32. FP8 rows are dequantised as the reference does: bf16(fp8 * scale).
void table_row(const model::PleWeights& w, int64_t row, int64_t width, float* out) {
  const int64_t shard = row / w.rows_per_shard;
  const int64_t local = row % w.rows_per_shard;
  if (shard >= static_cast<int64_t>(w.table_shards.size()) || local >= w.table_shards[static_cast<size_t>(shard)]->shape[0]) {
    fail("n-gram row {} is outside the table", row);
  }
  const model::TensorInfo& tensor = *w.table_shards[static_cast<size_t>(shard)];
  const size_t offset = static_cast<size_t>(local * width);
  switch (tensor.dtype) {
    case DType::kF8E4M3:
      for (int64_t i = 0; i < width; ++i) out[i] = round_to_bf16(e4m3_to_f32(tensor.data[offset + static_cast<size_t>(i)]) * w.table_scale);
      return;
    case DType::kBF16:
      for (int64_t i = 0; i < width; ++i) out[i] = bf16_to_f32(reinterpret_cast<const uint16_t*>(tensor.data)[offset + static_cast<size_t>(i)]);
      return;
    case DType::kF16:
      for (int64_t i = 0; i < width; ++i) out[i] = f16_to_f32(reinterpret_cast<const uint16_t*>(tensor.data)[offset + static_cast<size_t>(i)]);
      return;
    case DType::kF32:
      std::memcpy(out, reinterpret_cast<const float*>(tensor.data) + offset, static_cast<size_t>(width) * sizeof(float));
      return;
    default:
      fail("n-gram table '{}' has unsupported dtype {}", tensor.name, dtype_name(tensor.dtype));
  }
}

}  // namespace

void ple_block(const model::ModelConfig& config, const model::PleWeights& w, const float* stream,
               std::span<const int32_t> tokens, PleState& state, float* out) {
  const int64_t T = static_cast<int64_t>(tokens.size());
  const int64_t d = config.hidden_size, s_count = config.hc_count, width = config.stream_width();
  const int64_t heads = w.hash->heads(), head_dim = config.ple_head_dim(), e = config.ple_embed_dim;

  // 1. Gather the hashed n-gram rows: emb [T, e], head h at columns [h*head_dim, (h+1)*head_dim).
  std::vector<int64_t> ids(static_cast<size_t>(T * heads));
  w.hash->row_ids(state.context, tokens, ids);
  std::vector<float> emb(static_cast<size_t>(T * e));
  for (int64_t i = 0; i < T * heads; ++i) table_row(w, ids[static_cast<size_t>(i)], head_dim, emb.data() + i * head_dim);

  // 2. Keys per stream, one shared value, queries from the normalised stream.
  std::vector<float> key(static_cast<size_t>(T * width)), value(static_cast<size_t>(T * d)), query(static_cast<size_t>(T * width));
  linear(w.key_proj, emb.data(), T, key.data());
  rms_norm(key.data(), to_f32(w.norm_key), T, width, d, config.rms_norm_eps, key.data());
  linear(w.value_proj, emb.data(), T, value.data());
  rms_norm(stream, to_f32(w.norm_query), T, width, d, config.rms_norm_eps, query.data());

  // 3. Gate per stream with a signed square root, then gated value G [T, S*d].
  std::vector<float> gated(static_cast<size_t>(T * width));
  const float inv_sqrt_d = 1.0f / std::sqrt(static_cast<float>(d));
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t s = 0; s < s_count; ++s) {
      const int64_t base = t * width + s * d;
      float gate = dot(key.data() + base, query.data() + base, d) * inv_sqrt_d;
      const float magnitude = std::sqrt(std::max(std::fabs(gate), 1e-6f));
      gate = gate > 0.0f ? magnitude : (gate < 0.0f ? -magnitude : 0.0f);
      const float g = sigmoid(gate);
      for (int64_t j = 0; j < d; ++j) gated[static_cast<size_t>(base + j)] = g * value[static_cast<size_t>(t * d + j)];
    }
  }

  // 4. Normalise, then a causal depthwise conv with dilation ngram_size over [state rows ++ new rows].
  const int64_t kernel = config.ple_conv_kernel_size, dilation = config.ngram_size;
  const int64_t history = config.ple_conv_state_rows();
  std::vector<float> rows(static_cast<size_t>((history + T) * width));
  std::copy(state.conv.begin(), state.conv.end(), rows.begin());
  rms_norm(gated.data(), to_f32(w.norm_conv), T, width, d, config.rms_norm_eps, rows.data() + history * width);
  const std::vector<float> conv_w = to_f32(w.conv1d);  // [width, kernel]
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t c = 0; c < width; ++c) {
      float sum = 0.0f;
      for (int64_t j = 0; j < kernel; ++j) {
        sum += conv_w[static_cast<size_t>(c * kernel + j)] * rows[static_cast<size_t>((t + j * dilation) * width + c)];
      }
      out[t * width + c] = gated[static_cast<size_t>(t * width + c)] + silu(sum);
    }
  }
  state.conv.assign(rows.end() - history * width, rows.end());
}

}  // namespace imp::cpu
