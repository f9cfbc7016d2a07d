// DeviceModel::build_low_term_weights on a golden fixture (QSA attention, a shared expert): which rows get an E4M3
// copy (every GDN and output projection row, the attention query/key/value rows, the shared expert's gate | up
// rows; never the router's or the QSA indexer's, whose outputs feed a top-k choice), that the copies hold those
// rows' codes (against launch_quantize_rows_e4m3 of the same rows, bit for bit), and that low_term_weight_bytes
// counts exactly what was built. Run from the repository root.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "cuda/check.h"
#include "cuda/device_model.h"
#include "cuda/kernels/gemm_bf16_split.h"
#include "cuda/memory/device_buffer.h"
#include "model/checkpoint.h"
#include "model/config.h"
#include "model/weights.h"

namespace imp::cuda {
namespace {

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
  auto count = [&](const DenseWeight& w) {
    bytes += static_cast<uint64_t>(w.low8.end - w.low8.first) * (static_cast<uint64_t>(w.cols) + 4);
  };
  int attention_layers = 0;
  for (const LayerDevice& l : m->layers()) {
    if (l.gdn) {
      expect_copy_of_rows(l.gdn->in_proj, 0, l.gdn->in_proj.rows, "GDN in_proj");
      expect_copy_of_rows(l.gdn->out_proj, 0, l.gdn->out_proj.rows, "GDN out_proj");
      count(l.gdn->in_proj);
      count(l.gdn->out_proj);
    }
    if (l.attention) {
      ++attention_layers;
      ASSERT_GT(l.attention->in_proj.rows, qkv) << "the indexer's rows follow the query/key/value rows";
      expect_copy_of_rows(l.attention->in_proj, 0, qkv, "attention in_proj (without the indexer rows)");
      expect_copy_of_rows(l.attention->o_proj, 0, l.attention->o_proj.rows, "attention o_proj");
      count(l.attention->in_proj);
      count(l.attention->o_proj);
    }
    ASSERT_EQ(l.moe.in_proj.rows, experts + shared + 1);
    expect_copy_of_rows(l.moe.in_proj, experts, experts + shared, "MoE in_proj (the shared gate | up rows only)");
    expect_copy_of_rows(l.moe.shared_down, 0, l.moe.shared_down.rows, "shared down");
    count(l.moe.in_proj);
    count(l.moe.shared_down);
  }
  EXPECT_GT(attention_layers, 0);
  EXPECT_EQ(m->low_term_weight_bytes(), bytes);
}

}  // namespace
}  // namespace imp::cuda
