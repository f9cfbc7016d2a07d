// The GPU QSA selection (block-key cache + scores + radix top-k) against cpu::qsa_select: the decode path with its
// index prep (launch_qsa_decode_select) and the per-row one (launch_qsa_select), dense and beyond the budget, at
// the released indexer shapes and with many exact score ties; the batched prefill selection
// (launch_qsa_select_rows, bitmaps) against cpu::qsa_select and the per-row kernel.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "cpu/blocks.h"
#include "cpu/ops.h"
#include "cuda/kernels/qsa.h"
#include "cuda/memory/device_buffer.h"
#include "gpu_test_util.h"

namespace imp::cuda {
namespace {

using namespace testing_support;

// The decode path (launch_qsa_decode_select: the token's index prep, scores and selection; the cluster selection on
// shared or whole SMs, alternating) token by token from half the budget (or half the context) on,
// after the earlier block keys were written by range (prefill): each token's raw query heads and raw key go in as
// the index GEMV writes them. At the checked positions:
//   - the scores (before every block fits the budget) within 1e-4 of the largest of a host reference from the
//     CPU's normed, rotated queries (cpu::rms_norm + Rope::apply; the device's norm and sin/cos round differently)
//     and the cache's block keys;
//   - the token list exactly the top blocks of the device's own scores (ties: lower block) plus the tail, or every
//     token while the blocks fit the budget;
//   - the same queries normed on the host through the per-row path (launch_qsa_select, prefill's fallback) give
//     exactly cpu::qsa_select's list, which builds its block keys from the raw keys itself.
// After the last token the raw-key cache holds every token's key and the block keys are bit for bit those of the
// range kernel; the slots past the last complete block keep their NaN fill.
// capacity_blocks: the block-key cache's capacity (0: just the blocks), which picks the cluster selection or the
// one-block kernel that reads the scores from L2 in every pass.
void run_case(int heads, int dim, int budget, int ratio, int tokens, float query_bias, int capacity_blocks = 0) {
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
  const int rot = static_cast<int>(config.rotary_dim()), block_topk = budget / ratio;
  constexpr float kEps = 1e-6f;
  const float nan = std::numeric_limits<float>::quiet_NaN();

  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> raw(static_cast<size_t>(tokens) * dim);
  for (float& v : raw) v = dist(rng());
  std::vector<uint16_t> k_norm_bits(static_cast<size_t>(dim)), q_norm_bits(static_cast<size_t>(dim));
  for (auto& b : k_norm_bits) b = f32_to_bf16(0.1f * dist(rng()));
  for (auto& b : q_norm_bits) b = f32_to_bf16(0.1f * dist(rng()));
  const model::TensorInfo k_norm = host_tensor(k_norm_bits.data(), DType::kBF16, {dim});
  const model::TensorInfo q_norm = host_tensor(q_norm_bits.data(), DType::kBF16, {dim});
  const model::IndexerWeights w{nullptr, nullptr, &k_norm};

  // The decode starts below the budget (so the first selections beyond it are decode's) and mid-context at most.
  const int blocks = tokens / ratio, start = std::min(blocks / 2, budget / 2 / ratio) * ratio;
  const int capacity = std::max(capacity_blocks, blocks);
  std::vector<float> raw_cache(raw.size(), nan);
  std::copy_n(raw.begin(), static_cast<ptrdiff_t>(start) * dim, raw_cache.begin());
  DeviceBuffer<float> d_raw(raw_cache), d_inv_freq(rope.inv_freq);
  DeviceBuffer<uint16_t> d_k_norm(k_norm_bits), d_q_norm(q_norm_bits);
  DeviceBuffer<float> d_block_keys(std::vector<float>(static_cast<size_t>(capacity) * dim, nan));
  DeviceBuffer<float> d_scores(static_cast<size_t>(blocks) + 1);
  launch_qsa_block_keys(d_raw.data(), 0, start / ratio, ratio, dim, d_k_norm.data(), kEps, rot, d_inv_freq.data(),
                        d_block_keys.data(), nullptr);

  DeviceBuffer<int32_t> d_position(1);
  DeviceBuffer<float> d_index(static_cast<size_t>(heads + 1) * dim);
  QsaDecodeIndex index;
  index.index = d_index.data();
  index.q_norm = d_q_norm.data();
  index.k_norm = d_k_norm.data();
  index.heads = heads;
  index.dim = dim;
  index.rotary_dim = rot;
  index.ratio = ratio;
  index.inv_freq = d_inv_freq.data();
  index.eps = kEps;
  index.raw_keys = d_raw.data();
  index.block_keys = d_block_keys.data();
  index.positions = d_position.data();

  const int max_selected = budget + ratio - 1;
  DeviceBuffer<int32_t> d_selected(static_cast<size_t>(max_selected)), d_count(1);
  auto selection = [&] {
    const int count = d_count.download()[0];
    const std::vector<int32_t> all = d_selected.download();
    return std::vector<int64_t>(all.begin(), all.begin() + count);
  };
  const std::vector<int> checked = {ratio - 1, budget + ratio - 2, budget + ratio - 1, tokens / 2 + 1, tokens - 1};
  for (int32_t p = start; p < tokens; ++p) {
    std::vector<float> row(static_cast<size_t>(heads + 1) * dim);
    for (size_t i = 0; i < static_cast<size_t>(heads) * dim; ++i) row[i] = dist(rng()) + query_bias;
    std::copy_n(raw.begin() + static_cast<ptrdiff_t>(p) * dim, dim, row.begin() + static_cast<ptrdiff_t>(heads) * dim);
    d_index.upload(row);
    d_position.upload(std::span<const int32_t>(&p, 1));
    // Both placements of the cluster selection (the decode graphs' two regimes), alternating over the positions and
    // over the checked ones (so each is checked beyond the budget: checks 2 and 4 shared, 3 on whole SMs).
    const auto check = std::find(checked.begin(), checked.end(), p);
    const bool whole_sms = check == checked.end() ? (p & 1) != 0 : (check - checked.begin()) % 2 == 1;
    launch_qsa_decode_select(index, block_topk, capacity, d_scores.data(), d_selected.data(), d_count.data(), whole_sms,
                             nullptr);
    if (check == checked.end()) continue;

    std::vector<float> queries(row.begin(), row.begin() + static_cast<ptrdiff_t>(heads) * dim);
    cpu::rms_norm(queries.data(), cpu::to_f32(&q_norm), heads, dim, dim, kEps, queries.data());
    for (int h = 0; h < heads; ++h) rope.apply(queries.data() + static_cast<size_t>(h) * dim, p);
    const int visible = p + 1, row_blocks = visible / ratio;
    const std::vector<int64_t> got = selection();
    std::vector<int64_t> want;
    if (row_blocks <= block_topk) {
      for (int t = 0; t < visible; ++t) want.push_back(t);
    } else {
      const std::vector<float> keys = d_block_keys.download(), scores = d_scores.download();
      double largest = 0.0, diff = 0.0;
      for (int b = 0; b < row_blocks; ++b) {
        double score = 0.0;
        for (int h = 0; h < heads; ++h) {
          double dot = 0.0;
          for (int i = 0; i < dim; ++i) {
            dot += static_cast<double>(queries[static_cast<size_t>(h) * dim + i]) * keys[static_cast<size_t>(b) * dim + i];
          }
          score += std::max(0.0, dot);
        }
        score /= std::sqrt(static_cast<double>(dim));
        ASSERT_TRUE(std::isfinite(scores[static_cast<size_t>(b)])) << "position " << p << " block " << b;
        largest = std::max(largest, std::fabs(score));
        diff = std::max(diff, std::fabs(scores[static_cast<size_t>(b)] - score));
      }
      EXPECT_LE(diff, 1e-4 * largest) << "position " << p;
      std::vector<int> order(static_cast<size_t>(row_blocks));
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
        return scores[static_cast<size_t>(a)] > scores[static_cast<size_t>(b)];
      });
      order.resize(static_cast<size_t>(block_topk));
      std::sort(order.begin(), order.end());
      for (int b : order) {
        for (int r = 0; r < ratio; ++r) want.push_back(static_cast<int64_t>(b) * ratio + r);
      }
      for (int t = row_blocks * ratio; t < visible; ++t) want.push_back(t);
    }
    ASSERT_EQ(got, want) << "decode, position " << p;

