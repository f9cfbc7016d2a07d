// DeviceModel::build_low_term_weights on a golden fixture (QSA attention, a shared expert): which rows get an fp16
// copy (the GDN value and gate rows, the attention query/key/value rows, the shared expert's gate | up rows, the
// GDN and attention output projections) and which an E4M3 copy (the GDN query and key rows, the shared expert's
// down projection); never the router's or the QSA indexer's rows, whose outputs feed a top-k choice. The copies hold those rows (E4M3 against
// launch_quantize_rows_e4m3 of the same rows, fp16 against launch_f16_rows with the largest power-of-two scale
// that keeps the rows' largest magnitude within 2^15, bit for bit), the reads whose x those fp16 rows multiply
// carry their scale (sqrt(d) max |1 + norm| within 2^15), so do the output projections' inputs (their bounds from
// the weights, GatedDeltaNetDevice / AttentionDevice::core16_scale), and low_term_weight_bytes counts exactly what
// was built.
// Run from the repository root.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "core/dtype.h"

#include "cuda/check.h"
#include "cuda/device_model.h"
#include "cuda/kernels/gemm_bf16_split.h"
#include "cuda/memory/device_buffer.h"
#include "gpu_test_util.h"
#include "model/checkpoint.h"
#include "model/config.h"
#include "model/weights.h"

