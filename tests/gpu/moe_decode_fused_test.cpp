// The fused decode MoE (src/cuda/kernels/moe_decode.h: launch_moe_decode_gate_up, then
// launch_moe_decode_down_hc_write) against its CPU twin on fresh random inputs: the router each warp of the
// gate/up kernel computes itself (cpu::route), and the whole tail (routed NVFP4 experts, shared expert,
// sigmoid gate) written into the hyper-connection streams (cpu::moe_block's math, then
// cpu::hyper_connection_write). One token row; every expert resident in the pool (slot = expert id).
// The streams' change is checked per element against the bf16 act-flip bound of expert_flip_bound.h
// (kBase * max|want| plus what bf16 rounding flips of the routed experts' SwiGLU outputs can add), not a flat
// relative tolerance: one flip of a heavy-tailed act can reach ~1-2e-3 of the output scale.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "core/dtype.h"
#include "cpu/blocks.h"
#include "cpu/ops.h"
#include "cuda/check.h"
#include "cuda/launch.h"
#include "cuda/kernels/moe_decode.h"
#include "cuda/kernels/moe_router.h"
#include "cuda/memory/device_buffer.h"
#include "expert_flip_bound.h"
#include "gpu_test_util.h"
#include "model/config.h"
#include "model/expert_slot.h"
#include "model/weights.h"

namespace imp::cuda {
namespace {

using namespace testing_support;

model::ModelConfig route_config(int experts, int k, bool renorm) {
  model::ModelConfig config;
  config.num_experts = experts;
  config.num_experts_per_tok = k;
  config.norm_topk_prob = renorm;
  return config;
}

// max_rel_diff skips NaN (every comparison with it is false): the outputs are checked for NaN/inf first.
bool all_finite(const std::vector<float>& v) {
  return std::all_of(v.begin(), v.end(), [](float f) { return std::isfinite(f); });
}

// Uniform random bytes, four per engine draw (the released-shape pools are ~177 MB).
void fill_random_bytes(std::vector<uint8_t>& v) {
  for (size_t i = 0; i < v.size(); i += 4) {
    const uint32_t word = static_cast<uint32_t>(rng()());
    for (size_t b = 0; b < 4 && i + b < v.size(); ++b) v[i + b] = static_cast<uint8_t>(word >> (8 * b));
  }
}

// ---------------------------------------------------------------------------------------------------------
// Router.

// One decode row through launch_moe_decode_gate_up over an all-zero NVFP4 pool of `experts` slots at the
// tiny shape (H 64, I 16: 6.9 KB a slot): top_experts / top_weights against cpu::route (experts exact and in
// order; weights within 1e-6: both fp32 softmax, the kernel combines per-lane partial sums of exp in a
// butterfly, the reference sums in double: a few ulps of weights <= 1), and the experts against
// launch_router_topk, whose choices the header promises.
class FusedRouterRig {
 public:
  FusedRouterRig(int experts, int k, bool renorm)
      : experts_(experts), k_(k), renorm_(renorm), layout_(model::ExpertSlotLayout::make(64, 16)),
        pool_(layout_.slot_bytes * static_cast<size_t>(experts)),
        scales_(std::vector<model::SlotScales>(static_cast<size_t>(experts), {1.0f, 1.0f, 1.0f, 0.0f})),
        x_(random_floats(64)), act_(static_cast<size_t>(k) * layout_.padded_intermediate),
        top_e_(static_cast<size_t>(k)), top_w_(static_cast<size_t>(k)), ref_e_(static_cast<size_t>(k)),
        ref_w_(static_cast<size_t>(k)) {
    IMP_CUDA_CHECK(cudaMemset(pool_.data(), 0, layout_.slot_bytes * static_cast<size_t>(experts)));
  }

