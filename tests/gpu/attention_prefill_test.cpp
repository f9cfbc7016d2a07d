// The flash-style prefill attention against cpu::attention for T new rows after a CPU-computed prefix:
// q/k/v projections, q/k norm and RoPE on the host (cpu::linear, cpu::rms_norm, cpu::Rope as the twin does
// them), the new rows' K/V appended on the device (launch_kv_append, rows = T, shared page-table row), the
// attention on the device, o_proj on the host. Dense causal rows; fp32 and bf16 pages, shuffled pages.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "cpu/blocks.h"
#include "cuda/kernels/attention_decode.h"
#include "cuda/kernels/attention_prefill.h"
#include "cuda/memory/device_buffer.h"
#include "gpu_test_util.h"

namespace imp::cuda {
namespace {

using namespace testing_support;

struct Case {
  int hidden, heads, kv_heads, head_dim, prefix, tokens;
  bool bf16_pages;
};

void run_case(const Case& t) {
  model::ModelConfig config;
  config.hidden_size = t.hidden;
  config.num_attention_heads = t.heads;
  config.num_key_value_heads = t.kv_heads;
  config.head_dim = t.head_dim;
  config.partial_rotary_factor = 0.25;
  config.rope_theta = 1e7;
  const int hd = t.head_dim, kv_width = t.kv_heads * hd, T = t.tokens;
  Bf16Weight q_proj({t.heads * hd * 2, t.hidden}, 0.05f), k_proj({kv_width, t.hidden}, 0.05f),
      v_proj({kv_width, t.hidden}, 0.05f), o_proj({t.hidden, t.heads * hd}, 0.05f), q_norm({hd}, 0.1f),
      k_norm({hd}, 0.1f);
  const model::AttentionWeights w{&q_proj.info, &k_proj.info, &v_proj.info, &o_proj.info, &q_norm.info, &k_norm.info,
                                  std::nullopt};
  const cpu::Rope rope(config);

  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> prompt(static_cast<size_t>(std::max(t.prefix, 1)) * t.hidden), x(static_cast<size_t>(T) * t.hidden);
  for (float& v : prompt) v = dist(rng());
  for (float& v : x) v = dist(rng());
  cpu::AttentionCache cache;
  if (t.prefix > 0) {
    std::vector<float> scratch(prompt.size());
    cpu::attention(config, w, rope, prompt.data(), t.prefix, 0, cache, scratch.data());
  }
  if (t.bf16_pages) {  // the GPU stores bf16: the twin sees the same cached prefix
    for (float& v : cache.keys) v = round_to_bf16(v);
    for (float& v : cache.values) v = round_to_bf16(v);
  }

  // Pages of 16 tokens, shuffled; the prefix is written on the host.
  constexpr int kPage = 16;
  const int total = t.prefix + T, pages = (total + kPage - 1) / kPage;
  std::vector<int32_t> table(static_cast<size_t>(pages));
  std::iota(table.begin(), table.end(), 0);
  std::shuffle(table.begin(), table.end(), rng());
  const size_t pool_elems = static_cast<size_t>(pages) * kPage * kv_width;
  std::vector<float> keys_f(pool_elems, 0.0f), values_f(pool_elems, 0.0f);
  for (int tok = 0; tok < t.prefix; ++tok) {
    const size_t at = (static_cast<size_t>(table[static_cast<size_t>(tok / kPage)]) * kPage + tok % kPage) * kv_width;
    std::copy_n(cache.keys.begin() + static_cast<ptrdiff_t>(tok) * kv_width, kv_width, keys_f.begin() + static_cast<ptrdiff_t>(at));
    std::copy_n(cache.values.begin() + static_cast<ptrdiff_t>(tok) * kv_width, kv_width, values_f.begin() + static_cast<ptrdiff_t>(at));
  }
  DeviceBuffer<float> d_keys_f(keys_f), d_values_f(values_f);
  std::vector<uint16_t> keys_b(pool_elems), values_b(pool_elems);
  std::transform(keys_f.begin(), keys_f.end(), keys_b.begin(), f32_to_bf16);
  std::transform(values_f.begin(), values_f.end(), values_b.begin(), f32_to_bf16);
  DeviceBuffer<uint16_t> d_keys_b(keys_b), d_values_b(values_b);
  DeviceBuffer<int32_t> d_table(table);
  KvPages kv;
  kv.keys = t.bf16_pages ? static_cast<void*>(d_keys_b.data()) : d_keys_f.data();
  kv.values = t.bf16_pages ? static_cast<void*>(d_values_b.data()) : d_values_f.data();
  kv.page_table = d_table.data();
  kv.max_pages = 0;  // one sequence: every row uses table row 0
  kv.page_size = kPage;
  kv.bf16 = t.bf16_pages;

  // The twin on the T new rows.
  std::vector<float> want(static_cast<size_t>(T) * t.hidden);
  cpu::attention(config, w, rope, x.data(), T, t.prefix, cache, want.data());

  // The same q/k/v on the host.
  std::vector<float> qg(static_cast<size_t>(T) * t.heads * hd * 2), k(static_cast<size_t>(T) * kv_width), v(k.size());
  cpu::linear(w.q_proj, x.data(), T, qg.data());
  cpu::linear(w.k_proj, x.data(), T, k.data());
  cpu::linear(w.v_proj, x.data(), T, v.data());
  const auto qn = cpu::to_f32(w.q_norm), kn = cpu::to_f32(w.k_norm);
  for (int r = 0; r < T; ++r) {
    for (int h = 0; h < t.heads; ++h) {
      float* head = qg.data() + (static_cast<size_t>(r) * t.heads + h) * 2 * hd;
      cpu::rms_norm(head, qn, 1, hd, hd, config.rms_norm_eps, head);
      rope.apply(head, t.prefix + r);
    }
    for (int h = 0; h < t.kv_heads; ++h) {
      float* head = k.data() + (static_cast<size_t>(r) * t.kv_heads + h) * hd;
      cpu::rms_norm(head, kn, 1, hd, hd, config.rms_norm_eps, head);
      rope.apply(head, t.prefix + r);
    }
  }
  std::vector<int32_t> positions(static_cast<size_t>(T));
  std::iota(positions.begin(), positions.end(), t.prefix);
  DeviceBuffer<float> d_qg(qg), d_k(k), d_v(v), d_out(static_cast<size_t>(T) * t.heads * hd);
  DeviceBuffer<int32_t> d_pos(positions);
  launch_kv_append(kv, d_k.data(), d_v.data(), d_pos.data(), T, kv_width, nullptr);
  launch_attention_prefill(kv, d_qg.data(), d_qg.data() + hd, 2 * hd, d_pos.data(), T, t.heads, t.kv_heads, hd,
                           d_out.data(), nullptr);
  IMP_CUDA_CHECK(cudaDeviceSynchronize());
  const auto attn = d_out.download();
  std::vector<float> got(want.size());
  cpu::linear(w.o_proj, attn.data(), T, got.data());
  // bf16 q, K, V and probabilities (fp32 scores, softmax and sums): 1e-2 of the output scale.
  const double err = max_rel_diff(got, want);
  EXPECT_LE(err, 1e-2) << "prefix " << t.prefix << " tokens " << T << " head_dim " << hd;
  std::printf("attention prefill prefix=%d T=%d D=%d bf16=%d: %.3g\n", t.prefix, T, hd, t.bf16_pages, err);
}

TEST(GpuAttentionPrefill, CausalMatchesCpuAtReleasedShapes) {
  run_case({2560, 24, 2, 256, 100, 200, true});
  run_case({2560, 24, 2, 256, 0, 130, false});
  run_case({2560, 24, 2, 256, 37, 1, true});
}
TEST(GpuAttentionPrefill, CausalMatchesCpuAtSmallShapes) {
  run_case({64, 4, 1, 32, 0, 77, false});
  run_case({64, 4, 2, 64, 5, 130, true});
  run_case({64, 2, 1, 128, 64, 64, true});
}

}  // namespace
}  // namespace imp::cuda
