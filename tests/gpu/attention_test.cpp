// GPU gated attention decode (projections by the BF16 GEMV, q/k norm + RoPE, paged KV append, attention,
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
  launch_head_norm_rope(d_qg.data(), 2 * hd, q_norm.device.data(), 1, t.heads, hd, rot, d_pos.data(), d_inv_freq.data(), 1e-6f, nullptr);
  launch_head_norm_rope(d_k.data(), hd, k_norm.device.data(), 1, t.kv_heads, hd, rot, d_pos.data(), d_inv_freq.data(), 1e-6f, nullptr);
  launch_kv_append(pages_desc, d_k.data(), d_v.data(), d_pos.data(), 1, kv_width, nullptr);
  launch_attention_decode(pages_desc, d_qg.data(), d_qg.data() + hd, 2 * hd, d_pos.data(),
                          t.qsa ? d_sel.data() : nullptr, t.qsa ? d_count.data() : nullptr,
                          static_cast<int32_t>(selected.size()), 1, t.heads, t.kv_heads, hd, d_attn.data(), nullptr);
  launch_gemv_bf16(o_proj.device.data(), d_attn.data(), 1, t.hidden, t.heads * hd, d_y.data(), nullptr);
  EXPECT_LE(max_rel_diff(d_y.download(), want), t.tolerance);
}

// fp32 pages: only summation order differs (1e-5). bf16 pages: the new token's own K/V is rounded on the
// GPU and not in the twin (1e-3).
TEST(GpuAttention, DenseDecodeMatchesCpuAtReleasedShapesFp32Pages) { run_case({2560, 24, 2, 256, 300, 0.25, false, false, 1e-5}); }
TEST(GpuAttention, DenseDecodeMatchesCpuAtReleasedShapesBf16Pages) { run_case({2560, 24, 2, 256, 300, 0.25, false, true, 1e-3}); }
TEST(GpuAttention, QsaSelectedDecodeMatchesCpuBeyondTheBudget) { run_case({64, 4, 1, 32, 120, 0.5, true, false, 1e-5}); }

}  // namespace
}  // namespace imp::cuda