  void check(const std::vector<float>& logits, const std::string& what) {
    ASSERT_EQ(logits.size(), static_cast<size_t>(experts_)) << what;
    DeviceBuffer<float> dl(logits);
    IMP_CUDA_CHECK(cudaMemset(top_e_.data(), 0xff, top_e_.size() * sizeof(int32_t)));  // -1: not written
    IMP_CUDA_CHECK(cudaMemset(top_w_.data(), 0xff, top_w_.size() * sizeof(float)));    // NaN: not written
    launch_moe_decode_gate_up(pool_.data(), scales_.data(), layout_, x_.data(), dl.data(), experts_, k_, renorm_,
                              act_.data(), top_e_.data(), top_w_.data(), nullptr);
    launch_router_topk(dl.data(), 1, experts_, k_, renorm_, ref_e_.data(), ref_w_.data(), nullptr);
    IMP_CUDA_CHECK(cudaDeviceSynchronize());
    const auto got_e = top_e_.download();
    const auto got_w = top_w_.download();
    const auto router_e = ref_e_.download();
    std::vector<int64_t> want_e(static_cast<size_t>(k_));
    std::vector<float> want_w(static_cast<size_t>(k_));
    cpu::route(route_config(experts_, k_, renorm_), logits, want_e, want_w);
    for (int j = 0; j < k_; ++j) {
      const size_t i = static_cast<size_t>(j);
      ASSERT_EQ(got_e[i], want_e[i]) << what << " choice " << j;
      ASSERT_NEAR(got_w[i], want_w[i], 1e-6f) << what << " choice " << j;
      ASSERT_EQ(got_e[i], router_e[i]) << what << " choice " << j << " (launch_router_topk)";
    }
  }

  std::vector<int32_t> last_experts() const { return top_e_.download(); }

