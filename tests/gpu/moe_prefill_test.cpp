// The grouped prefill expert kernels (launch_moe_prefill) against the CPU expert path (cpu::linear on
// ExpertProjection views of checkpoint-layout bytes, SwiGLU rounded to bf16, weighted sum in choice order)
// on fresh random NVFP4 experts and routes: released and tiny (padded) shapes, 1 / 37 / 300 tokens, slot ids
// above 256; realistic load (k = 10 over a 512-slot pool, ~80 pairs per used slot) and skewed routing (one slot
// chosen by every token: > 256 pairs, several tiles; one by every other token: just over 128; slots with exactly
// one pair), so every wgmma width (32, 64, 96, 128 pairs) runs. The workspace starts as NaN bytes, so a partial
// or act row the kernels forget to write shows up. BF16 slots are refused (the engine gives them to the row
// kernels).
//
// Tolerance, per output element y[t, n] (expert_flip_bound.h, which explains it and its constants):
//   |got - want| <= kBase * max|want| + flip[t, n]
// Both sides see the same bf16 x and the same exact weights; they differ by fp32 summation order only, which
// stays far below kBase, except where it moves a SwiGLU output a = silu(g) * u across a bf16 rounding
// midpoint: then the two act values are one bf16 step apart and that step, times a down weight and a route
// weight, lands in y. flip[t, n] bounds that, act by act. In the cases with >= 1e5 acts (tokens * k * I) the
// test also checks that this stays a small correction (a minority of acts ambiguous, flip well below the
// output scale), so it cannot quietly turn into no bound at all.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "cpu/blocks.h"
#include "cuda/kernels/moe_prefill.h"
#include "cuda/memory/device_buffer.h"
#include "expert_flip_bound.h"
#include "gpu_test_util.h"

