// Every CUDA kernel against its CPU twin (src/cpu/) on fresh random inputs. Runs on the GPU machine only
// (CTest label gpu). Tolerances are stated per test: the kernels and the references both compute in fp32
// but sum in different orders. The expert kernels' outputs are checked per element against the bf16 act-flip
// bound of expert_flip_bound.h (kExpertBase * max|want| plus what bf16 rounding flips of SwiGLU outputs can
// add): a flat relative tolerance is flaky there, one flip of a heavy-tailed act can reach ~1-2e-3 of the
// scale.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "cpu/blocks.h"
#include "cuda/kernels/dense.h"
#include "cuda/kernels/moe_expert.h"
#include "cuda/kernels/moe_router.h"
#include "cuda/kernels/sampling.h"
#include "cuda/kernels/shared_expert.h"
#include "runtime/sampler.h"
#include "cuda/memory/device_buffer.h"
#include "expert_flip_bound.h"
#include "gpu_test_util.h"

namespace imp::cuda {
namespace {

using namespace testing_support;

std::vector<uint16_t> to_bf16(const std::vector<float>& v) {
  std::vector<uint16_t> out(v.size());
  std::transform(v.begin(), v.end(), out.begin(), f32_to_bf16);
  return out;
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

// Single-row GEMVs up to 16 MiB take every weight load of a warp before the PDL wait (the MoE input shape 1793 x 2560;
// 37 x 1000 with a partial last batch), larger ones two per lane at a time (2560 x 10240).
TEST(GpuKernels, GemvBf16MatchesCpuLinear) {
  for (auto [rows, n, k] : {std::tuple{1, 2560, 10240}, {1, 1793, 2560}, {1, 37, 1000}, {3, 10240, 2560}, {8, 248, 640}}) {
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

// The prefill shared expert's gated SwiGLU: act = sigmoid(logit_r) * silu(gate) * up, gate and up rows strided
// as in the engine's [gate | up] projection, against the formula in double. 1e-6 of the scale: expf and the
// order of the three products, nothing else differs.
TEST(GpuKernels, SwigluGatedMatchesTheFormula) {
  const int rows = 5, inter = 640, stride = 2 * inter;
  const auto proj = random_floats(static_cast<size_t>(rows) * stride, 3.0f);
  const auto logits = random_floats(rows, 4.0f);
  std::vector<float> want(static_cast<size_t>(rows) * inter);
  for (int r = 0; r < rows; ++r) {
    for (int i = 0; i < inter; ++i) {
      const double g = proj[static_cast<size_t>(r) * stride + i], u = proj[static_cast<size_t>(r) * stride + inter + i];
      want[static_cast<size_t>(r) * inter + i] =
          static_cast<float>(g / (1.0 + std::exp(-g)) * u / (1.0 + std::exp(-static_cast<double>(logits[r]))));
    }
  }
  DeviceBuffer<float> d_proj(proj), d_logits(logits), d_act(want.size());
  launch_swiglu_gated(d_proj.data(), d_proj.data() + inter, stride, d_logits.data(), rows, inter, d_act.data(), nullptr);
  expect_close(d_act.download(), want, 1e-6);
}

TEST(GpuKernels, RmsNormMatchesCpu) {
  // Decode shapes take the 4-block cluster kernel (a group of 1025: uneven slices), the others one block per group:
  // 16-byte loads when the group is a multiple of 4 (prefill's 20 x 4 groups of 2560: three quads per thread), one
  // float per load otherwise (70 x 2 groups of 1025).
  for (auto [rows, width, group] : {std::tuple{4, 10240, 2560}, {1, 10240, 2560}, {2, 2050, 1025}, {24, 256, 256}, {3, 128, 128},
                                    {20, 10240, 2560}, {70, 2050, 1025}}) {
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

// Runs the router on the device and checks every row against cpu::route: the same experts in the same order
// (exact), weights within 1e-6 (both fp32 softmax; the kernel combines per-thread partial sums of exp, the
// reference sums in double: a few ulps of weights <= 1).
void check_router(const std::vector<float>& logits, int rows, int experts, int k, bool renorm) {
  model::ModelConfig config;
  config.num_experts = experts;
  config.num_experts_per_tok = k;
  config.norm_topk_prob = renorm;
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
      ASSERT_EQ(got_e[static_cast<size_t>(r * k + j)], want_e[static_cast<size_t>(j)])
          << "experts " << experts << " k " << k << " row " << r << " choice " << j;
      ASSERT_NEAR(got_w[static_cast<size_t>(r * k + j)], want_w[static_cast<size_t>(j)], 1e-6f)
          << "experts " << experts << " k " << k << " row " << r << " choice " << j;
    }
  }
}

TEST(GpuKernels, RouterTopKMatchesCpuOverManyExperts) {
  // 512/10 is the released decode shape (33 rows: the prefill path); 4096 the kernel's limit; 300 and 257 leave
  // threads with fewer experts; 16 leaves most warps empty; k = 64 the launcher's limit.
  for (auto [experts, k, renorm] : {std::tuple{512, 10, true}, {512, 10, false}, {4096, 10, false}, {300, 10, true},
                                    {16, 4, true}, {1024, 64, true}, {257, 1, false}, {4096, 64, true}}) {
    const int rows = 33;
    auto logits = random_floats(static_cast<size_t>(rows) * experts, 2.0f);
    // Regression for the 256-thread bug: make row 0's winners all sit above index 256 when there are that many.
    if (experts > 256 + k) {
      for (int j = 0; j < k; ++j) logits[static_cast<size_t>(experts - 1 - j)] = 20.0f + static_cast<float>(j);
    }
    check_router(logits, rows, experts, k, renorm);
    if (experts > 256 + k) {
      // Row 0 again on the device: its first choice must be the planted maximum (20 + (k - 1) at expert
      // experts - k >= 256).
      DeviceBuffer<float> dl(std::vector<float>(logits.begin(), logits.begin() + experts));
      DeviceBuffer<int32_t> de(static_cast<size_t>(k));
      DeviceBuffer<float> dw(static_cast<size_t>(k));
      launch_router_topk(dl.data(), 1, experts, k, renorm, de.data(), dw.data(), nullptr);
      const auto got = de.download();
      for (int j = 0; j < k; ++j) EXPECT_GE(got[static_cast<size_t>(j)], 256);
      EXPECT_EQ(got[0], experts - k);
    }
  }
}

// Exact ties (equal logits are equal probabilities): the lower expert id goes first and wins the last places.
TEST(GpuKernels, RouterTopKBreaksTiesTowardTheLowerExpert) {
  const int experts = 512, k = 10, rows = 6;
  auto logits = random_floats(static_cast<size_t>(rows) * experts, 1.0f);
  auto at = [&](int r, int e) -> float& { return logits[static_cast<size_t>(r) * experts + e]; };
  // Row 0: a pair tied for first, in different warps and lanes (7 and 300), then a triple tied at 8.0 spanning
  // the threads of one warp and experts >= 256.
  at(0, 300) = at(0, 7) = 9.0f;
  at(0, 511) = at(0, 256) = at(0, 33) = 8.0f;
  // Row 1: twelve experts tied at the top for ten places: the ten lowest ids win, in id order.
  for (int e : {500, 450, 401, 300, 299, 258, 257, 256, 129, 64, 31, 2}) at(1, e) = 7.5f;
  // Row 2: every logit equal, one of them -0.0 (equal to +0.0): experts 0..9.
  for (int e = 0; e < experts; ++e) at(2, e) = 0.0f;
  at(2, 3) = -0.0f;
  // Row 3: the tie sits on the boundary: 8 clear winners, then 5 tied for the last 2 places.
  for (int j = 0; j < 8; ++j) at(3, 100 + 50 * j) = 12.0f - static_cast<float>(j);
  for (int e : {480, 13, 300, 256, 77}) at(3, e) = 4.0f;
  // Row 4: all winners above 256, tied pairwise.
  for (int j = 0; j < 5; ++j) at(4, 510 - j) = at(4, 300 + j) = 6.0f + static_cast<float>(j);
  // Row 5: negative logits only, with ties.
  for (int e = 0; e < experts; ++e) at(5, e) = -3.0f - std::fabs(at(5, e));
  at(5, 400) = at(5, 20) = at(5, 260) = -0.5f;
  check_router(logits, rows, experts, k, true);
  check_router(logits, rows, experts, k, false);
}

// Expert kernels (check_nvfp4_experts, check_bf16_experts): |got - want| <= kExpertBase * max|want| + flip
// per output element (expert_flip_bound.h). Besides the act flips, the two sides differ by fp32 reordering of
// the k * I (<= 16 * 1024) down-projection and routing terms and of the H-term gate / up sums behind acts that
// round alike: ~1e-6 of the output scale, as in GpuMoePrefill (whose kBase this is; the decode kernels sum
// the same terms, in fewer and shorter chains); 2e-4 leaves two orders of magnitude. The flip bound's
// non-vacuity checks need >= 1e5 acts; these cases have at most 2 * 16 * 1024, so they see only the bound.
constexpr double kExpertBase = 2e-4;

std::string expert_case(int H, int I, int experts, int rows, int k) {
  return "H " + std::to_string(H) + " I " + std::to_string(I) + " experts " + std::to_string(experts) + " rows " +
         std::to_string(rows) + " k " + std::to_string(k);
}

// Runs gate/up then down on the device over a host-built slot pool whose expert e sits in slot slot_base + e
// (slots below slot_base are zero); returns y [rows, H]. `chosen` holds expert ids.
std::vector<float> run_expert_kernels(const model::ExpertSlotLayout& layout, const std::vector<uint8_t>& pool,
                                      const std::vector<model::SlotScales>& scales, const std::vector<float>& x,
                                      const std::vector<int32_t>& chosen, const std::vector<float>& weights, int rows,
                                      int k, int slot_base = 0) {
  const size_t offset = static_cast<size_t>(slot_base) * layout.slot_bytes;
  DeviceBuffer<uint8_t> dpool(offset + pool.size());
  IMP_CUDA_CHECK(cudaMemset(dpool.data(), 0, offset));
  IMP_CUDA_CHECK(cudaMemcpy(dpool.data() + offset, pool.data(), pool.size(), cudaMemcpyHostToDevice));
  std::vector<model::SlotScales> slot_scales(static_cast<size_t>(slot_base), model::SlotScales{});
  slot_scales.insert(slot_scales.end(), scales.begin(), scales.end());
  std::vector<int32_t> slots(chosen);
  for (int32_t& s : slots) s += slot_base;
  DeviceBuffer<model::SlotScales> dscales(slot_scales);
  DeviceBuffer<float> dx(x), dweights(weights), dy(static_cast<size_t>(rows) * layout.hidden);
  DeviceBuffer<uint16_t> dact(static_cast<size_t>(rows) * k * layout.padded_intermediate);
  DeviceBuffer<int32_t> dslots(slots);
  launch_expert_gate_up(dpool.data(), dscales.data(), layout, dx.data(), dslots.data(), rows, k, dact.data(), nullptr);
  launch_expert_down(dpool.data(), dscales.data(), layout, dact.data(), dslots.data(), dweights.data(), rows, k, dy.data(),
                     nullptr);
  const auto first = dy.download();
  // Run to run determinism: a second pass (y overwritten, not accumulated) gives the same bits.
  IMP_CUDA_CHECK(cudaMemset(dy.data(), 0xff, dy.size() * sizeof(float)));
  launch_expert_gate_up(dpool.data(), dscales.data(), layout, dx.data(), dslots.data(), rows, k, dact.data(), nullptr);
  launch_expert_down(dpool.data(), dscales.data(), layout, dact.data(), dslots.data(), dweights.data(), rows, k, dy.data(),
                     nullptr);
  const auto second = dy.download();
  EXPECT_EQ(std::memcmp(first.data(), second.data(), first.size() * sizeof(float)), 0) << "not deterministic";
  return first;
}

// Random NVFP4 experts in checkpoint layout, packed into a slot pool, checked against the CPU expert path
// (cpu::linear on ExpertProjection views of the checkpoint bytes, SwiGLU, weighted sum). The kernels use
// BF16 activations as the reference model does, so the twin rounds x and the SwiGLU output to bf16 too
// (FlipBound::add, which also bounds the rounding flips).
void check_nvfp4_experts(int H, int I, int experts, int rows, int k, int slot_base = 0) {
  const model::ExpertSlotLayout layout = model::ExpertSlotLayout::make(H, I);
  std::uniform_int_distribution<int> byte(0, 255), scale_code(0x00, 0x48);  // E4M3 subnormals .. 2^2
  struct Checkpoint {
    std::vector<uint8_t> codes[3], scales[3];
  };
  std::vector<Checkpoint> ckpt(experts);
  std::vector<uint8_t> pool(layout.slot_bytes * experts);
  const model::SlotProjection* projections[3] = {&layout.gate, &layout.up, &layout.down};
  for (int e = 0; e < experts; ++e) {
    for (int p = 0; p < 3; ++p) {
      const size_t values = static_cast<size_t>(projections[p]->real_rows) * projections[p]->real_cols;
      ckpt[e].codes[p].resize(values / 2);
      ckpt[e].scales[p].resize(values / 16);
      for (auto& b : ckpt[e].codes[p]) b = static_cast<uint8_t>(byte(rng()));
      for (auto& b : ckpt[e].scales[p]) b = static_cast<uint8_t>(scale_code(rng()));
      model::pack_projection(*projections[p], ckpt[e].codes[p].data(), ckpt[e].scales[p].data(),
                             pool.data() + static_cast<size_t>(e) * layout.slot_bytes);
    }
  }
  std::vector<model::SlotScales> scales(experts);
  for (auto& s : scales) s = {0.004f + 0.004f * byte(rng()) / 255.0f, 0.003f + 0.004f * byte(rng()) / 255.0f, 0.002f + 0.002f * byte(rng()) / 255.0f, 0.0f};
  auto x = random_floats(static_cast<size_t>(rows) * H);
  for (float& v : x) v = round_to_bf16(v);
  std::vector<int32_t> chosen(static_cast<size_t>(rows) * k);
  std::uniform_int_distribution<int> pick(0, experts - 1);
  for (auto& c : chosen) c = pick(rng());
  auto weights = random_floats(chosen.size(), 0.3f);

  std::vector<float> want(static_cast<size_t>(rows) * H, 0.0f);
  FlipBound bound(x, rows, H);
  std::vector<std::optional<FlipExpert>> flip_of(static_cast<size_t>(experts));
  for (int r = 0; r < rows; ++r) {
    for (int j = 0; j < k; ++j) {
      const Checkpoint& e = ckpt[static_cast<size_t>(chosen[static_cast<size_t>(r * k + j)])];
      const model::SlotScales& s = scales[static_cast<size_t>(chosen[static_cast<size_t>(r * k + j)])];
      std::optional<FlipExpert>& flip_expert = flip_of[static_cast<size_t>(chosen[static_cast<size_t>(r * k + j)])];
      if (!flip_expert) {
        flip_expert = nvfp4_flip_expert({e.codes[0].data(), e.scales[0].data(), s.gate}, {e.codes[1].data(), e.scales[1].data(), s.up},
                                        {e.codes[2].data(), e.scales[2].data(), s.down}, H, I);
      }
      const Nvfp4View gate(e.codes[0].data(), e.scales[0].data(), s.gate, I, H), up(e.codes[1].data(), e.scales[1].data(), s.up, I, H),
          down(e.codes[2].data(), e.scales[2].data(), s.down, H, I);
      std::vector<float> g(I), u(I), y(H);
      cpu::linear(gate.projection, x.data() + static_cast<size_t>(r) * H, 1, g.data());
      cpu::linear(up.projection, x.data() + static_cast<size_t>(r) * H, 1, u.data());
      bound.add(*flip_expert, 1, &r, &weights[static_cast<size_t>(r * k + j)], g.data(), u.data(), g.data());  // g = bf16 act
      cpu::linear(down.projection, g.data(), 1, y.data());
      for (int n = 0; n < H; ++n) want[static_cast<size_t>(r * H + n)] += weights[static_cast<size_t>(r * k + j)] * y[static_cast<size_t>(n)];
    }
  }

  // Exact weights and inputs; fp32 sums in another order, and bf16 rounding flips of SwiGLU outputs: the
  // per-element flip bound (see kExpertBase).
  expect_within_flip_bound(run_expert_kernels(layout, pool, scales, x, chosen, weights, rows, k, slot_base), want, bound,
                           H, {kExpertBase, true, "NVFP4 " + expert_case(H, I, experts, rows, k)});
}

TEST(GpuKernels, ExpertGateUpDownMatchCpuOnTheSlotPool) { check_nvfp4_experts(2560, 640, 24, 3, 10); }
// The decode call: one row, top 10, at the released shape.
TEST(GpuKernels, ExpertGateUpDownMatchCpuForOneDecodeRow) { check_nvfp4_experts(2560, 640, 16, 1, 10); }
// Slots beyond 2^31 bytes into the pool (slot 800 of 2.76 MB slots): 64-bit slot offsets.
TEST(GpuKernels, ExpertSlotsFarIntoThePool) { check_nvfp4_experts(2560, 640, 6, 1, 10, 800); }
// Several load batches per warp (gate/up: 64 supertiles = 8 per warp, batches of 5 + 3; down: 16 supertiles,
// batches of 10 + 6), and the largest top-k (16 warps in the down block, its stage above 48 KB).
TEST(GpuKernels, ExpertKernelsBatchLongRows) { check_nvfp4_experts(4096, 1024, 8, 2, 16); }
// Padded inputs in the middle of a batch (H 848 -> 896: x is zero beyond 848; 14 supertiles over 8 warps,
// one warp empty) and padded intermediate rows (208 -> 256).
TEST(GpuKernels, ExpertKernelsPadUnevenShapes) { check_nvfp4_experts(848, 208, 12, 2, 7); }
// The NVFP4 golden fixture's shape (hidden 64, intermediate 16): slots padded to 64 inputs.
TEST(GpuKernels, ExpertSlotsPadTinyShapesExactly) { check_nvfp4_experts(64, 16, 16, 3, 4); }

// BF16 experts in BF16 slots against the CPU dense expert path (x fp32, the SwiGLU output rounded to bf16 as
// the kernel stores it), at the released shapes and at the golden fixtures' tiny shapes.
void check_bf16_experts(int H, int I, int experts, int rows, int k) {
  const model::ExpertSlotLayout layout = model::ExpertSlotLayout::make(H, I, model::SlotFormat::kBf16);
  std::vector<std::vector<uint16_t>> weights_of(static_cast<size_t>(experts) * 3);
  std::vector<uint8_t> pool(layout.slot_bytes * experts);
  const model::SlotProjection* projections[3] = {&layout.gate, &layout.up, &layout.down};
  for (int e = 0; e < experts; ++e) {
    for (int p = 0; p < 3; ++p) {
      const auto values = random_floats(static_cast<size_t>(projections[p]->rows) * projections[p]->cols, 0.05f);
      auto& bits = weights_of[static_cast<size_t>(e * 3 + p)];
      bits.resize(values.size());
      std::transform(values.begin(), values.end(), bits.begin(), f32_to_bf16);
      model::pack_projection_bf16(*projections[p], bits.data(), pool.data() + static_cast<size_t>(e) * layout.slot_bytes);
    }
  }
  const std::vector<model::SlotScales> scales(static_cast<size_t>(experts), {1.0f, 1.0f, 1.0f, 0.0f});
  const auto x = random_floats(static_cast<size_t>(rows) * H);
  std::vector<int32_t> chosen(static_cast<size_t>(rows) * k);
  std::uniform_int_distribution<int> pick(0, experts - 1);
  for (auto& c : chosen) c = pick(rng());
  const auto route_w = random_floats(chosen.size(), 0.3f);

  std::vector<float> want(static_cast<size_t>(rows) * H, 0.0f);
  FlipBound bound(x, rows, H);  // x as the kernel uses it: fp32
  std::vector<std::optional<FlipExpert>> flip_of(static_cast<size_t>(experts));
  for (int r = 0; r < rows; ++r) {
    for (int j = 0; j < k; ++j) {
      const int e = chosen[static_cast<size_t>(r * k + j)];
      std::optional<FlipExpert>& flip_expert = flip_of[static_cast<size_t>(e)];
      if (!flip_expert) {
        flip_expert = bf16_flip_expert(weights_of[static_cast<size_t>(e * 3)].data(), weights_of[static_cast<size_t>(e * 3 + 1)].data(),
                                       weights_of[static_cast<size_t>(e * 3 + 2)].data(), H, I);
      }
      const model::TensorInfo g = host_tensor(weights_of[static_cast<size_t>(e * 3)].data(), DType::kBF16, {I, H}),
                              u = host_tensor(weights_of[static_cast<size_t>(e * 3 + 1)].data(), DType::kBF16, {I, H}),
                              d = host_tensor(weights_of[static_cast<size_t>(e * 3 + 2)].data(), DType::kBF16, {H, I});
      std::vector<float> gv(static_cast<size_t>(I)), uv(static_cast<size_t>(I)), y(static_cast<size_t>(H));
      cpu::linear(&g, x.data() + static_cast<size_t>(r) * H, 1, gv.data());
      cpu::linear(&u, x.data() + static_cast<size_t>(r) * H, 1, uv.data());
      bound.add(*flip_expert, 1, &r, &route_w[static_cast<size_t>(r * k + j)], gv.data(), uv.data(), gv.data());  // gv = bf16 act
      cpu::linear(&d, gv.data(), 1, y.data());
      for (int n = 0; n < H; ++n) want[static_cast<size_t>(r * H + n)] += route_w[static_cast<size_t>(r * k + j)] * y[static_cast<size_t>(n)];
    }
  }
  // As the NVFP4 test: fp32 order and bf16 rounding flips, per element.
  expect_within_flip_bound(run_expert_kernels(layout, pool, scales, x, chosen, route_w, rows, k), want, bound, H,
                           {kExpertBase, true, "BF16 " + expert_case(H, I, experts, rows, k)});
}

TEST(GpuKernels, Bf16ExpertSlotsMatchCpuAtReleasedShapes) { check_bf16_experts(2560, 640, 16, 2, 10); }
TEST(GpuKernels, Bf16ExpertSlotsMatchCpuAtFixtureShapes) { check_bf16_experts(32, 8, 300, 3, 10); }

// Greedy choice over the released vocabulary, with planted exact ties (the lowest index must win).
TEST(GpuKernels, ArgmaxMatchesTheCpuSamplerWithTies) {
  const int rows = 5, vocab = 248320;
  auto logits = random_floats(static_cast<size_t>(rows) * vocab, 3.0f);
  logits[static_cast<size_t>(1) * vocab + 1000] = logits[static_cast<size_t>(1) * vocab + 200000] = 50.0f;
  logits[static_cast<size_t>(2) * vocab + vocab - 1] = 60.0f;
  DeviceBuffer<float> d_logits(logits);
  DeviceBuffer<int32_t> d_tokens(static_cast<size_t>(rows));
  launch_argmax(d_logits.data(), rows, vocab, d_tokens.data(), nullptr);
  const auto got = d_tokens.download();
  for (int r = 0; r < rows; ++r) {
    EXPECT_EQ(got[static_cast<size_t>(r)],
              runtime::argmax(std::span<const float>(logits).subspan(static_cast<size_t>(r) * vocab, vocab)));
  }
  EXPECT_EQ(got[1], 1000);
  EXPECT_EQ(got[2], vocab - 1);
}

// The argmax splits each row over a cluster of 8 blocks (slices of ceil(vocab / 8)): ties planted on both
// sides of slice boundaries, in far-apart slices, a row of equal values, and rows shorter than the cluster.
TEST(GpuKernels, ArgmaxTiesAcrossBlockSlices) {
  for (const int vocab : {248320, 248321, 1000, 5, 1}) {
    const int rows = 4, slice = (vocab + 7) / 8;
    auto logits = random_floats(static_cast<size_t>(rows) * vocab, 1.0f);
    auto at = [&](int r, int i) -> float& { return logits[static_cast<size_t>(r) * vocab + static_cast<size_t>(std::min(i, vocab - 1))]; };
    at(0, slice) = at(0, slice - 1) = 9.0f;              // boundary of slices 0 and 1
    at(1, 7 * slice) = at(1, 3 * slice + 2) = 9.0f;      // slices 3 and 7
    for (int i = 0; i < vocab; ++i) at(2, i) = -2.5f;    // all equal: index 0
    at(3, vocab - 1) = 9.0f;
    at(3, 2 * slice) = 9.0f;
    DeviceBuffer<float> d_logits(logits);
    DeviceBuffer<int32_t> d_tokens(static_cast<size_t>(rows));
    launch_argmax(d_logits.data(), rows, vocab, d_tokens.data(), nullptr);
    const auto got = d_tokens.download();
    for (int r = 0; r < rows; ++r) {
      EXPECT_EQ(got[static_cast<size_t>(r)],
                runtime::argmax(std::span<const float>(logits).subspan(static_cast<size_t>(r) * vocab, vocab)))
          << "vocab " << vocab << " row " << r;
    }
    EXPECT_EQ(got[2], 0) << "vocab " << vocab;
  }
}

}  // namespace
}  // namespace imp::cuda