    DeviceBuffer<float> d_queries(queries);
    launch_qsa_select(d_queries.data(), heads, dim, d_block_keys.data(), d_position.data(), ratio, block_topk, capacity,
                      d_scores.data(), d_selected.data(), d_count.data(), nullptr);
    ASSERT_EQ(selection(), cpu::qsa_select(config, w, rope, queries.data(), raw.data(), p)) << "per row, position " << p;
  }

  const std::vector<float> got_raw = d_raw.download(), got_keys = d_block_keys.download();
  for (size_t i = 0; i < raw.size(); ++i) ASSERT_EQ(std::memcmp(&got_raw[i], &raw[i], sizeof(float)), 0) << "raw key element " << i;
  DeviceBuffer<float> d_want_keys(static_cast<size_t>(blocks) * dim);
  launch_qsa_block_keys(d_raw.data(), 0, blocks, ratio, dim, d_k_norm.data(), kEps, rot, d_inv_freq.data(),
                        d_want_keys.data(), nullptr);
  const std::vector<float> want_keys = d_want_keys.download();
  for (size_t i = 0; i < got_keys.size(); ++i) {
    if (i < want_keys.size()) {
      ASSERT_EQ(std::memcmp(&got_keys[i], &want_keys[i], sizeof(float)), 0) << "block key element " << i;
    } else {
      ASSERT_TRUE(std::isnan(got_keys[i])) << "block key slot element " << i << " past the last complete block";
    }
  }
}