namespace imp::cuda {
namespace {

using namespace testing_support;

struct Expert {
  std::vector<uint8_t> codes[3], scales[3];  // NVFP4 checkpoint layout
};

// Output tolerance besides the act flips: fp32 reordering of the ~k * I = 6400 down-projection and routing
// terms (and of the H-term gate / up sums behind acts that round alike) moves y by ~1e-6 of its scale; 2e-4
// leaves two orders of magnitude.
constexpr double kBase = 2e-4;

enum class Routing { kUniform, kSkewed };

// k distinct slots per token from `ids` (sorted, at least k + 5 of them for kSkewed), in random choice order.
//   kUniform: uniform over ids.
//   kSkewed: ids[0] by every token, ids[1] by every other token, ids[2..4] by exactly one token each (tokens 0,
//   1 and the last), the rest uniform over ids[5..].
std::vector<int32_t> make_routes(const std::vector<int32_t>& ids, int tokens, int k, Routing routing) {
  std::vector<int32_t> chosen(static_cast<size_t>(tokens) * k);
  for (int t = 0; t < tokens; ++t) {
    std::vector<int32_t> pick;
    std::vector<int32_t> rest = ids;
    if (routing == Routing::kSkewed) {
      pick.push_back(ids[0]);
      if (t % 2 == 0) pick.push_back(ids[1]);
      if (t == 0) pick.push_back(ids[2]);
      if (t == 1) pick.push_back(ids[3]);
      if (t == tokens - 1 && t > 1) pick.push_back(ids[4]);
      rest.assign(ids.begin() + 5, ids.end());
      pick.resize(std::min(pick.size(), static_cast<size_t>(k)));
    }
    std::shuffle(rest.begin(), rest.end(), rng());
    for (size_t i = 0; static_cast<int>(pick.size()) < k; ++i) pick.push_back(rest[i]);
    std::shuffle(pick.begin(), pick.end(), rng());
    std::copy(pick.begin(), pick.end(), chosen.begin() + static_cast<ptrdiff_t>(t) * k);
  }
  return chosen;
}

// `used` slots of a pool of `num_slots` get random experts (the rest stay zero and are never routed to).
void check_moe_prefill(int H, int I, int num_slots, int used, int tokens, int k, Routing routing = Routing::kUniform) {
  const model::ExpertSlotLayout layout = model::ExpertSlotLayout::make(H, I, model::SlotFormat::kNvfp4);
  std::vector<int32_t> slot_ids(static_cast<size_t>(num_slots));
  std::iota(slot_ids.begin(), slot_ids.end(), 0);
  std::shuffle(slot_ids.begin(), slot_ids.end(), rng());
  slot_ids.resize(static_cast<size_t>(used));
  if (num_slots > 256) slot_ids[0] = num_slots - 1;  // always one slot above 256
  std::sort(slot_ids.begin(), slot_ids.end());
  slot_ids.erase(std::unique(slot_ids.begin(), slot_ids.end()), slot_ids.end());
  ASSERT_GE(static_cast<int>(slot_ids.size()), routing == Routing::kSkewed ? k + 5 : k);

  std::uniform_int_distribution<int> byte(0, 255), scale_code(0x00, 0x48);  // E4M3 subnormals .. 2^2
  std::vector<uint8_t> pool(layout.slot_bytes * static_cast<size_t>(num_slots), 0);
  std::vector<model::SlotScales> scales(static_cast<size_t>(num_slots), {1.0f, 1.0f, 1.0f, 0.0f});
  std::vector<Expert> experts(static_cast<size_t>(num_slots));
  const model::SlotProjection* projections[3] = {&layout.gate, &layout.up, &layout.down};
  const int rows_of[3] = {I, I, H}, cols_of[3] = {H, H, I};
  for (int s : slot_ids) {
    Expert& e = experts[static_cast<size_t>(s)];
    uint8_t* slot = pool.data() + static_cast<size_t>(s) * layout.slot_bytes;
    for (int p = 0; p < 3; ++p) {
      const size_t values = static_cast<size_t>(rows_of[p]) * cols_of[p];
      e.codes[p].resize(values / 2);
      e.scales[p].resize(values / 16);
      for (auto& b : e.codes[p]) b = static_cast<uint8_t>(byte(rng()));
      for (auto& b : e.scales[p]) b = static_cast<uint8_t>(scale_code(rng()));
      model::pack_projection(*projections[p], e.codes[p].data(), e.scales[p].data(), slot);
    }
    scales[static_cast<size_t>(s)] = {0.004f + 0.004f * byte(rng()) / 255.0f, 0.003f + 0.004f * byte(rng()) / 255.0f,
                                      0.002f + 0.002f * byte(rng()) / 255.0f, 0.0f};
  }

  // Routes: k distinct slots per token from the used set, random weights.
  auto x = random_floats(static_cast<size_t>(tokens) * H);
  std::vector<int32_t> hot = slot_ids;
  std::shuffle(hot.begin(), hot.end(), rng());  // which slots are hot / single is random too
  const std::vector<int32_t> chosen = make_routes(hot, tokens, k, routing);
  const auto route_w = random_floats(chosen.size(), 0.3f);

  // CPU twin, expert by expert over the tokens routed to it; x and the SwiGLU output rounded to bf16 as the
  // kernels use them. Alongside, the act flip bound of each output (see the top of the file).
  std::vector<float> x_rounded(x.size());
  std::transform(x.begin(), x.end(), x_rounded.begin(), round_to_bf16);
  FlipBound bound(x_rounded, tokens, H);
  std::vector<float> per_pair(chosen.size() * static_cast<size_t>(H));
  for (int s : slot_ids) {
    std::vector<int> pairs;
    for (size_t p = 0; p < chosen.size(); ++p) {
      if (chosen[p] == s) pairs.push_back(static_cast<int>(p));
    }
    if (pairs.empty()) continue;
    const int n = static_cast<int>(pairs.size());
    std::vector<float> xs(static_cast<size_t>(n) * H), g(static_cast<size_t>(n) * I), u(g.size()), y(static_cast<size_t>(n) * H);
    std::vector<int> token(static_cast<size_t>(n));
    std::vector<float> pair_w(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) {
      const int p = pairs[static_cast<size_t>(i)];
      token[static_cast<size_t>(i)] = p / k;
      pair_w[static_cast<size_t>(i)] = route_w[static_cast<size_t>(p)];
      std::copy_n(x_rounded.begin() + static_cast<ptrdiff_t>(p / k) * H, H, xs.begin() + static_cast<ptrdiff_t>(i) * H);
    }
    const Expert& e = experts[static_cast<size_t>(s)];
    const model::SlotScales& sc = scales[static_cast<size_t>(s)];
    model::TensorInfo w[3], ws[3];
    model::ExpertProjection proj[3];
    const float scale2[3] = {sc.gate, sc.up, sc.down};
    for (int p = 0; p < 3; ++p) {
      w[p] = host_tensor(e.codes[p].data(), DType::kU8, {rows_of[p], cols_of[p] / 2});
      ws[p] = host_tensor(e.scales[p].data(), DType::kF8E4M3, {rows_of[p], cols_of[p] / 16});
      proj[p] = {&w[p], &ws[p], scale2[p], rows_of[p], cols_of[p]};
    }
    const FlipExpert flip_expert =
        nvfp4_flip_expert({e.codes[0].data(), e.scales[0].data(), scale2[0]}, {e.codes[1].data(), e.scales[1].data(), scale2[1]},
                          {e.codes[2].data(), e.scales[2].data(), scale2[2]}, H, I);
    cpu::linear(proj[0], xs.data(), n, g.data());
    cpu::linear(proj[1], xs.data(), n, u.data());
    bound.add(flip_expert, n, token.data(), pair_w.data(), g.data(), u.data(), g.data());  // g = bf16 act
    cpu::linear(proj[2], g.data(), n, y.data());
    for (int i = 0; i < n; ++i) {
      const size_t p = static_cast<size_t>(pairs[static_cast<size_t>(i)]);
      std::copy_n(y.begin() + static_cast<ptrdiff_t>(i) * H, H, per_pair.begin() + static_cast<ptrdiff_t>(p) * H);
    }
  }
  std::vector<float> want(static_cast<size_t>(tokens) * H, 0.0f);
  for (int t = 0; t < tokens; ++t) {
    for (int j = 0; j < k; ++j) {
      const size_t p = static_cast<size_t>(t) * k + j;
      for (int n = 0; n < H; ++n) want[static_cast<size_t>(t) * H + n] += route_w[p] * per_pair[p * H + n];
    }
  }

  DeviceBuffer<uint8_t> d_pool(pool);
  DeviceBuffer<model::SlotScales> d_scales(scales);
  std::vector<uint16_t> x16(x.size());  // the kernel takes bf16(x), as the read's split terms hold it
  std::transform(x.begin(), x.end(), x16.begin(), f32_to_bf16);
  DeviceBuffer<uint16_t> d_x(x16);
  DeviceBuffer<float> d_w(route_w), d_y(want.size());
  DeviceBuffer<int32_t> d_slots(chosen);
  const size_t ws_bytes = moe_prefill_workspace_bytes(layout, tokens, k, num_slots);
  DeviceBuffer<uint8_t> d_ws(ws_bytes);
  IMP_CUDA_CHECK(cudaMemset(d_ws.data(), 0xff, ws_bytes));  // NaN in every fp32 / bf16 scratch value
  IMP_CUDA_CHECK(cudaMemset(d_y.data(), 0xff, d_y.size() * sizeof(float)));
  launch_moe_prefill(d_pool.data(), d_scales.data(), layout, d_x.data(), d_slots.data(), d_w.data(), tokens, k,
                     num_slots, d_ws.data(), ws_bytes, d_y.data(), nullptr);
  IMP_CUDA_CHECK(cudaDeviceSynchronize());
  const auto got = d_y.download();
  ASSERT_EQ(got.size(), want.size());
  // Per element: fp32 reordering plus the bf16 flips the twin found possible (see the top of the file); with
  // >= 1e5 acts also that the flip bound stays a small correction.
  expect_within_flip_bound(got, want, bound, H,
                           {kBase, true, "tokens " + std::to_string(tokens) + " H " + std::to_string(H) + " I " + std::to_string(I)});

  // Deterministic: a second run gives identical bits.
  launch_moe_prefill(d_pool.data(), d_scales.data(), layout, d_x.data(), d_slots.data(), d_w.data(), tokens, k,
                     num_slots, d_ws.data(), ws_bytes, d_y.data(), nullptr);
  IMP_CUDA_CHECK(cudaDeviceSynchronize());
  EXPECT_TRUE(got == d_y.download()) << "second run differs";
}

TEST(GpuMoePrefill, Nvfp4SlotsMatchCpuAtReleasedShapes) {
  for (int tokens : {1, 37, 300}) check_moe_prefill(2560, 640, 300, 20, tokens, 10);
}
// k = 10 over 128 used slots (to keep the CPU twin affordable): 1024 tokens give ~80 pairs per slot, the load of
// the released model at a 4096-token chunk. In a pool of 512 slots (one of them slot 511) the host plans narrow
// tiles (20 pairs per slot of the pool), in a pool of 128 wide ones.
TEST(GpuMoePrefill, Nvfp4SlotsRealisticLoadAtReleasedShapes) {
  check_moe_prefill(2560, 640, 512, 128, 1024, 10);
  check_moe_prefill(2560, 640, 128, 128, 1024, 10);
}
// 257 tokens: one slot with 257 pairs, one with 129, three with one pair; 120 tokens: one slot with 120 pairs,
// one with 60. Over a pool of 512 slots these loads take the narrow tiles (up to 32 pairs: 257 = 9 tiles of
// 28-29); over a pool of 20 the wide ones (257 = three tiles of 85-86, 129 = 65 + 64, 120 = one tile: the widest
// wgmma). The host picks the shape from tokens * k / slots.
TEST(GpuMoePrefill, Nvfp4SlotsSkewedRoutingAtReleasedShapes) {
  for (int tokens : {257, 120}) {
    check_moe_prefill(2560, 640, 512, 40, tokens, 10, Routing::kSkewed);
    check_moe_prefill(2560, 640, 20, 20, tokens, 10, Routing::kSkewed);
  }
}
TEST(GpuMoePrefill, Nvfp4SlotsSkewedRoutingTinyShapes) {
  for (int tokens : {3, 300}) check_moe_prefill(64, 16, 16, 16, tokens, 4, Routing::kSkewed);
}
// Shapes that are not multiples of the tiles: H = 80 (inputs padded to 128, rows of down to 128), I = 48.
TEST(GpuMoePrefill, Nvfp4SlotsPadTinyShapes) {
  for (int tokens : {1, 37, 300}) check_moe_prefill(64, 16, 16, 16, tokens, 4);
  check_moe_prefill(80, 48, 16, 16, 37, 4);
}
// The engine sizes the workspace once, for its largest chunk; every shorter launch must fit in it, also the
// narrow tiles' (more padding rows per pair than the wide tiles' just past the switch at 32 pairs per slot).
TEST(GpuMoePrefill, WorkspaceCoversEveryShorterLaunch) {
  const model::ExpertSlotLayout layout = model::ExpertSlotLayout::make(2560, 640, model::SlotFormat::kNvfp4);
  for (int slots : {16, 512}) {
    const size_t largest = moe_prefill_workspace_bytes(layout, 4096, 10, slots);
    size_t previous = 0;
    for (int tokens = 1; tokens <= 4096; ++tokens) {
      const size_t bytes = moe_prefill_workspace_bytes(layout, tokens, 10, slots);
      ASSERT_GE(bytes, previous) << tokens << " tokens, " << slots << " slots";
      previous = bytes;
    }
    EXPECT_EQ(previous, largest);
  }
}
TEST(GpuMoePrefill, RefusesBf16Slots) {
  const model::ExpertSlotLayout layout = model::ExpertSlotLayout::make(32, 8, model::SlotFormat::kBf16);
  DeviceBuffer<uint16_t> x(32);
  DeviceBuffer<float> y(32), w(4);
  DeviceBuffer<int32_t> slots(4);
  const size_t ws_bytes = moe_prefill_workspace_bytes(layout, 1, 4, 16);
  DeviceBuffer<uint8_t> ws(ws_bytes), pool(layout.slot_bytes * 16);
  DeviceBuffer<model::SlotScales> scales(16);
  EXPECT_THROW(launch_moe_prefill(pool.data(), scales.data(), layout, x.data(), slots.data(), w.data(), 1, 4, 16, ws.data(),
                                  ws_bytes, y.data(), nullptr),
               Error);
}

}  // namespace
}  // namespace imp::cuda