 private:
  int experts_, k_;
  bool renorm_;
  model::ExpertSlotLayout layout_;
  DeviceBuffer<uint8_t> pool_;
  DeviceBuffer<model::SlotScales> scales_;
  DeviceBuffer<float> x_;
  DeviceBuffer<uint16_t> act_;
  DeviceBuffer<int32_t> top_e_;
  DeviceBuffer<float> top_w_;
  DeviceBuffer<int32_t> ref_e_;
  DeviceBuffer<float> ref_w_;
};

// The tie rows of GpuKernels.RouterTopKBreaksTiesTowardTheLowerExpert (written for 512 experts), one row
// each, the expert ids taken modulo `experts` so every size gets exact ties (colliding ids just overwrite:
// cpu::route decides what is right).
std::vector<std::vector<float>> tie_rows(int experts) {
  std::vector<std::vector<float>> rows;
  auto row = [&]() -> std::vector<float>& {
    rows.push_back(random_floats(static_cast<size_t>(experts), 1.0f));
    return rows.back();
  };
  auto at = [&](std::vector<float>& r, int e) -> float& { return r[static_cast<size_t>(e % experts)]; };
  {  // a pair tied for first (different warps and lanes), then a triple tied at 8.0 spanning experts >= 256
    auto& r = row();
    at(r, 300) = at(r, 7) = 9.0f;
    at(r, 511) = at(r, 256) = at(r, 33) = 8.0f;
  }
  {  // twelve experts tied at the top for (at 512) ten places: the lowest ids win, in id order
    auto& r = row();
    for (int e : {500, 450, 401, 300, 299, 258, 257, 256, 129, 64, 31, 2}) at(r, e) = 7.5f;
  }
  {  // every logit equal, one of them -0.0 (equal to +0.0): experts 0..k-1
    auto& r = row();
    for (float& v : r) v = 0.0f;
    at(r, 3) = -0.0f;
  }
  {  // the tie on the boundary: 8 clear winners, then 5 tied for the last places
    auto& r = row();
    for (int j = 0; j < 8; ++j) at(r, 100 + 50 * j) = 12.0f - static_cast<float>(j);
    for (int e : {480, 13, 300, 256, 77}) at(r, e) = 4.0f;
  }
  {  // winners above 256, tied pairwise
    auto& r = row();
    for (int j = 0; j < 5; ++j) at(r, 510 - j) = at(r, 300 + j) = 6.0f + static_cast<float>(j);
  }
  {  // negative logits only, with ties
    auto& r = row();
    for (float& v : r) v = -3.0f - std::fabs(v);
    at(r, 400) = at(r, 20) = at(r, 260) = -0.5f;
  }
  return rows;
}

TEST(GpuMoeDecodeFused, RouterMatchesCpu) {
  // 128 experts take the kPer = 4 warp router, up to 512 kPer = 16, above 512 kPer = 128 (logits in local
  // memory); 300 and 257 leave lanes with fewer experts, 16 leaves most lanes empty, 16 the largest top-k; 136
  // with k 16 leaves 8 experts beyond the first 128 (a block router over 64-expert warps would see two full
  // warps, one with 8 keys and five empty).
  for (auto [experts, k, renorm] : {std::tuple{512, 10, true}, {512, 10, false}, {300, 10, true}, {16, 4, true},
                                    {1024, 16, true}, {4096, 10, false}, {257, 1, false}, {128, 8, true},
                                    {512, 16, true}, {136, 16, false}}) {
    const std::string shape =
        "experts " + std::to_string(experts) + " k " + std::to_string(k) + " renorm " + std::to_string(renorm);
    FusedRouterRig rig(experts, k, renorm);
    for (int r = 0; r < 4; ++r) {
      // Spread (scale 2) and flat (scale 0.25: near-equal probabilities) rows.
      rig.check(random_floats(static_cast<size_t>(experts), r < 3 ? 2.0f : 0.25f), shape + " random row " + std::to_string(r));
    }
    if (experts > 256 + k) {
      // Every winner above index 256, the largest last: the first choice is expert experts - k.
      auto logits = random_floats(static_cast<size_t>(experts), 2.0f);
      for (int j = 0; j < k; ++j) logits[static_cast<size_t>(experts - 1 - j)] = 20.0f + static_cast<float>(j);
      rig.check(logits, shape + " winners above 256");
      const auto got = rig.last_experts();
      for (int j = 0; j < k; ++j) EXPECT_GE(got[static_cast<size_t>(j)], 256) << shape << " choice " << j;
      EXPECT_EQ(got[0], experts - k) << shape;
    }
    const auto ties = tie_rows(experts);
    for (size_t r = 0; r < ties.size(); ++r) rig.check(ties[r], shape + " tie row " + std::to_string(r));
    if (::testing::Test::HasFatalFailure()) return;
  }
}

// ---------------------------------------------------------------------------------------------------------
// The whole fused tail.

// Random NVFP4 experts in checkpoint layout (as GpuKernels.check_nvfp4_experts builds them), packed into a
// pool with one slot per expert.
struct Nvfp4Experts {
  struct Checkpoint {
    std::vector<uint8_t> codes[3], scales[3];  // gate, up, down
  };
  model::ExpertSlotLayout layout;
  std::vector<Checkpoint> ckpt;
  std::vector<uint8_t> pool;
  std::vector<model::SlotScales> scales;