// The batched selection: rows at many positions (before, at and beyond the budget, random ones) in one
// launch; each row's bitmap must describe exactly cpu::qsa_select's token list and the per-row kernel's
// ({s <= p : bit s / ratio}), bits past the tail's block in its word must be zero and later words untouched.
// equal_scores: every token has the same raw key and the queries are zero on the rotated dims, so every
// block scores bit-identically (positive) and the top-k is decided by the tie rule alone (lowest blocks).
void run_rows_case(int heads, int dim, int budget, int ratio, int tokens, float query_bias, bool equal_scores,
                   int random_rows) {
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
  const int rot = static_cast<int>(config.rotary_dim()), block_topk = budget / ratio;

  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> raw(static_cast<size_t>(tokens) * dim);
  for (float& v : raw) v = dist(rng());
  if (equal_scores) {
    for (int t = 1; t < tokens; ++t) std::copy_n(raw.begin(), dim, raw.begin() + static_cast<ptrdiff_t>(t) * dim);
  }
  std::vector<uint16_t> k_norm_bits(static_cast<size_t>(dim));
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
  DeviceBuffer<float> d_block_keys(static_cast<size_t>(std::max(blocks, 1)) * dim), d_scores(static_cast<size_t>(blocks) + 1);
  launch_qsa_block_keys(d_raw.data(), 0, blocks, ratio, dim, d_k_norm.data(), 1e-6f, rot, d_inv_freq.data(),
                        d_block_keys.data(), nullptr);

  std::vector<int32_t> positions;
  for (int p : {0, 1, ratio - 1, ratio, budget - 1, budget, budget + ratio - 2, budget + ratio - 1, budget + ratio,
                budget + 2 * ratio + 1, tokens / 2 + 1, tokens - 2, tokens - 1}) {
    if (p >= 0 && p < tokens) positions.push_back(p);
  }
  std::uniform_int_distribution<int> any_position(0, tokens - 1);
  for (int i = 0; i < random_rows; ++i) positions.push_back(any_position(rng()));
  const int rows = static_cast<int>(positions.size());
  std::vector<float> queries(static_cast<size_t>(rows) * heads * dim);
  for (size_t i = 0; i < queries.size(); ++i) queries[i] = equal_scores && static_cast<int>(i % dim) < rot ? 0.0f : dist(rng()) + query_bias;

  // Words past what the rows need stay 0xffffffff: the kernel must write exactly words 0 .. blocks / 32.
  const int mask_words = blocks / 32 + 2;
  DeviceBuffer<float> d_queries(queries);
  DeviceBuffer<int32_t> d_positions(positions);
  DeviceBuffer<uint32_t> d_mask(std::vector<uint32_t>(static_cast<size_t>(rows) * mask_words, 0xffffffffu));
  launch_qsa_select_rows(d_queries.data(), rows, heads, dim, d_block_keys.data(), d_positions.data(), blocks, ratio,
                         block_topk, d_mask.data(), mask_words, nullptr);
  IMP_CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<uint32_t> mask = d_mask.download();

  DeviceBuffer<int32_t> d_selected(static_cast<size_t>(budget + ratio - 1)), d_count(1);
  for (int r = 0; r < rows; ++r) {
    const int p = positions[static_cast<size_t>(r)], row_blocks = (p + 1) / ratio;
    const uint32_t* row_mask = mask.data() + static_cast<size_t>(r) * mask_words;
    const auto bit = [&](int j) { return (row_mask[j / 32] >> (j % 32)) & 1u; };
    std::vector<int64_t> got;
    for (int tok = 0; tok <= p; ++tok) {
      if (bit(tok / ratio)) got.push_back(tok);
    }
    const std::vector<int64_t> want =
        cpu::qsa_select(config, w, rope, queries.data() + static_cast<size_t>(r) * heads * dim, raw.data(), p);
    ASSERT_EQ(got, want) << "row " << r << " position " << p;

    launch_qsa_select(d_queries.data() + static_cast<size_t>(r) * heads * dim, heads, dim, d_block_keys.data(),
                      d_positions.data() + r, ratio, block_topk, std::max(blocks, 1), d_scores.data(),
                      d_selected.data(), d_count.data(), nullptr);
    const int count = d_count.download()[0];
    const std::vector<int32_t> per_row = d_selected.download();
    ASSERT_EQ(std::vector<int64_t>(per_row.begin(), per_row.begin() + count), got) << "row " << r << " position " << p;

    // Bitmap format: the tail's block bit iff the row's last block is incomplete, zeros above it in its word,
    // later words untouched.
    ASSERT_EQ(bit(row_blocks), (p + 1) % ratio != 0 ? 1u : 0u) << "position " << p;
    for (int j = row_blocks + 1; j < (row_blocks / 32 + 1) * 32; ++j) ASSERT_EQ(bit(j), 0u) << "position " << p << " bit " << j;
    for (int wd = row_blocks / 32 + 1; wd < mask_words; ++wd) ASSERT_EQ(row_mask[wd], 0xffffffffu) << "position " << p;
  }
}

