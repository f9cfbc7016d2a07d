// The decode prep kernel (launch_attention_decode_prep: q/k norm + RoPE and the K/V append in one launch) against
// the CPU (cpu::rms_norm + Rope::apply per head; within 1e-5 of each head's scale: summation order and device
// cosf/sinf) and bit for bit against the separate kernels prefill uses (head_norm_rope, kv_append), at the
// released shapes and a small one, bf16 and fp32 pages. Everything the kernel must not touch (gate halves, other
// cache rows) keeps its NaN fill. (The QSA index prep is launch_qsa_decode_select's: qsa_test.cpp.)
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "cpu/blocks.h"
#include "cuda/kernels/attention_decode.h"
#include "cuda/memory/device_buffer.h"
#include "gpu_test_util.h"

namespace imp::cuda {
namespace {

using namespace testing_support;

struct PrepCase {
  int heads, kv_heads, head_dim, position;
  double partial_rotary;
  bool bf16_pages;
};

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr int kPage = 16;

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof(float)) == 0; }

std::vector<float> to_floats(const std::vector<uint16_t>& bits) {
  std::vector<float> out(bits.size());
  for (size_t i = 0; i < bits.size(); ++i) out[i] = bf16_to_f32(bits[i]);
  return out;
}

// (1 + w) RMSNorm then RoPE of one head, on the CPU.
std::vector<float> cpu_head(const float* x, int dim, const std::vector<uint16_t>& w, const cpu::Rope& rope, int64_t position) {
  std::vector<float> out(static_cast<size_t>(dim));
  model::TensorInfo info = host_tensor(w.data(), DType::kBF16, {dim});
  cpu::rms_norm(x, cpu::to_f32(&info), 1, dim, dim, 1e-6, out.data());
  rope.apply(out.data(), position);
  return out;
}

void expect_head_near(const float* got, const std::vector<float>& want, const char* what, int index) {
  double scale = 1e-30, diff = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_TRUE(std::isfinite(got[i])) << what << " " << index << " element " << i;  // max() would skip a NaN
    scale = std::max(scale, std::fabs(static_cast<double>(want[i])));
    diff = std::max(diff, std::fabs(static_cast<double>(got[i]) - want[i]));
  }
  EXPECT_LE(diff / scale, 1e-5) << what << " " << index;
}