  Nvfp4Experts(int H, int I, int experts) : layout(model::ExpertSlotLayout::make(H, I)) {
    std::uniform_int_distribution<int> scale_code(0x00, 0x48);  // E4M3 subnormals .. 2^2
    std::uniform_real_distribution<float> unit(0.0f, 1.0f);
    ckpt.resize(static_cast<size_t>(experts));
    pool.assign(layout.slot_bytes * static_cast<size_t>(experts), 0);
    const model::SlotProjection* projections[3] = {&layout.gate, &layout.up, &layout.down};
    for (int e = 0; e < experts; ++e) {
      Checkpoint& c = ckpt[static_cast<size_t>(e)];
      for (int p = 0; p < 3; ++p) {
        const size_t values = static_cast<size_t>(projections[p]->real_rows) * projections[p]->real_cols;
        c.codes[p].resize(values / 2);
        c.scales[p].resize(values / 16);
        fill_random_bytes(c.codes[p]);
        for (auto& b : c.scales[p]) b = static_cast<uint8_t>(scale_code(rng()));
        model::pack_projection(*projections[p], c.codes[p].data(), c.scales[p].data(),
                               pool.data() + static_cast<size_t>(e) * layout.slot_bytes);
      }
    }
    // weight_scale_2 scaled with the shape (an E2M1 code times its block scale has rms ~3.5) so that gate and
    // up are O(1) and each expert's output is O(1) at every shape: the routed sum then weighs about as much as
    // the shared expert in the streams, and an error in either shows at the tolerance.
    const float gate_up_base = 1.0f / (3.5f * std::sqrt(static_cast<float>(H)));
    const float down_base = 2.0f / (3.5f * std::sqrt(static_cast<float>(I)));
    scales.resize(static_cast<size_t>(experts));
    for (auto& s : scales) {
      s = {gate_up_base * (0.7f + 0.6f * unit(rng())), gate_up_base * (0.7f + 0.6f * unit(rng())),
           down_base * (0.7f + 0.6f * unit(rng())), 0.0f};
    }
  }

  FlipExpert flip_expert(int e) const {
    const int H = layout.hidden, I = layout.intermediate;
    const Checkpoint& c = ckpt[static_cast<size_t>(e)];
    const model::SlotScales& s = scales[static_cast<size_t>(e)];
    return nvfp4_flip_expert({c.codes[0].data(), c.scales[0].data(), s.gate}, {c.codes[1].data(), c.scales[1].data(), s.up},
                             {c.codes[2].data(), c.scales[2].data(), s.down}, H, I);
  }