TEST(GpuQsa, SelectionMatchesCpuAtReleasedShapes) { run_case(4, 128, 2048, 4, 3000, 0.0f); }
// Strongly negative queries: most blocks score exactly 0, so the cut falls inside a run of ties.
TEST(GpuQsa, SelectionMatchesCpuWithManyTies) { run_case(2, 32, 32, 4, 400, -1.5f); }
// The most index heads the kernels hold (8): the decode score kernel's warp 0 also appends the raw key.
TEST(GpuQsa, SelectionMatchesCpuWithEightIndexHeads) { run_case(8, 32, 32, 4, 400, 0.0f); }
// More blocks than the select kernel's 1024 threads (runs of several blocks per thread in the scans), at
// the released shapes and inside a run of ties.
TEST(GpuQsa, SelectionMatchesCpuBeyondOneBlockPerThread) { run_case(4, 128, 2048, 4, 9001, 0.0f); }
TEST(GpuQsa, SelectionMatchesCpuWithManyTiesBeyondOneBlockPerThread) { run_case(2, 32, 32, 4, 9001, -1.5f); }
// At 32K context (8250 blocks, the decode bench's shape), and the one-block kernel for caches beyond the
// cluster's keys (the same cases).
TEST(GpuQsa, SelectionMatchesCpuAt32k) { run_case(4, 128, 2048, 4, 33000, 0.0f); }
TEST(GpuQsa, SelectionMatchesCpuBeyondTheCluster) {
  run_case(4, 128, 2048, 4, 9001, 0.0f, qsa_select_cluster_max_blocks() + 1);
  run_case(2, 32, 32, 4, 9001, -1.5f, qsa_select_cluster_max_blocks() + 1);
}

// Batched selection (one launch, bitmaps): released shapes over ~2250 blocks; many zero-score ties (the cut
// inside a run of ties); every score equal (the tie rule alone); ratio 8 and a small head (long_sparse-like);
// more bitmap words than the kernel's 512 threads (16384+ blocks: several words per thread).
TEST(GpuQsa, RowsSelectionMatchesCpuAtReleasedShapes) { run_rows_case(4, 128, 2048, 4, 9001, 0.0f, false, 24); }
TEST(GpuQsa, RowsSelectionMatchesCpuWithManyTies) { run_rows_case(2, 32, 32, 4, 9001, -1.5f, false, 24); }
TEST(GpuQsa, RowsSelectionMatchesCpuWithAllScoresEqual) { run_rows_case(4, 128, 2048, 4, 9001, 1.0f, true, 8); }
TEST(GpuQsa, RowsSelectionMatchesCpuAtRatioEight) { run_rows_case(4, 16, 24, 8, 700, 0.0f, false, 32); }
TEST(GpuQsa, RowsSelectionMatchesCpuBeyondOneWordPerThread) { run_rows_case(2, 32, 2048, 4, 70001, 0.0f, false, 4); }

}  // namespace
}  // namespace imp::cuda
