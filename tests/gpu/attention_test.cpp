// GPU gated attention decode (projections by the BF16 GEMV, q/k norm + RoPE and paged KV append in the prep kernel, attention,
// output gate, o_proj) against cpu::attention for the next token after a CPU prefill: dense at the
// released shapes, and over the CPU's QSA selection beyond the budget at small shapes; fp32 and bf16 pages.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "cpu/blocks.h"
#include "cuda/kernels/attention_decode.h"
#include "cuda/check.h"
#include "cuda/kernels/dense.h"
#include "cuda/memory/device_buffer.h"
#include "gpu_test_util.h"

namespace imp::cuda {
namespace {

using namespace testing_support;

struct Case {
  int hidden, heads, kv_heads, head_dim, prompt;
  double partial_rotary;
  bool qsa;
  bool bf16_pages;
  double tolerance;
};

void run_case(const Case& t) {
  model::ModelConfig config;
  config.hidden_size = t.hidden;
  config.num_attention_heads = t.heads;
  config.num_key_value_heads = t.kv_heads;
  config.head_dim = t.head_dim;
  config.partial_rotary_factor = t.partial_rotary;
  config.rope_theta = 1e7;
  if (t.qsa) {
    config.has_qsa = true;
    config.indexer_n_heads = 4;
    config.indexer_kv_heads = 1;
    config.indexer_head_dim = 32;
    config.indexer_budget = 16;
    config.indexer_compress_ratio = 4;
  }
  const int hd = t.head_dim, kv_width = t.kv_heads * hd;
  Bf16Weight q_proj({t.heads * hd * 2, t.hidden}, 0.05f), k_proj({kv_width, t.hidden}, 0.05f),
      v_proj({kv_width, t.hidden}, 0.05f), o_proj({t.hidden, t.heads * hd}, 0.05f), q_norm({hd}, 0.1f),
      k_norm({hd}, 0.1f), index_qk({5 * 32, t.hidden}, 0.05f), index_qn({32}, 0.1f), index_kn({32}, 0.1f);
  model::AttentionWeights w{&q_proj.info, &k_proj.info, &v_proj.info, &o_proj.info, &q_norm.info, &k_norm.info,
                            std::nullopt};
  if (t.qsa) w.indexer = model::IndexerWeights{&index_qk.info, &index_qn.info, &index_kn.info};
  const cpu::Rope rope(config);

  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> prompt(static_cast<size_t>(t.prompt) * t.hidden), x(static_cast<size_t>(t.hidden));
  for (float& v : prompt) v = dist(rng());
  for (float& v : x) v = dist(rng());
  cpu::AttentionCache cache;
  std::vector<float> scratch(prompt.size());
  cpu::attention(config, w, rope, prompt.data(), t.prompt, 0, cache, scratch.data());
  if (t.bf16_pages) {  // the GPU stores bf16: let the twin see the same cached values
    for (float& v : cache.keys) v = round_to_bf16(v);
    for (float& v : cache.values) v = round_to_bf16(v);
  }

  // Pages of 16 tokens, shuffled in the pool so the page table matters.
  constexpr int kPage = 16;
  const int pages = (t.prompt + 1 + kPage - 1) / kPage;
  std::vector<int32_t> table(static_cast<size_t>(pages));
  std::iota(table.begin(), table.end(), 0);
  std::shuffle(table.begin(), table.end(), rng());
  const size_t pool_elems = static_cast<size_t>(pages) * kPage * kv_width;
  std::vector<float> keys_f(pool_elems, 0.0f), values_f(pool_elems, 0.0f);
  for (int tok = 0; tok < t.prompt; ++tok) {
    const size_t at = (static_cast<size_t>(table[tok / kPage]) * kPage + tok % kPage) * kv_width;
    std::copy_n(cache.keys.begin() + static_cast<ptrdiff_t>(tok) * kv_width, kv_width, keys_f.begin() + static_cast<ptrdiff_t>(at));
    std::copy_n(cache.values.begin() + static_cast<ptrdiff_t>(tok) * kv_width, kv_width, values_f.begin() + static_cast<ptrdiff_t>(at));
  }
  DeviceBuffer<float> d_keys_f(keys_f), d_values_f(values_f);
  std::vector<uint16_t> keys_b(pool_elems), values_b(pool_elems);
  std::transform(keys_f.begin(), keys_f.end(), keys_b.begin(), f32_to_bf16);
  std::transform(values_f.begin(), values_f.end(), values_b.begin(), f32_to_bf16);
  DeviceBuffer<uint16_t> d_keys_b(keys_b), d_values_b(values_b);
  DeviceBuffer<int32_t> d_table(table);
  KvPages pages_desc;
  pages_desc.keys = t.bf16_pages ? static_cast<void*>(d_keys_b.data()) : d_keys_f.data();
  pages_desc.values = t.bf16_pages ? static_cast<void*>(d_values_b.data()) : d_values_f.data();
  pages_desc.page_table = d_table.data();
  pages_desc.max_pages = pages;
  pages_desc.page_size = kPage;
  pages_desc.bf16 = t.bf16_pages;

  // CPU twin for the next token, and its QSA selection for that row.
  std::vector<float> want(static_cast<size_t>(t.hidden));
  cpu::attention(config, w, rope, x.data(), 1, t.prompt, cache, want.data());
  std::vector<int32_t> selected;
  if (t.qsa) {
    std::vector<float> qk(5 * 32);
    cpu::linear(w.indexer->qk_proj, x.data(), 1, qk.data());
    std::vector<float> queries(qk.begin(), qk.begin() + 4 * 32);
    cpu::rms_norm(queries.data(), cpu::to_f32(w.indexer->q_norm), 4, 32, 32, config.rms_norm_eps, queries.data());
    for (int h = 0; h < 4; ++h) rope.apply(queries.data() + h * 32, t.prompt);
    for (int64_t p : cpu::qsa_select(config, *w.indexer, rope, queries.data(), cache.index_keys.data(), t.prompt)) {
      selected.push_back(static_cast<int32_t>(p));
    }
    ASSERT_LT(static_cast<int>(selected.size()), t.prompt + 1) << "the case must be beyond the QSA budget";
  }

  DeviceBuffer<float> d_x(x), d_qg(static_cast<size_t>(t.heads) * hd * 2), d_k(static_cast<size_t>(kv_width)),
      d_v(static_cast<size_t>(kv_width)), d_attn(static_cast<size_t>(t.heads) * hd), d_y(static_cast<size_t>(t.hidden));
  DeviceBuffer<float> d_inv_freq(rope.inv_freq);
  const std::vector<int32_t> position = {t.prompt};
  DeviceBuffer<int32_t> d_pos(position);
  DeviceBuffer<int32_t> d_sel(selected.empty() ? std::vector<int32_t>{0} : selected);
  const std::vector<int32_t> count = {static_cast<int32_t>(selected.size())};
  DeviceBuffer<int32_t> d_count(count);
  const int rot = static_cast<int>(config.rotary_dim());

  launch_gemv_bf16(q_proj.device.data(), d_x.data(), 1, t.heads * hd * 2, t.hidden, d_qg.data(), nullptr);
  launch_gemv_bf16(k_proj.device.data(), d_x.data(), 1, kv_width, t.hidden, d_k.data(), nullptr);
  launch_gemv_bf16(v_proj.device.data(), d_x.data(), 1, kv_width, t.hidden, d_v.data(), nullptr);
  DecodePrep prep;  // the decode step's per-head work: q/k norm + RoPE, K/V append (the QSA part: prep tests)
  prep.q_gate = d_qg.data();
  prep.q_norm = q_norm.device.data();
  prep.heads = t.heads;
  prep.k = d_k.data();
  prep.v = d_v.data();
  prep.k_norm = k_norm.device.data();
  prep.kv_heads = t.kv_heads;
  prep.head_dim = hd;
  prep.rotary_dim = rot;
  prep.cache = pages_desc;
  prep.positions = d_pos.data();
  prep.inv_freq = d_inv_freq.data();
  prep.eps = 1e-6f;
  launch_attention_decode_prep(prep, nullptr);
  DeviceBuffer<float> d_workspace(attention_decode_workspace_floats(1, t.heads, hd));
  launch_attention_decode(pages_desc, d_qg.data(), d_qg.data() + hd, 2 * hd, d_pos.data(),
                          t.qsa ? d_sel.data() : nullptr, t.qsa ? d_count.data() : nullptr,
                          static_cast<int32_t>(selected.size()), 1, t.heads, t.kv_heads, hd, d_workspace.data(),
                          d_attn.data(), nullptr);
  launch_gemv_bf16(o_proj.device.data(), d_attn.data(), 1, t.hidden, t.heads * hd, d_y.data(), nullptr);
  EXPECT_LE(max_rel_diff(d_y.download(), want), t.tolerance);

  // Without a gate (the decode graph multiplies it in at the output projection) the kernel writes the attention
  // output before its gate: times sigmoid(gate), the gated output within ~8 ulps per element (the device's expf is
  // within 2 ulps of std::exp; a gate missing or applied twice is off by O(1)).
  DeviceBuffer<float> d_plain(static_cast<size_t>(t.heads) * hd);
  launch_attention_decode(pages_desc, d_qg.data(), /*gate=*/nullptr, 2 * hd, d_pos.data(),
                          t.qsa ? d_sel.data() : nullptr, t.qsa ? d_count.data() : nullptr,
                          static_cast<int32_t>(selected.size()), 1, t.heads, t.kv_heads, hd, d_workspace.data(),
                          d_plain.data(), nullptr);
  const std::vector<float> qg = d_qg.download(), gated = d_attn.download(), plain = d_plain.download();
  double worst = 0.0;
  for (int h = 0; h < t.heads; ++h) {
    for (int i = 0; i < hd; ++i) {
      const size_t at = static_cast<size_t>(h) * hd + i;
      const float act = 1.0f / (1.0f + std::exp(-qg[static_cast<size_t>(h) * 2 * hd + hd + i]));
      const double want_gated = gated[at], got = static_cast<double>(plain[at] * act);
      worst = std::max(worst, std::abs(got - want_gated) / std::max(1e-30, std::abs(want_gated)));
    }
  }
  EXPECT_LE(worst, 1e-6);
}

// fp32 pages: only summation order differs (1e-5). bf16 pages: the new token's own K/V is rounded on the
// GPU and not in the twin (1e-3).
TEST(GpuAttention, DenseDecodeMatchesCpuAtReleasedShapesFp32Pages) { run_case({2560, 24, 2, 256, 300, 0.25, false, false, 1e-5}); }
TEST(GpuAttention, DenseDecodeMatchesCpuAtReleasedShapesBf16Pages) { run_case({2560, 24, 2, 256, 300, 0.25, false, true, 1e-3}); }
TEST(GpuAttention, QsaSelectedDecodeMatchesCpuBeyondTheBudget) { run_case({64, 4, 1, 32, 120, 0.5, true, false, 1e-5}); }

// The attention kernel alone against a double-precision softmax over its own token lists: split counts
// far above the token count (1 token, a few), long lists (2051 selected tokens), several rows with
// different counts, GQA groups above one block's 16 heads, head_dim 16/20/128/256/512 (20: scalar loads),
// bf16 and fp32 pages. The workspace starts as NaN: only what the launch wrote may be read.
struct KernelCase {
  int rows, heads, kv_heads, head_dim;
  bool bf16_pages;
  bool use_selected;
  std::vector<int> counts;  // per row: tokens attended (dense: position = count - 1)
  // full_selection: the selected rows span only max(counts) tokens, so a row of that count selects all of them
  // (the decode step's list while every QSA block is kept: read as 0 .. count - 1, without the list).
  bool full_selection = false;
};

void run_kernel_case(const KernelCase& t) {
  constexpr int kPage = 16;
  const int hd = t.head_dim, kv_width = t.kv_heads * hd, group = t.heads / t.kv_heads;
  // Each row owns a token range of `span` tokens (selected lists pick from it), in shuffled pages.
  int span = 1;
  for (int c : t.counts) span = std::max(span, t.use_selected && !t.full_selection ? 2 * c + 7 : c);
  const int pages_per_row = (span + kPage - 1) / kPage, pages = pages_per_row * t.rows;
  std::vector<int32_t> pool_pages(static_cast<size_t>(pages));
  std::iota(pool_pages.begin(), pool_pages.end(), 0);
  std::shuffle(pool_pages.begin(), pool_pages.end(), rng());
  const size_t pool_elems = static_cast<size_t>(pages) * kPage * kv_width;
  std::vector<float> keys = random_floats(pool_elems), values = random_floats(pool_elems);
  if (t.bf16_pages) {
    for (float& v : keys) v = round_to_bf16(v);
    for (float& v : values) v = round_to_bf16(v);
  }
  std::vector<float> qg = random_floats(static_cast<size_t>(t.rows) * t.heads * 2 * hd, 0.3f);

  std::vector<int32_t> positions(static_cast<size_t>(t.rows)), counts(static_cast<size_t>(t.rows));
  int max_selected = 1;
  for (int c : t.counts) max_selected = std::max(max_selected, c);
  std::vector<int32_t> selected(static_cast<size_t>(t.rows) * max_selected, 0);
  std::vector<std::vector<int>> lists(static_cast<size_t>(t.rows));
  for (int r = 0; r < t.rows; ++r) {
    const int c = t.counts[static_cast<size_t>(r)];
    counts[static_cast<size_t>(r)] = c;
    positions[static_cast<size_t>(r)] = t.use_selected ? span - 1 : c - 1;
    std::vector<int> all(static_cast<size_t>(t.use_selected ? span : c));
    std::iota(all.begin(), all.end(), 0);
    if (t.use_selected) {
      std::shuffle(all.begin(), all.end(), rng());
      all.resize(static_cast<size_t>(c));
      std::sort(all.begin(), all.end());
    }
    lists[static_cast<size_t>(r)] = all;
    for (int n = 0; n < c; ++n) selected[static_cast<size_t>(r) * max_selected + n] = all[static_cast<size_t>(n)];
  }
  const std::vector<int32_t> table(pool_pages);  // row r's page p at table[r * pages_per_row + p]
  auto element = [&](const std::vector<float>& pool, int row, int token, int i) {
    const int page = table[static_cast<size_t>(row) * pages_per_row + token / kPage];
    return pool[(static_cast<size_t>(page) * kPage + token % kPage) * kv_width + i];
  };

  std::vector<float> want(static_cast<size_t>(t.rows) * t.heads * hd);
  for (int r = 0; r < t.rows; ++r) {
    const std::vector<int>& list = lists[static_cast<size_t>(r)];
    for (int h = 0; h < t.heads; ++h) {
      const int kvh = h / group;
      const float* qh = qg.data() + (static_cast<size_t>(r) * t.heads + h) * 2 * hd;
      std::vector<double> score(list.size());
      double m = -1e300;
      for (size_t n = 0; n < list.size(); ++n) {
        double dot = 0.0;
        for (int i = 0; i < hd; ++i) dot += static_cast<double>(qh[i]) * element(keys, r, list[n], kvh * hd + i);
        score[n] = dot / std::sqrt(static_cast<double>(hd));
        m = std::max(m, score[n]);
      }
      double total = 0.0;
      for (double& s : score) total += (s = std::exp(s - m));
      for (int i = 0; i < hd; ++i) {
        double o = 0.0;
        for (size_t n = 0; n < list.size(); ++n) o += score[n] * element(values, r, list[n], kvh * hd + i);
        const double g = qh[hd + i];
        want[(static_cast<size_t>(r) * t.heads + h) * hd + i] = static_cast<float>(o / total / (1.0 + std::exp(-g)));
      }
    }
  }

  DeviceBuffer<float> d_keys_f(keys), d_values_f(values);
  std::vector<uint16_t> keys_b(pool_elems), values_b(pool_elems);
  std::transform(keys.begin(), keys.end(), keys_b.begin(), f32_to_bf16);
  std::transform(values.begin(), values.end(), values_b.begin(), f32_to_bf16);
  DeviceBuffer<uint16_t> d_keys_b(keys_b), d_values_b(values_b);
  DeviceBuffer<int32_t> d_table(table), d_pos(positions), d_sel(selected), d_count(counts);
  DeviceBuffer<float> d_qg(qg), d_out(static_cast<size_t>(t.rows) * t.heads * hd);
  DeviceBuffer<float> d_workspace(attention_decode_workspace_floats(t.rows, t.heads, hd));
  IMP_CUDA_CHECK(cudaMemset(d_workspace.data(), 0xff, d_workspace.size() * sizeof(float)));  // NaN
  KvPages desc;
  desc.keys = t.bf16_pages ? static_cast<void*>(d_keys_b.data()) : d_keys_f.data();
  desc.values = t.bf16_pages ? static_cast<void*>(d_values_b.data()) : d_values_f.data();
  desc.page_table = d_table.data();
  desc.max_pages = pages_per_row;
  desc.page_size = kPage;
  desc.bf16 = t.bf16_pages;
  // Twice: the second launch reuses the first's workspace contents (replays do).
  for (int pass = 0; pass < 2; ++pass) {
    launch_attention_decode(desc, d_qg.data(), d_qg.data() + hd, 2 * hd, d_pos.data(), t.use_selected ? d_sel.data() : nullptr,
                            t.use_selected ? d_count.data() : nullptr, max_selected, t.rows, t.heads, t.kv_heads, hd,
                            d_workspace.data(), d_out.data(), nullptr);
    IMP_CUDA_CHECK(cudaDeviceSynchronize());
    EXPECT_LE(max_rel_diff(d_out.download(), want), 1e-4) << "pass " << pass;
  }
}

TEST(GpuAttentionKernel, OneTokenAtReleasedShapes) { run_kernel_case({1, 24, 2, 256, true, false, {1}}); }
TEST(GpuAttentionKernel, FewTokensManyEmptySplits) { run_kernel_case({1, 4, 1, 16, true, false, {3}}); }
TEST(GpuAttentionKernel, DenseAtReleasedShapesBf16) { run_kernel_case({1, 24, 2, 256, true, false, {1025}}); }
TEST(GpuAttentionKernel, DenseAtReleasedShapesFp32) { run_kernel_case({1, 24, 2, 256, false, false, {777}}); }
TEST(GpuAttentionKernel, Selected2051Tokens) { run_kernel_case({1, 24, 2, 256, true, true, {2051}}); }
TEST(GpuAttentionKernel, RowsWithDifferentCounts) { run_kernel_case({3, 24, 2, 256, true, false, {1, 300, 17}}); }
TEST(GpuAttentionKernel, SelectedRowsFp32SmallHeads) { run_kernel_case({2, 8, 2, 32, false, true, {5, 130}}); }
TEST(GpuAttentionKernel, GroupAbove16Heads) { run_kernel_case({1, 48, 2, 128, true, false, {200}}); }
TEST(GpuAttentionKernel, HeadDim512Fp32) { run_kernel_case({1, 32, 2, 512, false, false, {90}}); }
// Selections of every visible token (read without the list) alone and beside real selections in one launch.
TEST(GpuAttentionKernel, FullSelection) { run_kernel_case({1, 24, 2, 256, true, true, {1025}, true}); }
TEST(GpuAttentionKernel, RowsWithFullAndRealSelections) {
  run_kernel_case({3, 24, 2, 256, true, true, {300, 17, 300}, true});
  run_kernel_case({2, 8, 2, 32, false, true, {5, 130}, true});
}
TEST(GpuAttentionKernel, HeadDim20ScalarLoads) {
  run_kernel_case({1, 6, 3, 20, true, false, {41}});
  run_kernel_case({1, 6, 3, 20, false, true, {33}});
}

}  // namespace
}  // namespace imp::cuda