void run_case(const PrepCase& t) {
  model::ModelConfig config;
  config.head_dim = t.head_dim;
  config.partial_rotary_factor = t.partial_rotary;
  config.rope_theta = 1e7;
  const cpu::Rope rope(config);
  const int hd = t.head_dim, kv_width = t.kv_heads * hd, rot = static_cast<int>(rope.rotary_dim());
  const int tokens = t.position + 1, pages = (tokens + kPage - 1) / kPage;

  std::normal_distribution<float> dist(0.0f, 1.0f);
  auto random = [&](size_t n, float scale) {
    std::vector<float> v(n);
    for (float& x : v) x = scale * dist(rng());
    return v;
  };
  auto random_bits = [&](int n) {
    std::vector<uint16_t> v(static_cast<size_t>(n));
    for (auto& b : v) b = f32_to_bf16(0.1f * dist(rng()));
    return v;
  };
  const std::vector<float> qg = random(static_cast<size_t>(t.heads) * 2 * hd, 1.0f), k = random(kv_width, 1.0f),
                           v = random(kv_width, 1.0f);
  const std::vector<uint16_t> q_norm = random_bits(hd), k_norm = random_bits(hd);
  std::vector<int32_t> table(static_cast<size_t>(pages));
  for (int i = 0; i < pages; ++i) table[static_cast<size_t>(i)] = pages - 1 - i;  // reversed: the table matters
  const size_t pool = static_cast<size_t>(pages) * kPage * kv_width;

  struct Run {
    DeviceBuffer<float> qg, k, v, keys_f, values_f;
    DeviceBuffer<uint16_t> keys_b, values_b;
    KvPages pages;
  };
  DeviceBuffer<uint16_t> d_qn(q_norm), d_kn(k_norm);
  DeviceBuffer<int32_t> d_table(table), d_pos(std::vector<int32_t>{t.position});
  DeviceBuffer<float> d_inv_freq(rope.inv_freq);
  auto make_run = [&] {
    Run r{DeviceBuffer<float>(qg), DeviceBuffer<float>(k), DeviceBuffer<float>(v),
          DeviceBuffer<float>(std::vector<float>(pool, kNaN)), DeviceBuffer<float>(std::vector<float>(pool, kNaN)),
          DeviceBuffer<uint16_t>(std::vector<uint16_t>(pool, 0x7fc0)), DeviceBuffer<uint16_t>(std::vector<uint16_t>(pool, 0x7fc0)),
          KvPages{}};
    r.pages.keys = t.bf16_pages ? static_cast<void*>(r.keys_b.data()) : r.keys_f.data();
    r.pages.values = t.bf16_pages ? static_cast<void*>(r.values_b.data()) : r.values_f.data();
    r.pages.page_table = d_table.data();
    r.pages.max_pages = pages;
    r.pages.page_size = kPage;
    r.pages.bf16 = t.bf16_pages;
    return r;
  };

  // The fused kernel.
  Run fused = make_run();
  DecodePrep prep;
  prep.q_gate = fused.qg.data();
  prep.q_norm = d_qn.data();
  prep.heads = t.heads;
  prep.k = fused.k.data();
  prep.v = fused.v.data();
  prep.k_norm = d_kn.data();
  prep.kv_heads = t.kv_heads;
  prep.head_dim = hd;
  prep.rotary_dim = rot;
  prep.cache = fused.pages;
  prep.positions = d_pos.data();
  prep.inv_freq = d_inv_freq.data();
  prep.eps = 1e-6f;
  launch_attention_decode_prep(prep, nullptr);

  // The separate kernels (prefill's), same inputs.
  Run split = make_run();
  launch_head_norm_rope(split.qg.data(), 2 * hd, d_qn.data(), 1, t.heads, hd, rot, d_pos.data(), d_inv_freq.data(), 1e-6f, nullptr);
  launch_head_norm_rope(split.k.data(), hd, d_kn.data(), 1, t.kv_heads, hd, rot, d_pos.data(), d_inv_freq.data(), 1e-6f, nullptr);
  launch_kv_append(split.pages, split.k.data(), split.v.data(), d_pos.data(), 1, kv_width, nullptr);

  // Bit for bit against the separate kernels, everywhere (NaN fills included).
  auto expect_same = [](const std::vector<float>& a, const std::vector<float>& b, const char* what) {
    ASSERT_EQ(a.size(), b.size());
    size_t bad = 0;
    for (size_t i = 0; i < a.size(); ++i) bad += !same_bits(a[i], b[i]) && !(std::isnan(a[i]) && std::isnan(b[i]));
    EXPECT_EQ(bad, 0u) << what;
  };
  const std::vector<float> got_qg = fused.qg.download();
  expect_same(got_qg, split.qg.download(), "q_gate");
  const std::vector<float> got_keys = t.bf16_pages ? to_floats(fused.keys_b.download()) : fused.keys_f.download();
  const std::vector<float> got_values = t.bf16_pages ? to_floats(fused.values_b.download()) : fused.values_f.download();
  expect_same(got_keys, t.bf16_pages ? to_floats(split.keys_b.download()) : split.keys_f.download(), "cache keys");
  expect_same(got_values, t.bf16_pages ? to_floats(split.values_b.download()) : split.values_f.download(), "cache values");

  // Against the CPU.
  for (int h = 0; h < t.heads; ++h) {
    const float* head = got_qg.data() + static_cast<size_t>(h) * 2 * hd;
    expect_head_near(head, cpu_head(qg.data() + static_cast<size_t>(h) * 2 * hd, hd, q_norm, rope, t.position), "query head", h);
    for (int i = 0; i < hd; ++i) ASSERT_TRUE(same_bits(head[hd + i], qg[static_cast<size_t>(h) * 2 * hd + hd + i])) << "gate " << h;
  }
  const size_t row_at = (static_cast<size_t>(table[static_cast<size_t>(t.position / kPage)]) * kPage + t.position % kPage) * kv_width;
  for (int h = 0; h < t.kv_heads; ++h) {
    std::vector<float> want = cpu_head(k.data() + static_cast<size_t>(h) * hd, hd, k_norm, rope, t.position);
    std::vector<float> want_v(v.begin() + static_cast<ptrdiff_t>(h) * hd, v.begin() + static_cast<ptrdiff_t>(h + 1) * hd);
    if (t.bf16_pages) {
      for (float& x : want) x = round_to_bf16(x);
      for (float& x : want_v) x = round_to_bf16(x);
    }
    expect_head_near(got_keys.data() + row_at + static_cast<size_t>(h) * hd, want, "cached key head", h);
    for (int i = 0; i < hd; ++i) ASSERT_TRUE(same_bits(got_values[row_at + static_cast<size_t>(h) * hd + i], want_v[static_cast<size_t>(i)]));
  }
  size_t written = 0;
  for (float x : got_keys) written += !std::isnan(x);
  EXPECT_EQ(written, static_cast<size_t>(kv_width)) << "only the token's own cache row is written";
}

// Released shapes: 24/2 heads of 256 (partial rotary 0.25).
TEST(GpuAttentionDecodePrep, ReleasedShapesBf16Pages) { run_case({24, 2, 256, 1023, 0.25, true}); }
TEST(GpuAttentionDecodePrep, ReleasedShapesFp32Pages) { run_case({24, 2, 256, 1025, 0.25, false}); }
TEST(GpuAttentionDecodePrep, SmallHeadsFirstToken) { run_case({4, 1, 32, 0, 0.5, true}); }
TEST(GpuAttentionDecodePrep, SmallHeadsOddGroup) { run_case({6, 3, 48, 39, 0.5, false}); }

}  // namespace
}  // namespace imp::cuda
