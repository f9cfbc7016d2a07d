// Timing of the prefill kernels at the released shapes (4096 tokens). Disabled by default; run with
//   imp_gpu_tests --gtest_also_run_disabled_tests --gtest_filter='PrefillBench.*'
// Prints one line per shape: median of 10 timed launches after 2 warm-ups (CUDA events).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <random>
#include <vector>

#include "cuda/kernels/attention_prefill.h"
#include "cuda/kernels/gated_delta_net_prefill.h"
#include "cuda/kernels/gemm_bf16_split.h"
#include "cuda/kernels/moe_prefill.h"
#include "cuda/memory/device_buffer.h"
#include "gpu_test_util.h"

namespace imp::cuda {
namespace {

using namespace testing_support;

double median_ms(const std::function<void()>& launch) {
  cudaEvent_t start, stop;
  IMP_CUDA_CHECK(cudaEventCreate(&start));
  IMP_CUDA_CHECK(cudaEventCreate(&stop));
  for (int i = 0; i < 2; ++i) launch();
  std::vector<float> times;
  for (int i = 0; i < 10; ++i) {
    IMP_CUDA_CHECK(cudaEventRecord(start));
    launch();
    IMP_CUDA_CHECK(cudaEventRecord(stop));
    IMP_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    IMP_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    times.push_back(ms);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

std::vector<uint8_t> random_bytes(size_t n) {
  std::vector<uint8_t> v(n);
  std::uniform_int_distribution<uint32_t> d;
  for (size_t i = 0; i + 4 <= n; i += 4) {
    const uint32_t r = d(rng());
    std::copy_n(reinterpret_cast<const uint8_t*>(&r), 4, v.begin() + static_cast<ptrdiff_t>(i));
  }
  return v;
}

TEST(PrefillBench, DISABLED_GemmBf16Split) {
  const int T = 4096;
  for (auto [n, k] : {std::pair{10240, 2560}, {6144, 2560}, {12288, 2560}, {2560, 6144}, {320, 10240}, {10240, 320},
                      {640, 2560}, {248320, 2560}}) {
    DeviceBuffer<uint16_t> w(static_cast<size_t>(n) * k);
    IMP_CUDA_CHECK(cudaMemset(w.data(), 0x3c, w.size() * 2));
    DeviceBuffer<float> x(static_cast<size_t>(T) * k), y(static_cast<size_t>(T) * n), scratch(x.size());
    IMP_CUDA_CHECK(cudaMemset(x.data(), 0, x.size() * 4));
    const double ms = median_ms([&] { launch_gemm_bf16_split(x.data(), w.data(), T, n, k, y.data(), scratch.data(), nullptr); });
    // Two GEMMs (the hi and lo terms): TFLOP/s counts both.
    std::printf("gemm_bf16_split T=%d N=%d K=%d: %.3f ms, %.1f TFLOP/s\n", T, n, k, ms, 4.0 * T * n * k / ms / 1e9);
  }
}

TEST(PrefillBench, DISABLED_MoeNvfp4) {
  const int T = 4096, k = 10, slots = 512, H = 2560, I = 640;
  const model::ExpertSlotLayout layout = model::ExpertSlotLayout::make(H, I);
  DeviceBuffer<uint8_t> pool(random_bytes(layout.slot_bytes * slots));
  std::vector<model::SlotScales> scales(slots, {0.01f, 0.01f, 0.01f, 0.0f});
  DeviceBuffer<model::SlotScales> d_scales(scales);
  std::vector<int32_t> chosen(static_cast<size_t>(T) * k);
  std::vector<int32_t> ids(slots);
  for (int i = 0; i < slots; ++i) ids[static_cast<size_t>(i)] = i;
  for (int t = 0; t < T; ++t) {
    std::shuffle(ids.begin(), ids.end(), rng());
    std::copy_n(ids.begin(), k, chosen.begin() + static_cast<ptrdiff_t>(t) * k);
  }
  DeviceBuffer<int32_t> d_slots(chosen);
  std::vector<uint16_t> x16;
  for (float v : random_floats(static_cast<size_t>(T) * H)) x16.push_back(f32_to_bf16(v));
  DeviceBuffer<uint16_t> x(x16);
  DeviceBuffer<float> w(random_floats(chosen.size(), 0.3f)), y(static_cast<size_t>(T) * H);
  const size_t bytes = moe_prefill_workspace_bytes(layout, T, k, slots);
  DeviceBuffer<uint8_t> ws(bytes);
  const double ms = median_ms([&] {
    launch_moe_prefill(pool.data(), d_scales.data(), layout, x.data(), d_slots.data(), w.data(), T, k, slots, ws.data(),
                       bytes, y.data(), nullptr);
  });
  std::printf("moe_prefill nvfp4 T=%d k=%d H=%d I=%d slots=%d: %.3f ms, %.1f TFLOP/s (workspace %.0f MB)\n", T, k, H, I,
              slots, ms, 2.0 * T * k * 3 * H * I / ms / 1e9, bytes / 1e6);
}

TEST(PrefillBench, DISABLED_GatedDeltaNet) {
  const int T = 4096;
  const GatedDeltaNetShape shape{16, 48, 128, 128, 4, 1e-6f, true};
  const int conv = shape.conv_channels(), vdim = 48 * 128;
  DeviceBuffer<float> mixed(random_floats(static_cast<size_t>(T) * conv)), z(random_floats(static_cast<size_t>(T) * vdim)),
      b(random_floats(static_cast<size_t>(T) * 48)), a(random_floats(static_cast<size_t>(T) * 48)),
      conv_out(static_cast<size_t>(T) * conv), out(static_cast<size_t>(T) * vdim), state(static_cast<size_t>(3) * conv),  // out: both bf16 terms
      rec(random_floats(static_cast<size_t>(48) * 128 * 128, 0.1f));
  Bf16Weight conv_w({conv, 4}, 0.4f), a_log({48}, 0.5f), dt_bias({48}, 0.3f), norm({128}, 0.1f, 1.0f);
  const GatedDeltaNetWeightsDevice w{conv_w.device.data(), a_log.device.data(), dt_bias.device.data(), norm.device.data()};
  const size_t bytes = gdn_prefill_workspace_bytes(shape, T);
  DeviceBuffer<uint8_t> ws(bytes);
  const double conv_ms = median_ms([&] { launch_gdn_conv_prefill(shape, w, mixed.data(), state.data(), T, conv_out.data(), nullptr); });
  const double ms = median_ms([&] {
    launch_gdn_chunked_prefill(shape, w, conv_out.data(), z.data(), b.data(), a.data(), rec.data(), T, ws.data(), bytes,
                               reinterpret_cast<uint16_t*>(out.data()),
                               reinterpret_cast<uint16_t*>(out.data()) + static_cast<size_t>(T) * vdim, nullptr);
  });
  std::printf("gdn prefill T=%d: conv %.3f ms, chunked + norm %.3f ms (workspace %.0f MB)\n", T, conv_ms, ms, bytes / 1e6);
}

TEST(PrefillBench, DISABLED_AttentionCausal) {
  const int T = 4096, heads = 24, kv_heads = 2, hd = 256, page = 16, pages = T / page;
  std::vector<int32_t> table(pages), positions(T);
  for (int i = 0; i < pages; ++i) table[static_cast<size_t>(i)] = i;
  for (int i = 0; i < T; ++i) positions[static_cast<size_t>(i)] = i;
  DeviceBuffer<int32_t> d_table(table), d_pos(positions);
  DeviceBuffer<uint16_t> keys(static_cast<size_t>(T) * kv_heads * hd), values(keys.size());
  IMP_CUDA_CHECK(cudaMemset(keys.data(), 0x3c, keys.size() * 2));
  IMP_CUDA_CHECK(cudaMemset(values.data(), 0x3c, values.size() * 2));
  DeviceBuffer<float> qg(random_floats(static_cast<size_t>(T) * heads * hd * 2)), out(static_cast<size_t>(T) * heads * hd);
  KvPages kv;
  kv.keys = keys.data();
  kv.values = values.data();
  kv.page_table = d_table.data();
  kv.page_size = page;
  kv.pages = pages;
  kv.bf16 = true;
  const double ms = median_ms([&] {
    launch_attention_prefill(kv, qg.data(), qg.data() + hd, 2 * hd, d_pos.data(), T, heads, kv_heads, hd, out.data(), nullptr);
  });
  const double flops = 4.0 * heads * hd * (static_cast<double>(T) * (T + 1) / 2);
  std::printf("attention prefill T=%d causal: %.3f ms, %.1f TFLOP/s (useful)\n", T, ms, flops / ms / 1e9);
}

}  // namespace
}  // namespace imp::cuda
