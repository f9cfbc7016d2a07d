// Every CUDA kernel against its CPU twin (src/cpu/) on fresh random inputs. Runs on the GPU machine only
// (CTest label gpu). Tolerances are stated per test: the kernels and the references both compute in fp32
// but sum in different orders.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "cpu/blocks.h"
#include "cuda/kernels/dense.h"
#include "cuda/kernels/moe_decode.h"
#include "cuda/memory/device_buffer.h"

namespace imp::cuda {
namespace {

std::mt19937& rng() {
  static std::mt19937 engine(std::random_device{}());
  return engine;
}

std::vector<float> random_floats(size_t n, float scale = 1.0f) {
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng());
  return v;
}

std::vector<uint16_t> to_bf16(const std::vector<float>& v) {
  std::vector<uint16_t> out(v.size());
  std::transform(v.begin(), v.end(), out.begin(), f32_to_bf16);
  return out;
}

model::TensorInfo host_tensor(const void* data, DType dtype, std::vector<int64_t> shape) {
  model::TensorInfo t;
  t.name = "host";
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.data = static_cast<const uint8_t*>(data);
  t.nbytes = static_cast<size_t>(t.numel()) * dtype_size(dtype);
  return t;
}

// max |a - b| <= tolerance * max |b|
void expect_close(const std::vector<float>& got, const std::vector<float>& want, double tolerance) {
  ASSERT_EQ(got.size(), want.size());
  double scale = 0.0, diff = 0.0;
  size_t worst = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    scale = std::max(scale, std::fabs(static_cast<double>(want[i])));
    const double d = std::fabs(static_cast<double>(got[i]) - want[i]);
    if (d > diff) diff = d, worst = i;
  }
  EXPECT_LE(diff, tolerance * scale) << "worst index " << worst << ": " << got[worst] << " vs " << want[worst];
}

TEST(GpuKernels, GemvBf16MatchesCpuLinear) {
  for (auto [rows, n, k] : {std::tuple{1, 2560, 10240}, {3, 10240, 2560}, {8, 248, 640}}) {
    const auto w = to_bf16(random_floats(static_cast<size_t>(n) * k, 0.05f));
    const auto x = random_floats(static_cast<size_t>(rows) * k);
    const model::TensorInfo wt = host_tensor(w.data(), DType::kBF16, {n, k});
    std::vector<float> want(static_cast<size_t>(rows) * n);
    cpu::linear(&wt, x.data(), rows, want.data());

    DeviceBuffer<uint16_t> dw(w);
    DeviceBuffer<float> dx(x), dy(want.size());
    launch_gemv_bf16(dw.data(), dx.data(), rows, n, k, dy.data(), nullptr);
    expect_close(dy.download(), want, 1e-5);  // fp32 sums of K products, different order
  }
}

TEST(GpuKernels, RmsNormMatchesCpu) {
  for (auto [rows, width, group] : {std::tuple{4, 10240, 2560}, {24, 256, 256}, {3, 128, 128}}) {
    const auto x = random_floats(static_cast<size_t>(rows) * width, 3.0f);
    const auto wf = random_floats(static_cast<size_t>(width), 0.1f);
    const auto w = to_bf16(wf);
    std::vector<float> w_rounded(w.size());
    std::transform(w.begin(), w.end(), w_rounded.begin(), bf16_to_f32);
    std::vector<float> want(x.size());
    cpu::rms_norm(x.data(), w_rounded, rows, width, group, 1e-6, want.data());

    DeviceBuffer<float> dx(x);
    DeviceBuffer<uint16_t> dw(w);
    launch_rms_norm(dx.data(), dw.data(), rows, width, group, 1e-6f, dx.data(), nullptr);  // in place
    expect_close(dx.download(), want, 1e-6);
  }
}

TEST(GpuKernels, RouterTopKMatchesCpuOverManyExperts) {
  for (auto [experts, k, renorm] : {std::tuple{512, 10, true}, {4096, 10, false}, {300, 10, true}, {16, 4, true}}) {
    model::ModelConfig config;
    config.num_experts = experts;
    config.num_experts_per_tok = k;
    config.norm_topk_prob = renorm;
    const int rows = 33;
    auto logits = random_floats(static_cast<size_t>(rows) * experts, 2.0f);
    // Regression for the 256-thread bug: make row 0's winners all sit above index 256 when there are that many.
    if (experts > 256 + k) {
      for (int j = 0; j < k; ++j) logits[static_cast<size_t>(experts - 1 - j)] = 20.0f + static_cast<float>(j);
    }
    DeviceBuffer<float> dl(logits), dw(static_cast<size_t>(rows) * k);
    DeviceBuffer<int32_t> de(static_cast<size_t>(rows) * k);
    launch_router_topk(dl.data(), rows, experts, k, renorm, de.data(), dw.data(), nullptr);
    const auto got_e = de.download();
    const auto got_w = dw.download();
    for (int r = 0; r < rows; ++r) {
      std::vector<int64_t> want_e(static_cast<size_t>(k));
      std::vector<float> want_w(static_cast<size_t>(k));
      cpu::route(config, std::span<const float>(logits).subspan(static_cast<size_t>(r) * experts, static_cast<size_t>(experts)), want_e, want_w);
      for (int j = 0; j < k; ++j) {
        ASSERT_EQ(got_e[static_cast<size_t>(r * k + j)], want_e[static_cast<size_t>(j)]) << "row " << r << " choice " << j;
        ASSERT_NEAR(got_w[static_cast<size_t>(r * k + j)], want_w[static_cast<size_t>(j)], 1e-6f);  // fp32 softmax
      }
    }
    if (experts > 256 + k) EXPECT_GE(got_e[0], 256);
  }
}