namespace imp::cuda {
namespace {

using testing_support::download_bits;

// The copy of rows [first, end) of w equals a fresh quantization of those rows.
void expect_copy_of_rows(const DenseWeight& w, int32_t first, int32_t end, const char* what) {
  ASSERT_NE(w.low8.codes.data, nullptr) << what;
  EXPECT_EQ(w.low8.first, first) << what;
  EXPECT_EQ(w.low8.end, end) << what;
  const size_t rows = static_cast<size_t>(end - first), cols = static_cast<size_t>(w.cols);
  DeviceBuffer<uint8_t> codes(rows * cols);
  DeviceBuffer<float> scales(rows);
  launch_quantize_rows_e4m3(w.data + static_cast<size_t>(first) * cols, end - first, w.cols, codes.data(), scales.data(),
                            nullptr);
  IMP_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<uint8_t> got(rows * cols);
  std::vector<float> got_scales(rows);
  IMP_CUDA_CHECK(cudaMemcpy(got.data(), w.low8.codes.data, got.size(), cudaMemcpyDeviceToHost));
  IMP_CUDA_CHECK(cudaMemcpy(got_scales.data(), w.low8.codes.scales, rows * sizeof(float), cudaMemcpyDeviceToHost));
  EXPECT_EQ(got, codes.download()) << what;
  EXPECT_EQ(got_scales, scales.download()) << what;
}

// The largest power of two p with bound * p <= 2^15 (checked against the definition, not computed the same way;
// `slack`: the relative difference allowed where the engine sums the bound in fp32).
void expect_scale_for(float scale, double bound, const char* what, double slack = 0.0) {
  EXPECT_EQ(std::exp2(std::round(std::log2(scale))), scale) << what << ": not a power of two";
  EXPECT_LE(bound * scale, 32768.0 * (1.0 + slack)) << what;
  EXPECT_GT(bound * scale * 2, 32768.0 * (1.0 - slack)) << what << ": not the largest";
}

// The largest row sum of |w| over rows [first, first + rows) of w, in double.
double max_row_abs_sum(const DenseWeight& w, int64_t first, int64_t rows) {
  const std::vector<uint16_t> bits = download_bits(w.data + first * w.cols, static_cast<size_t>(rows * w.cols));
  double best = 0.0;
  for (int64_t r = 0; r < rows; ++r) {
    double sum = 0.0;
    for (int32_t i = 0; i < w.cols; ++i) sum += std::fabs(bf16_to_f32(bits[static_cast<size_t>(r * w.cols + i)]));
    best = std::max(best, sum);
  }
  return best;
}

// sqrt(d) max |1 + norm| of a read.
double read_bound(const HyperConnectionDevice& hc, int64_t d) {
  const std::vector<uint16_t> norm = download_bits(hc.norm.data, static_cast<size_t>(hc.norm.rows) * static_cast<size_t>(hc.norm.cols));
  double amax = 0.0;
  for (uint16_t b : norm) amax = std::max(amax, std::fabs(1.0 + static_cast<double>(bf16_to_f32(b))));
  return std::sqrt(static_cast<double>(d)) * amax;
}

// The fp16 copy of rows [first, end) of w: the rows times one power-of-two scale, rounded to fp16.
void expect_f16_copy_of_rows(const DenseWeight& w, int32_t first, int32_t end, const char* what) {
  ASSERT_NE(w.half.rows.data, nullptr) << what;
  EXPECT_EQ(w.half.first, first) << what;
  EXPECT_EQ(w.half.end, end) << what;
  const size_t count = static_cast<size_t>(end - first) * static_cast<size_t>(w.cols);
  const std::vector<uint16_t> bf16 = download_bits(w.data + static_cast<size_t>(first) * static_cast<size_t>(w.cols), count);
  double amax = 0.0;
  for (uint16_t b : bf16) amax = std::max(amax, std::fabs(static_cast<double>(bf16_to_f32(b))));
  expect_scale_for(w.half.rows.scale, amax, what);
  DeviceBuffer<uint16_t> want(count);
  launch_f16_rows(w.data + static_cast<size_t>(first) * static_cast<size_t>(w.cols), count, w.half.rows.scale, want.data(),
                  nullptr);
  IMP_CUDA_CHECK(cudaDeviceSynchronize());
  EXPECT_EQ(download_bits(w.half.rows.data, count), want.download()) << what;
}

// A read whose x feeds fp16 rows: its scale maps sqrt(d) max |1 + norm| to at most 2^15.
void expect_read_scale(const HyperConnectionDevice& hc, int64_t d, const char* what) {
  expect_scale_for(hc.x16_scale, read_bound(hc, d), what);
}

TEST(GpuLowTermWeights, CopiesEveryRowButThoseFeedingATopKChoice) {
  const char* dir = "tests/fixtures/golden/ple_qsa";
  const model::ModelConfig c = model::load_config(dir);
  ASSERT_TRUE(c.has_qsa);
  const model::Checkpoint checkpoint = model::Checkpoint::open(dir);
  const std::unique_ptr<DeviceModel> m = DeviceModel::upload(c, model::bind_weights(c, checkpoint));
  ASSERT_FALSE(m->has_low_term_weights());
  m->build_low_term_weights();
  ASSERT_TRUE(m->has_low_term_weights());

  const int32_t qkv = static_cast<int32_t>(c.num_attention_heads * 2 * c.head_dim + 2 * c.num_key_value_heads * c.head_dim);
  const int32_t experts = static_cast<int32_t>(c.num_experts), shared = static_cast<int32_t>(2 * c.shared_expert_intermediate_size);
  uint64_t bytes = 0;
  const int32_t qk = static_cast<int32_t>(2 * c.gdn_key_dim()), vz_end = static_cast<int32_t>(c.gdn_conv_dim() + c.gdn_value_dim());
  auto count = [&](const DenseWeight& w) {
    bytes += static_cast<uint64_t>(w.low8.end - w.low8.first) * (static_cast<uint64_t>(w.cols) + 4);
    bytes += static_cast<uint64_t>(w.half.end - w.half.first) * static_cast<uint64_t>(w.cols) * 2;
  };
  int attention_layers = 0, gdn_layers = 0;
  for (const LayerDevice& l : m->layers()) {
    if (l.gdn) {
      ++gdn_layers;
      expect_copy_of_rows(l.gdn->in_proj, 0, qk, "GDN in_proj (query and key rows)");
      ASSERT_EQ(l.gdn->in_proj.rows, vz_end + 2 * c.linear_num_value_heads) << "b and a follow v and z";
      expect_f16_copy_of_rows(l.gdn->in_proj, qk, vz_end, "GDN in_proj (value and gate rows)");
      expect_f16_copy_of_rows(l.gdn->out_proj, 0, l.gdn->out_proj.rows, "GDN out_proj");
      EXPECT_EQ(l.gdn->out_proj.low8.codes.data, nullptr) << "GDN out_proj: an E4M3 copy";
      expect_read_scale(l.attn_hc, c.hidden_size, "the GDN block's read");
      // sqrt(head dim) max |norm| max |z|, |z_i| <= |W_z row i|_1 * sqrt(d) max |1 + read norm|
      const double z_row = max_row_abs_sum(l.gdn->in_proj, c.gdn_conv_dim(), c.gdn_value_dim());
      const std::vector<uint16_t> norm = download_bits(l.gdn->small.norm, static_cast<size_t>(c.linear_value_head_dim));
      double norm_max = 0.0;
      for (uint16_t b : norm) norm_max = std::max(norm_max, std::fabs(static_cast<double>(bf16_to_f32(b))));
      expect_scale_for(l.gdn->core16_scale,
                       std::sqrt(static_cast<double>(c.linear_value_head_dim)) * norm_max *
                           std::max(0.2785, z_row * read_bound(l.attn_hc, c.hidden_size)),
                       "the GDN output projection's input", 1e-5);
      count(l.gdn->in_proj);
      count(l.gdn->out_proj);
    }
    if (l.attention) {
      ++attention_layers;
      ASSERT_GT(l.attention->in_proj.rows, qkv) << "the indexer's rows follow the query/key/value rows";
      EXPECT_EQ(l.attention->in_proj.low8.codes.data, nullptr) << "attention in_proj: an E4M3 copy";
      expect_f16_copy_of_rows(l.attention->in_proj, 0, qkv, "attention in_proj (without the indexer rows)");
      expect_f16_copy_of_rows(l.attention->o_proj, 0, l.attention->o_proj.rows, "attention o_proj");
      EXPECT_EQ(l.attention->o_proj.low8.codes.data, nullptr) << "attention o_proj: an E4M3 copy";
      expect_read_scale(l.attn_hc, c.hidden_size, "the attention block's read");
      // max |W_v row i|_1 * sqrt(d) max |1 + read norm|
      const int64_t kv_width = c.num_key_value_heads * c.head_dim, v_first = c.num_attention_heads * 2 * c.head_dim + kv_width;
      const double v_row = max_row_abs_sum(l.attention->in_proj, v_first, kv_width);
      expect_scale_for(l.attention->core16_scale, v_row * read_bound(l.attn_hc, c.hidden_size),
                       "the attention output projection's input", 1e-5);
      count(l.attention->in_proj);
      count(l.attention->o_proj);
    }
    ASSERT_EQ(l.moe.in_proj.rows, experts + shared + 1);
    EXPECT_EQ(l.moe.in_proj.low8.codes.data, nullptr) << "MoE in_proj: an E4M3 copy";
    expect_f16_copy_of_rows(l.moe.in_proj, experts, experts + shared, "MoE in_proj (the shared gate | up rows only)");
    expect_copy_of_rows(l.moe.shared_down, 0, l.moe.shared_down.rows, "shared down");
    expect_read_scale(l.mlp_hc, c.hidden_size, "the MoE block's read");
    count(l.moe.in_proj);
    count(l.moe.shared_down);
  }
  EXPECT_GT(attention_layers, 0);
  EXPECT_GT(gdn_layers, 0);
  EXPECT_EQ(m->mixer().x16_scale, 0.0f) << "the final read feeds no fp16 rows";
  EXPECT_EQ(m->low_term_weight_bytes(), bytes);
}

}  // namespace
}  // namespace imp::cuda
