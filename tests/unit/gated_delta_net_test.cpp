// The Gated DeltaNet's chunked prefill form and its token-by-token recurrence are the same function:
// over several 64-token chunks, with state carried across calls, on random fp32 weights.
#include <gtest/gtest.h>

#include <random>

#include "cpu/blocks.h"

namespace imp::cpu {
namespace {

struct OwnedTensor {
  std::vector<float> data;
  model::TensorInfo info;
  OwnedTensor(std::vector<int64_t> shape, std::mt19937& rng, float scale, float offset = 0.0f) {
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    std::normal_distribution<float> dist(0.0f, scale);
    for (int64_t i = 0; i < n; ++i) data.push_back(offset + dist(rng));
    info.name = "test";
    info.dtype = DType::kF32;
    info.shape = std::move(shape);
    info.data = reinterpret_cast<const uint8_t*>(data.data());
    info.nbytes = data.size() * sizeof(float);
  }
};

class GatedDeltaNetTest : public testing::Test {
 protected:
  GatedDeltaNetTest() {
    config.hidden_size = 32;
    config.linear_num_key_heads = 2;
    config.linear_num_value_heads = 4;
    config.linear_key_head_dim = 16;
    config.linear_value_head_dim = 8;
    config.linear_conv_kernel_dim = 4;
    config.output_gate_type = "sigmoid";
  }
  model::ModelConfig config;
  std::mt19937 rng{1234};
  const int64_t d = 32, conv = 2 * 2 * 16 + 4 * 8, hv = 4;
  OwnedTensor qkv{{conv, d}, rng, 0.2f}, z{{4 * 8, d}, rng, 0.2f}, b{{hv, d}, rng, 0.2f}, a{{hv, d}, rng, 0.2f},
      conv1d{{conv, 1, 4}, rng, 0.5f}, dt_bias{{hv}, rng, 0.3f}, a_log{{hv}, rng, 0.5f}, norm{{8}, rng, 0.1f, 1.0f},
      out_proj{{d, 4 * 8}, rng, 0.2f};
  model::GatedDeltaNetWeights weights() const {
    return {&qkv.info, &z.info, &b.info, &a.info, &conv1d.info, &dt_bias.info, &a_log.info, &norm.info, &out_proj.info};
  }
  GatedDeltaNetState fresh() const {
    GatedDeltaNetState s;
    s.conv.assign(static_cast<size_t>(3 * conv), 0.0f);
    s.recurrent.assign(static_cast<size_t>(hv * 16 * 8), 0.0f);
    return s;
  }
};

TEST_F(GatedDeltaNetTest, ChunkedEqualsRecurrentAcrossChunksAndCalls) {
  const int64_t T = 150;  // three chunks, the last one partial
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(T * d));
  for (float& v : x) v = dist(rng);

  GatedDeltaNetState chunked_state = fresh(), recurrent_state = fresh(), split_state = fresh();
  std::vector<float> chunked(x.size()), recurrent(x.size()), split(x.size());
  gated_delta_net(config, weights(), x.data(), T, chunked_state, true, chunked.data());
  gated_delta_net(config, weights(), x.data(), T, recurrent_state, false, recurrent.data());
  // Prefill 70 in chunked form, then 2 single steps, then the rest chunked again, all with carried state.
  int64_t begin = 0;
  for (auto [count, is_chunked] : {std::pair<int64_t, bool>{70, true}, {1, false}, {1, false}, {78, true}}) {
    gated_delta_net(config, weights(), x.data() + begin * d, count, split_state, is_chunked, split.data() + begin * d);
    begin += count;
  }
  // fp32, O(100) sequential updates: agreement to 1e-5 of the output scale.
  float scale = 0.0f;
  for (float v : recurrent) scale = std::max(scale, std::fabs(v));
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_NEAR(chunked[i], recurrent[i], 1e-5f * scale) << i;
    ASSERT_NEAR(split[i], recurrent[i], 1e-5f * scale) << i;
  }
  for (size_t i = 0; i < chunked_state.recurrent.size(); ++i) {
    ASSERT_NEAR(chunked_state.recurrent[i], recurrent_state.recurrent[i], 1e-4f) << i;
    ASSERT_NEAR(split_state.recurrent[i], recurrent_state.recurrent[i], 1e-4f) << i;
  }
  EXPECT_EQ(chunked_state.conv, recurrent_state.conv);
}

}  // namespace
}  // namespace imp::cpu
