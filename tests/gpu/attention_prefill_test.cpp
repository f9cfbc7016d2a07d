// The flash-style prefill attention against cpu::attention for T new rows after a CPU-computed prefix:
// q/k/v projections, q/k norm and RoPE on the host (cpu::linear, cpu::rms_norm, cpu::Rope as the twin does
// them), the new rows' K/V appended on the device (launch_kv_append, rows = T, shared page-table row), the
// attention on the device, o_proj on the host. Dense causal rows; fp32 and bf16 pages, shuffled pages.
// Block-masked rows (the QSA path) against a plain double-precision reference over exactly the attended keys.
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

  // Pages of 64 tokens (the engine's) for even prefixes, 16 otherwise (a tile of several pages), shuffled; the
  // prefix is written on the host.
  const int kPage = t.prefix % 2 == 0 ? 64 : 16;
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
  kv.pages = pages;
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

struct MaskedCase {
  int heads, kv_heads, head_dim, prefix, tokens, ratio;
  bool bf16_pages;
};

// Rows prefix .. prefix + T - 1 with random q/gate/K/V and a block bitmap per row; row r attends key n iff
// n <= p_r and bit n / ratio is set. Each 64-row query tile gets one pattern (so whole key tiles go unused
// and are skipped): random half of the blocks, sink + recent blocks, a few random blocks, or all blocks;
// every 37th row attends nothing (must write zeros, no NaN). Bits above p_r / ratio are random: ignored.
void run_masked_case(const MaskedCase& t) {
  const int hd = t.head_dim, kv_width = t.kv_heads * hd, T = t.tokens, total = t.prefix + T, group = t.heads / t.kv_heads;
  const int mask_words = total / t.ratio / 32 + 2;
  std::vector<float> qg = random_floats(static_cast<size_t>(T) * t.heads * 2 * hd);
  std::vector<float> keys = random_floats(static_cast<size_t>(total) * kv_width), values = random_floats(keys.size());
  std::vector<int32_t> positions(static_cast<size_t>(T));
  std::iota(positions.begin(), positions.end(), t.prefix);

  std::uniform_int_distribution<uint32_t> bits32;
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  std::vector<uint32_t> mask(static_cast<size_t>(T) * mask_words);
  for (uint32_t& w : mask) w = bits32(rng());
  const auto attends = [&](int r, int n) {
    const int j = n / t.ratio;
    return n <= positions[static_cast<size_t>(r)] &&
           ((mask[static_cast<size_t>(r) * mask_words + j / 32] >> (j % 32)) & 1u) != 0;
  };
  for (int r = 0; r < T; ++r) {
    const int last = positions[static_cast<size_t>(r)] / t.ratio, pattern = (r / 64 + t.prefix) % 4;
    for (int j = 0; j <= last; ++j) {
      bool on = false;
      switch (pattern) {
        case 0: on = unit(rng()) < 0.5f; break;
        case 1: on = j < 2 || j > last - 4; break;
        case 2: on = unit(rng()) < 0.03f; break;
        default: on = true; break;
      }
      if (r % 37 == 5) on = false;
      uint32_t& w = mask[static_cast<size_t>(r) * mask_words + j / 32];
      w = on ? (w | (1u << (j % 32))) : (w & ~(1u << (j % 32)));
    }
  }

  // Pages of 16 tokens, shuffled, all tokens written on the host.
  constexpr int kPage = 16;
  const int pages = (total + kPage - 1) / kPage;
  std::vector<int32_t> table(static_cast<size_t>(pages));
  std::iota(table.begin(), table.end(), 0);
  std::shuffle(table.begin(), table.end(), rng());
  const size_t pool_elems = static_cast<size_t>(pages) * kPage * kv_width;
  std::vector<float> keys_f(pool_elems, 0.0f), values_f(pool_elems, 0.0f);
  for (int tok = 0; tok < total; ++tok) {
    const size_t at = (static_cast<size_t>(table[static_cast<size_t>(tok / kPage)]) * kPage + tok % kPage) * kv_width;
    std::copy_n(keys.begin() + static_cast<ptrdiff_t>(tok) * kv_width, kv_width, keys_f.begin() + static_cast<ptrdiff_t>(at));
    std::copy_n(values.begin() + static_cast<ptrdiff_t>(tok) * kv_width, kv_width, values_f.begin() + static_cast<ptrdiff_t>(at));
  }
  std::vector<uint16_t> keys_b(pool_elems), values_b(pool_elems);
  std::transform(keys_f.begin(), keys_f.end(), keys_b.begin(), f32_to_bf16);
  std::transform(values_f.begin(), values_f.end(), values_b.begin(), f32_to_bf16);
  DeviceBuffer<float> d_keys_f(keys_f), d_values_f(values_f);
  DeviceBuffer<uint16_t> d_keys_b(keys_b), d_values_b(values_b);
  DeviceBuffer<int32_t> d_table(table), d_pos(positions);
  KvPages kv;
  kv.keys = t.bf16_pages ? static_cast<void*>(d_keys_b.data()) : d_keys_f.data();
  kv.values = t.bf16_pages ? static_cast<void*>(d_values_b.data()) : d_values_f.data();
  kv.page_table = d_table.data();
  kv.max_pages = 0;
  kv.page_size = kPage;
  kv.pages = pages;
  kv.bf16 = t.bf16_pages;
  DeviceBuffer<float> d_qg(qg), d_out(static_cast<size_t>(T) * t.heads * hd);
  DeviceBuffer<uint32_t> d_mask(mask);
  launch_attention_prefill(kv, d_qg.data(), d_qg.data() + hd, 2 * hd, d_pos.data(), T, t.heads, t.kv_heads, hd,
                           d_out.data(), nullptr, d_mask.data(), mask_words, t.ratio);
  IMP_CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<float> got = d_out.download();

  // The reference in double over the attended keys, with q, K and V rounded to bf16 as the kernel loads them.
  const auto rounded = [](std::vector<float> v) {
    for (float& x : v) x = round_to_bf16(x);
    return v;
  };
  const std::vector<float> qr = rounded(qg), kr = rounded(keys), vr = rounded(values);
  std::vector<float> want(got.size(), 0.0f);
  std::vector<double> scores, acc(static_cast<size_t>(hd));
  for (int r = 0; r < T; ++r) {
    for (int h = 0; h < t.heads; ++h) {
      const size_t q_at = (static_cast<size_t>(r) * t.heads + h) * 2 * hd;
      const float *q = qr.data() + q_at, *gate = qg.data() + q_at + hd;
      const int kvh = h / group;
      scores.clear();
      double top = -INFINITY;
      for (int n = 0; n < total; ++n) {
        if (!attends(r, n)) continue;
        const float* k = kr.data() + static_cast<size_t>(n) * kv_width + static_cast<size_t>(kvh) * hd;
        double dot = 0.0;
        for (int i = 0; i < hd; ++i) dot += static_cast<double>(q[i]) * k[i];
        scores.push_back(dot / std::sqrt(static_cast<double>(hd)));
        top = std::max(top, scores.back());
      }
      if (scores.empty()) continue;  // attends nothing: zeros
      std::fill(acc.begin(), acc.end(), 0.0);
      double sum = 0.0;
      size_t at = 0;
      for (int n = 0; n < total; ++n) {
        if (!attends(r, n)) continue;
        const double pr = std::exp(scores[at++] - top);
        sum += pr;
        const float* v = vr.data() + static_cast<size_t>(n) * kv_width + static_cast<size_t>(kvh) * hd;
        for (int i = 0; i < hd; ++i) acc[static_cast<size_t>(i)] += pr * v[i];
      }
      float* o = want.data() + (static_cast<size_t>(r) * t.heads + h) * hd;
      for (int i = 0; i < hd; ++i) {
        const double g = 1.0 / (1.0 + std::exp(-static_cast<double>(gate[i])));
        o[i] = static_cast<float>(acc[static_cast<size_t>(i)] / sum * g);
      }
    }
  }
  for (size_t i = 0; i < got.size(); ++i) ASSERT_TRUE(std::isfinite(got[i])) << "element " << i;
  for (int r = 5; r < T; r += 37) {
    for (int i = 0; i < t.heads * hd; ++i) ASSERT_EQ(got[static_cast<size_t>(r) * t.heads * hd + i], 0.0f) << "empty row " << r;
  }
  // bf16 q, K, V and probabilities (fp32 scores, softmax and sums): 1e-2 of the output scale, as the dense case.
  const double err = max_rel_diff(got, want);
  EXPECT_LE(err, 1e-2) << "prefix " << t.prefix << " tokens " << T << " head_dim " << hd << " ratio " << t.ratio;
  std::printf("masked attention prefill prefix=%d T=%d D=%d ratio=%d bf16=%d: %.3g\n", t.prefix, T, hd, t.ratio,
              t.bf16_pages, err);
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

// Block-masked rows: the released head shape, a ratio of 8 on fp32 pages, ratio 1 (64 blocks per key
// tile), a ratio that does not divide the tile (3) and one larger than it (100: a block spans tiles).
TEST(GpuAttentionPrefill, BlockMaskedMatchesReferenceAtReleasedShapes) {
  run_masked_case({4, 2, 256, 1500, 200, 4, true});
  run_masked_case({4, 2, 256, 0, 130, 4, false});
}
TEST(GpuAttentionPrefill, BlockMaskedMatchesReferenceAtSmallShapes) {
  run_masked_case({8, 1, 128, 700, 130, 8, false});
  run_masked_case({4, 2, 64, 0, 300, 1, true});
  run_masked_case({4, 1, 32, 100, 150, 4, false});
  run_masked_case({4, 2, 64, 45, 200, 3, true});
  run_masked_case({2, 1, 32, 37, 400, 100, false});
}

}  // namespace
}  // namespace imp::cuda