// Random NVFP4 experts packed into a slot pool, checked against the CPU expert path (cpu::linear on
// ExpertProjection views of the same bytes, then SwiGLU and the weighted sum).
TEST(GpuKernels, ExpertGateUpDownMatchCpuOnTheSlotPool) {
  const int H = 2560, I = 640, slots = 24, rows = 3, k = 10;
  const ExpertSlotLayout layout = ExpertSlotLayout::make(H, I);
  std::vector<uint8_t> pool(layout.slot_bytes * slots);
  std::uniform_int_distribution<int> byte(0, 255), scale_code(0x28, 0x48);  // E4M3 ~ 2^-2 .. 2^2
  for (size_t s = 0; s < static_cast<size_t>(slots); ++s) {
    uint8_t* base = pool.data() + s * layout.slot_bytes;
    for (uint64_t off : {layout.gate_codes, layout.up_codes, layout.down_codes}) {
      for (int i = 0; i < H * I / 2; ++i) base[off + static_cast<uint64_t>(i)] = static_cast<uint8_t>(byte(rng()));
    }
    for (uint64_t off : {layout.gate_scales, layout.up_scales, layout.down_scales}) {
      for (int i = 0; i < H * I / 16; ++i) base[off + static_cast<uint64_t>(i)] = static_cast<uint8_t>(scale_code(rng()));
    }
  }
  std::vector<SlotScales> scales(static_cast<size_t>(slots));
  for (auto& s : scales) s = {0.004f + 0.001f * byte(rng()) / 255.0f, 0.003f, 0.002f + 0.002f * byte(rng()) / 255.0f, 0.0f};
  const auto x = random_floats(static_cast<size_t>(rows) * H);
  std::vector<int32_t> chosen(static_cast<size_t>(rows) * k);
  std::uniform_int_distribution<int> pick(0, slots - 1);
  for (auto& c : chosen) c = pick(rng());
  auto weights = random_floats(chosen.size(), 0.3f);

  // CPU twin.
  std::vector<float> want(static_cast<size_t>(rows) * H, 0.0f);
  for (int r = 0; r < rows; ++r) {
    for (int j = 0; j < k; ++j) {
      const int s = chosen[static_cast<size_t>(r * k + j)];
      const uint8_t* base = pool.data() + static_cast<size_t>(s) * layout.slot_bytes;
      const model::TensorInfo gc = host_tensor(base + layout.gate_codes, DType::kU8, {I, H / 2}),
                              gs = host_tensor(base + layout.gate_scales, DType::kF8E4M3, {I, H / 16}),
                              uc = host_tensor(base + layout.up_codes, DType::kU8, {I, H / 2}),
                              us = host_tensor(base + layout.up_scales, DType::kF8E4M3, {I, H / 16}),
                              dc = host_tensor(base + layout.down_codes, DType::kU8, {H, I / 2}),
                              ds = host_tensor(base + layout.down_scales, DType::kF8E4M3, {H, I / 16});
      const model::ExpertProjection gate{&gc, &gs, scales[static_cast<size_t>(s)].gate, I, H},
          up{&uc, &us, scales[static_cast<size_t>(s)].up, I, H}, down{&dc, &ds, scales[static_cast<size_t>(s)].down, H, I};
      std::vector<float> g(I), u(I), y(H);
      cpu::linear(gate, x.data() + static_cast<size_t>(r) * H, 1, g.data());
      cpu::linear(up, x.data() + static_cast<size_t>(r) * H, 1, u.data());
      for (int i = 0; i < I; ++i) g[static_cast<size_t>(i)] = cpu::silu(g[static_cast<size_t>(i)]) * u[static_cast<size_t>(i)];
      cpu::linear(down, g.data(), 1, y.data());
      for (int n = 0; n < H; ++n) want[static_cast<size_t>(r * H + n)] += weights[static_cast<size_t>(r * k + j)] * y[static_cast<size_t>(n)];
    }
  }

  DeviceBuffer<uint8_t> dpool(pool);
  DeviceBuffer<SlotScales> dscales(scales);
  DeviceBuffer<float> dx(x), dweights(weights), dact(static_cast<size_t>(rows) * k * I), dy(want.size());
  DeviceBuffer<int32_t> dslots(chosen);
  launch_expert_gate_up(dpool.data(), dscales.data(), layout, dx.data(), dslots.data(), rows, k, dact.data(), nullptr);
  launch_expert_down(dpool.data(), dscales.data(), layout, dact.data(), dslots.data(), dweights.data(), rows, k, dy.data(), nullptr);
  expect_close(dy.download(), want, 2e-5);  // two chained fp32 reductions (2560 then 640 terms)
}

}  // namespace
}  // namespace imp::cuda