  // Expert e on one (bf16-valued) row x [H] (token 0 of `bound`), route weight route_w: act [I] =
  // bf16(silu(gate x) * (up x)) as the kernel stores it, out [H] = down act (unweighted); its flips go into
  // bound. cpu::linear on ExpertProjection views of the checkpoint bytes.
  void twin(int e, const std::vector<float>& x, float route_w, FlipBound& bound, std::vector<float>& act,
            std::vector<float>& out) const {
    const int H = layout.hidden, I = layout.intermediate;
    const Checkpoint& c = ckpt[static_cast<size_t>(e)];
    const model::SlotScales& s = scales[static_cast<size_t>(e)];
    const Nvfp4View gate(c.codes[0].data(), c.scales[0].data(), s.gate, I, H), up(c.codes[1].data(), c.scales[1].data(), s.up, I, H),
        down(c.codes[2].data(), c.scales[2].data(), s.down, H, I);
    std::vector<float> u(static_cast<size_t>(I));
    act.assign(static_cast<size_t>(I), 0.0f);
    out.assign(static_cast<size_t>(H), 0.0f);
    cpu::linear(gate.projection, x.data(), 1, act.data());
    cpu::linear(up.projection, x.data(), 1, u.data());
    const int token = 0;
    bound.add(flip_expert(e), 1, &token, &route_w, act.data(), u.data(), act.data());  // act = bf16 act
    cpu::linear(down.projection, act.data(), 1, out.data());
  }
};

struct FusedShape {
  int H, I, shared_inter, streams, k, experts;
  bool renorm;
  std::string name() const {
    return "H " + std::to_string(H) + " I " + std::to_string(I) + " I_s " + std::to_string(shared_inter) + " S " +
           std::to_string(streams) + " k " + std::to_string(k) + " experts " + std::to_string(experts) +
           " renorm " + std::to_string(renorm);
  }
};

// Stream deltas: |got - want| <= kBase * max|want| + flip per element (expert_flip_bound.h). Besides the
// routed experts' act flips: fp32 reordering of the k * I (<= 16 * 1024) routed down and routing terms and
// of the I_s shared-expert terms (fp32 acts: no bf16 rounding, no flips), ~1e-6 of the scale, as in
// GpuMoePrefill (whose kBase this is); the stream add rounds at the streams' scale (|stream| up to ~8: half
// an ulp, ~5e-7 absolute per side), against max|delta| of O(1). 2e-4 leaves two orders of magnitude. The
// flip bound's non-vacuity checks need >= 1e5 acts; one row has k * I <= 16384, so these cases see only the
// bound.
constexpr double kBase = 2e-4;

void check_fused_moe(const FusedShape& shape) {
  const std::string what = shape.name();
  const int H = shape.H, I = shape.I, I_s = shape.shared_inter, S = shape.streams, k = shape.k;
  const Nvfp4Experts experts(H, I, shape.experts);
  const model::ExpertSlotLayout& layout = experts.layout;

  // x fp32 on the device (the kernel rounds it to bf16 as it loads it); the twin uses the rounded values.
  const std::vector<float> x = random_floats(static_cast<size_t>(H));
  std::vector<float> x_bf16(x.size());
  std::transform(x.begin(), x.end(), x_bf16.begin(), round_to_bf16);
  const std::vector<float> logits = random_floats(static_cast<size_t>(shape.experts), 2.0f);  // choices spread
  // The shared expert: down bf16 [H, I_s] (scale 1/sqrt(I_s): an O(1) output), proj = [gate | up | gate
  // logit] fp32 as the input projection leaves them (used as given, no bf16 rounding).
  Bf16Weight shared_down({H, I_s}, 1.0f / std::sqrt(static_cast<float>(I_s)));
  const std::vector<float> proj = random_floats(static_cast<size_t>(2 * I_s + 1));
  std::vector<float> proj_routed_only = proj;
  proj_routed_only[static_cast<size_t>(2 * I_s)] = -1e4f;  // sigmoid = 0 exactly on both sides: no shared term
  const std::vector<float> inject = positive_inject(S);
  const std::vector<float> stream = random_floats(static_cast<size_t>(S) * H, 2.0f);

  // CPU twin: cpu::route, each chosen expert, the weighted sum in choice order (cpu::moe_block's order),
  // plus sigmoid(gate logit) * shared down (silu(gate) * up), written into the streams.
  std::vector<int64_t> chosen(static_cast<size_t>(k));
  std::vector<float> route_w(static_cast<size_t>(k));
  cpu::route(route_config(shape.experts, k, shape.renorm), logits, chosen, route_w);
  std::vector<float> routed(static_cast<size_t>(H), 0.0f), want_act(static_cast<size_t>(k) * I), act, out;
  FlipBound bound(x_bf16, 1, H);  // flip [H] of v (routed experts only: the shared expert has fp32 acts)
  for (int j = 0; j < k; ++j) {
    experts.twin(static_cast<int>(chosen[static_cast<size_t>(j)]), x_bf16, route_w[static_cast<size_t>(j)], bound, act, out);
    std::copy(act.begin(), act.end(), want_act.begin() + static_cast<std::ptrdiff_t>(j) * I);
    for (int n = 0; n < H; ++n) routed[static_cast<size_t>(n)] += route_w[static_cast<size_t>(j)] * out[static_cast<size_t>(n)];
  }
  std::vector<float> shared_act(static_cast<size_t>(I_s)), shared(static_cast<size_t>(H));
  for (int i = 0; i < I_s; ++i) shared_act[static_cast<size_t>(i)] = cpu::silu(proj[static_cast<size_t>(i)]) * proj[static_cast<size_t>(I_s + i)];
  cpu::linear(&shared_down.info, shared_act.data(), 1, shared.data());
  const float shared_gate = cpu::sigmoid(proj[static_cast<size_t>(2 * I_s)]);
  auto delta_of = [&](const std::vector<float>& v) {  // the streams' change when v is written into them
    std::vector<float> after = stream;
    cpu::hyper_connection_write(hc_config(S, H), v.data(), inject.data(), 1, after.data());
    for (size_t i = 0; i < after.size(); ++i) after[i] -= stream[i];
    return after;
  };
  std::vector<float> v = routed;
  for (int n = 0; n < H; ++n) v[static_cast<size_t>(n)] += shared_gate * shared[static_cast<size_t>(n)];
  const std::vector<float> want_delta = delta_of(v), want_routed_delta = delta_of(routed);
  // delta[s, n] = inject[s] * v[n]: v's flips scaled by inject[s] (> 0), in the streams' layout [S, H].
  std::vector<float> delta_flip(static_cast<size_t>(S) * H);
  for (int s = 0; s < S; ++s) {
    for (int n = 0; n < H; ++n) {
      delta_flip[static_cast<size_t>(s) * H + n] = std::fabs(inject[static_cast<size_t>(s)]) * bound.flip()[static_cast<size_t>(n)];
    }
  }
  auto expect_delta = [&](const std::vector<float>& got, const std::vector<float>& want, const std::string& label) {
    expect_within_flip_bound(got, want, delta_flip, H, bound.acts(), bound.ambiguous(), {kBase, true, label, "stream"});
  };

  // Device.
  DeviceBuffer<uint8_t> dpool(experts.pool);
  DeviceBuffer<model::SlotScales> dscales(experts.scales);
  DeviceBuffer<float> dx(x), dlogits(logits), dproj(proj), dproj_routed(proj_routed_only), dinject(inject), dstream(stream);
  DeviceBuffer<uint16_t> dact(static_cast<size_t>(k) * layout.padded_intermediate);
  DeviceBuffer<int32_t> dtop_e(static_cast<size_t>(k));
  DeviceBuffer<float> dtop_w(static_cast<size_t>(k));
  struct Result {
    std::vector<float> stream;
    std::vector<int32_t> experts;
    std::vector<float> weights;
    std::vector<uint16_t> act;
  };
  auto run = [&](DeviceBuffer<float>& shared_proj) {
    dstream.upload(stream);
    IMP_CUDA_CHECK(cudaMemset(dact.data(), 0xff, dact.size() * sizeof(uint16_t)));  // NaN bits: must be overwritten
    IMP_CUDA_CHECK(cudaMemset(dtop_e.data(), 0xff, dtop_e.size() * sizeof(int32_t)));
    IMP_CUDA_CHECK(cudaMemset(dtop_w.data(), 0xff, dtop_w.size() * sizeof(float)));
    launch_moe_decode_gate_up(dpool.data(), dscales.data(), layout, dx.data(), dlogits.data(), shape.experts, k,
                              shape.renorm, dact.data(), dtop_e.data(), dtop_w.data(), nullptr);
    launch_moe_decode_down_hc_write(dpool.data(), shape.experts, dscales.data(), layout, dact.data(), dtop_e.data(), dtop_w.data(), k,
                                    shared_down.device.data(), shared_proj.data(), I_s, dinject.data(), S,
                                    dstream.data(), nullptr);
    IMP_CUDA_CHECK(cudaDeviceSynchronize());
    return Result{dstream.download(), dtop_e.download(), dtop_w.download(), dact.download()};
  };
  auto delta = [&](const std::vector<float>& got) {
    std::vector<float> d = got;
    for (size_t i = 0; i < d.size(); ++i) d[i] -= stream[i];
    return d;
  };

  const Result first = run(dproj);
  // The router's choices, in order, and their weights (as RouterMatchesCpu).
  for (int j = 0; j < k; ++j) {
    const size_t i = static_cast<size_t>(j);
    ASSERT_EQ(first.experts[i], chosen[i]) << what << " choice " << j;
    ASSERT_NEAR(first.weights[i], route_w[i], 1e-6f) << what << " choice " << j;
  }
  // act [k, padded I]: choice j's SwiGLU in bf16, zero in the padding (the down kernel multiplies it by zero
  // codes: garbage there would turn into NaN). Both sides round an fp32 value summed in another order to bf16:
  // a flip is one bf16 ulp (<= 2^-7 relative) of one element, hence 1e-2 of the row's scale.
  {
    std::vector<float> got_act(static_cast<size_t>(k) * I);
    for (int j = 0; j < k; ++j) {
      for (int i = 0; i < layout.padded_intermediate; ++i) {
        const float a = bf16_to_f32(first.act[static_cast<size_t>(j) * layout.padded_intermediate + i]);
        if (i < I) {
          got_act[static_cast<size_t>(j) * I + i] = a;
        } else {
          ASSERT_EQ(a, 0.0f) << what << " act padding, choice " << j << " index " << i;
        }
      }
      const auto row = [&](const std::vector<float>& v) {
        return std::vector<float>(v.begin() + static_cast<std::ptrdiff_t>(j) * I, v.begin() + static_cast<std::ptrdiff_t>(j + 1) * I);
      };
      EXPECT_LE(max_rel_diff(row(got_act), row(want_act)), 1e-2) << what << " act of choice " << j;
    }
    ASSERT_TRUE(all_finite(got_act)) << what << " act";
  }
  // The streams' change (not the streams, whose O(1) values would hide an error in a small change). Exact
  // weights and inputs; fp32 sums in another order, and bf16 rounding flips of the routed SwiGLU outputs, as
  // GpuKernels.check_nvfp4_experts: the per-element flip bound (see kBase).
  ASSERT_TRUE(all_finite(first.stream)) << what;
  expect_delta(delta(first.stream), want_delta, what);

  // Run to run determinism: the same initial streams give the same bits (choices summed in a fixed order).
  const Result second = run(dproj);
  EXPECT_EQ(std::memcmp(first.stream.data(), second.stream.data(), first.stream.size() * sizeof(float)), 0)
      << what << ": streams not deterministic";
  EXPECT_EQ(first.experts, second.experts) << what;
  EXPECT_EQ(std::memcmp(first.weights.data(), second.weights.data(), first.weights.size() * sizeof(float)), 0)
      << what << ": weights not deterministic";
  EXPECT_EQ(first.act, second.act) << what << ": act not deterministic";

  // The routed experts alone (shared gate logit -1e4: sigmoid 0 on both sides), so that the shared expert
  // cannot mask an error in them. Tolerance as above (the same flips; kBase now of the routed delta's scale).
  const Result routed_only = run(dproj_routed);
  ASSERT_TRUE(all_finite(routed_only.stream)) << what << " (routed experts only)";
  expect_delta(delta(routed_only.stream), want_routed_delta, what + " (routed experts only)");
}

// The released shape: hidden 2560, expert and shared intermediate 640, 4 streams, top 10 of a 64-expert pool
// (2.76 MB slots, ~177 MB in all).
TEST(GpuMoeDecodeFused, MatchesCpuAtReleasedShape) {
  check_fused_moe({2560, 640, 640, 4, 10, 64, true});
}

TEST(GpuMoeDecodeFused, MatchesCpuAtUnevenAndTinyShapes) {
  // Padded inputs mid-batch and padded intermediate rows (848 -> 896, 208 -> 256; 14 supertiles over 8 warps)
  // and a shared expert whose width is not a multiple of 256 (208: one 16-byte chunk per lane, some idle).
  check_fused_moe({848, 208, 208, 3, 7, 40, false});
  // The NVFP4 golden fixture's shape (hidden 64, intermediate 16, slots padded to 64) with 300 experts: the
  // kPer = 16 warp router, lanes with fewer experts.
  check_fused_moe({64, 16, 16, 4, 4, 300, true});
  // Several load batches (gate/up: 64 supertiles, 8 per warp, batches of 5 + 3; down: 16 supertiles, batches
  // of 10 + 6) and the largest top-k (16 routed warps + 16 shared warps in the down block, its stage > 48 KB).
  check_fused_moe({4096, 1024, 512, 4, 16, 20, false});
}

// The down kernel fetches its routed weights before the PDL wait on top_experts as it finds them (gate/up writes
// them before it lets down launch) and checks them after the wait. Under PDL in a captured graph, as the decode
// step runs it, layers that share the choice buffers must give the streams bit for bit as plain sequential
// launches, on every replay. (The cases above cover a guess outside the pool: top_experts starts as -1 there.
// A valid but wrong guess followed by a refetch happens only if the early read races gate/up's write; no test
// forces it.)
TEST(GpuMoeDecodeFused, SpeculativeDownFetchUnderPdlMatchesSequential) {
  constexpr int H = 2560, I = 640, I_s = 640, S = 4, k = 10, kExperts = 64, kLayers = 6;
  const Nvfp4Experts experts(H, I, kExperts);
  const model::ExpertSlotLayout& layout = experts.layout;
  DeviceBuffer<uint8_t> dpool(experts.pool);
  DeviceBuffer<model::SlotScales> dscales(experts.scales);
  const std::vector<float> x = random_floats(static_cast<size_t>(H)), stream = random_floats(static_cast<size_t>(S) * H, 2.0f);
  DeviceBuffer<float> dx(x), dlogits(random_floats(static_cast<size_t>(kLayers) * kExperts, 2.0f)),
      dproj(random_floats(static_cast<size_t>(2 * I_s + 1))), dinject(positive_inject(S)), dstream(stream);
  Bf16Weight shared_down({H, I_s}, 1.0f / std::sqrt(static_cast<float>(I_s)));
  DeviceBuffer<uint16_t> dact(static_cast<size_t>(k) * layout.padded_intermediate);
  DeviceBuffer<int32_t> dtop_e(static_cast<size_t>(k));
  DeviceBuffer<float> dtop_w(static_cast<size_t>(k));
  cudaStream_t cu_stream;
  IMP_CUDA_CHECK(cudaStreamCreateWithFlags(&cu_stream, cudaStreamNonBlocking));
  auto enqueue = [&] {
    for (int l = 0; l < kLayers; ++l) {
      launch_moe_decode_gate_up(dpool.data(), dscales.data(), layout, dx.data(), dlogits.data() + static_cast<size_t>(l) * kExperts,
                                kExperts, k, true, dact.data(), dtop_e.data(), dtop_w.data(), cu_stream);
      launch_moe_decode_down_hc_write(dpool.data(), kExperts, dscales.data(), layout, dact.data(), dtop_e.data(), dtop_w.data(),
                                      k, shared_down.device.data(), dproj.data(), I_s, dinject.data(), S, dstream.data(),
                                      cu_stream);
    }
  };
  auto reset = [&] {
    dstream.upload(stream);
    IMP_CUDA_CHECK(cudaMemset(dtop_e.data(), 0, dtop_e.size() * sizeof(int32_t)));  // a valid, wrong guess
  };
  reset();
  enqueue();
  IMP_CUDA_CHECK(cudaStreamSynchronize(cu_stream));
  const std::vector<float> want = dstream.download();
  ASSERT_TRUE(all_finite(want));

  cudaGraph_t graph;
  cudaGraphExec_t exec;
  IMP_CUDA_CHECK(cudaStreamBeginCapture(cu_stream, cudaStreamCaptureModeThreadLocal));
  {
    const PdlScope pdl;
    enqueue();
  }
  IMP_CUDA_CHECK(cudaStreamEndCapture(cu_stream, &graph));
  IMP_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  for (int replay = 0; replay < 3; ++replay) {
    reset();
    IMP_CUDA_CHECK(cudaGraphLaunch(exec, cu_stream));
    IMP_CUDA_CHECK(cudaStreamSynchronize(cu_stream));
    const std::vector<float> got = dstream.download();
    EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)), 0) << "replay " << replay;
  }
  IMP_CUDA_CHECK(cudaGraphExecDestroy(exec));
  IMP_CUDA_CHECK(cudaGraphDestroy(graph));
  IMP_CUDA_CHECK(cudaStreamDestroy(cu_stream));
}

}  // namespace
}  // namespace imp::cuda
