// The GPU QSA selection (block-key cache + scores + radix top-k) against cpu::qsa_select: identical token
// lists, dense and beyond the budget, at the released indexer shapes and with many exact score ties.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "core/dtype.h"
#include "cpu/blocks.h"
#include "cuda/kernels/qsa.h"
#include "cuda/memory/device_buffer.h"
#include "gpu_test_util.h"

namespace imp::cuda {
namespace {

using namespace testing_support;

void run_case(int heads, int dim, int budget, int ratio, int tokens, float query_bias) {
  model::ModelConfig config;
  config.head_dim = dim;
  config.partial_rotary_factor = 0.5;
  config.rope_theta = 1e7;
  config.has_qsa = true;
  config.indexer_n_heads = heads;
  config.indexer_kv_heads = 1;
  config.indexer_head_dim = dim;
  config.indexer_budget = budget;
  config.indexer_compress_ratio = ratio;
  const cpu::Rope rope(config);

  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> raw(static_cast<size_t>(tokens) * dim);
  for (float& v : raw) v = dist(rng());
  std::vector<uint16_t> k_norm_bits(static_cast<size_t>(dim)), q_norm_bits(static_cast<size_t>(dim)), unused(1);
  for (auto& b : k_norm_bits) b = f32_to_bf16(0.1f * dist(rng()));
  model::TensorInfo k_norm;
  k_norm.name = "k_norm";
  k_norm.dtype = DType::kBF16;
  k_norm.shape = {dim};
  k_norm.data = reinterpret_cast<const uint8_t*>(k_norm_bits.data());
  k_norm.nbytes = k_norm_bits.size() * 2;
  const model::IndexerWeights w{nullptr, nullptr, &k_norm};

  DeviceBuffer<float> d_raw(raw), d_inv_freq(rope.inv_freq);
  DeviceBuffer<uint16_t> d_k_norm(k_norm_bits);
  const int blocks = tokens / ratio;
  DeviceBuffer<float> d_block_keys(static_cast<size_t>(blocks) * dim), d_scores(static_cast<size_t>(blocks) + 1);
  // Fill the block-key cache as blocks complete over time: the first half by range (prefill), the rest
  // token by token with the decode step kernel, which must only write when a token completes a block.
  launch_qsa_block_keys(d_raw.data(), 0, blocks / 2, ratio, dim, d_k_norm.data(), 1e-6f, static_cast<int>(config.rotary_dim()),
                        d_inv_freq.data(), d_block_keys.data(), nullptr);
  DeviceBuffer<int32_t> d_position(1);
  for (int32_t p = blocks / 2 * ratio; p < tokens; ++p) {
    d_position.upload(std::span<const int32_t>(&p, 1));
    launch_qsa_block_key_step(d_raw.data(), d_position.data(), ratio, dim, d_k_norm.data(), 1e-6f,
                              static_cast<int>(config.rotary_dim()), d_inv_freq.data(), d_block_keys.data(), nullptr);
  }

  const int max_selected = budget + ratio - 1;
  DeviceBuffer<int32_t> d_selected(static_cast<size_t>(max_selected)), d_count(1);
  for (int position : {ratio - 1, budget + ratio - 2, budget + ratio - 1, tokens / 2 + 1, tokens - 1}) {
    std::vector<float> queries(static_cast<size_t>(heads) * dim);
    for (float& v : queries) v = dist(rng()) + query_bias;
    const std::vector<int64_t> want = cpu::qsa_select(config, w, rope, queries.data(), raw.data(), position);

    DeviceBuffer<float> d_queries(queries);
    d_position.upload(std::span<const int32_t>(&position, 1));
    launch_qsa_select(d_queries.data(), heads, dim, d_block_keys.data(), d_position.data(), ratio, budget / ratio,
                      d_scores.data(), d_selected.data(), d_count.data(), nullptr);
    const int count = d_count.download()[0];
    const std::vector<int32_t> got_all = d_selected.download();
    ASSERT_EQ(count, static_cast<int>(want.size())) << "position " << position;
    for (int i = 0; i < count; ++i) ASSERT_EQ(got_all[static_cast<size_t>(i)], want[static_cast<size_t>(i)]) << "position " << position << " entry " << i;
  }
}

TEST(GpuQsa, SelectionMatchesCpuAtReleasedShapes) { run_case(4, 128, 2048, 4, 3000, 0.0f); }
// Strongly negative queries: most blocks score exactly 0, so the cut falls inside a run of ties.
TEST(GpuQsa, SelectionMatchesCpuWithManyTies) { run_case(2, 32, 32, 4, 400, -1.5f); }
// More blocks than the select kernel's 1024 threads (runs of several blocks per thread in the scans), at
// the released shapes and inside a run of ties.
TEST(GpuQsa, SelectionMatchesCpuBeyondOneBlockPerThread) { run_case(4, 128, 2048, 4, 9001, 0.0f); }
TEST(GpuQsa, SelectionMatchesCpuWithManyTiesBeyondOneBlockPerThread) { run_case(2, 32, 32, 4, 9001, -1.5f); }

}  // namespace
}  // namespace imp::cuda
