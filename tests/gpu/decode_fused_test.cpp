// The fused decode tails against their CPU twins on fresh random inputs: an output projection with its output gate
// on its input, written straight into the hyper-connection streams, the GDN in-projection with its
// conv step and the output gate made beside it, the attention in-projection apart from its gate halves, and the
// shared expert (swiglu, down projection, sigmoid gate)
// added to the routed experts' sum and written into the streams.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "cpu/blocks.h"
#include "cpu/ops.h"
#include "cuda/kernels/dense.h"
#include "cuda/kernels/gated_delta_net.h"
#include "cuda/kernels/shared_expert.h"
#include "cuda/memory/device_buffer.h"
#include "gpu_test_util.h"

namespace imp::cuda {
namespace {

using namespace testing_support;

TEST(GpuDecodeFused, GatedProjectionIntoStreamsMatchesCpu) {
  for (auto [streams, d, k] : {std::tuple{4, 2560, 6144}, {3, 64, 40}, {2, 136, 8}}) {
    Bf16Weight w({d, k}, 0.05f);
    const std::vector<float> x = random_floats(static_cast<size_t>(k)), gate = random_floats(static_cast<size_t>(k));
    const std::vector<float> inject = positive_inject(streams), stream = random_floats(static_cast<size_t>(streams) * d, 2.0f);
    std::vector<float> gated_x = x, y(static_cast<size_t>(d)), want = stream;
    for (int i = 0; i < k; ++i) gated_x[i] *= gate[i];
    cpu::linear(&w.info, gated_x.data(), 1, y.data());
    cpu::hyper_connection_write(hc_config(streams, d), y.data(), inject.data(), 1, want.data());
    DeviceBuffer<float> dx(x), dgate(gate), dinject(inject), dstream(stream);
    launch_gemv_bf16_hc_write(w.device.data(), dx.data(), dgate.data(), d, k, dinject.data(), streams, dstream.data(),
                              nullptr);
    // fp32 both sides, the dot summed in another order: 1e-5 of the stream's scale.
    EXPECT_LE(max_rel_diff(dstream.download(), want), 1e-5) << streams << " x " << d << " x " << k;
  }
}

// The attention in-projection [q_h | gate_h per head, then k, v, indexer] in two parts: every row but the gate
// halves at its place (the gate halves untouched: a sentinel here), and sigmoid of the gate halves alone.
TEST(GpuDecodeFused, AttentionInProjectionApartFromItsGateHalvesMatchesCpu) {
  for (auto [heads, hd, rest, k] : {std::tuple{24, 256, 1664, 2560}, {3, 16, 40, 64}}) {
    const int n = heads * 2 * hd + rest;
    Bf16Weight w({n, k}, 0.05f);
    const std::vector<float> x = random_floats(static_cast<size_t>(k));
    std::vector<float> all(static_cast<size_t>(n));
    cpu::linear(&w.info, x.data(), 1, all.data());
    std::vector<float> want, want_gate;
    std::vector<bool> is_gate(static_cast<size_t>(n), false);
    for (int h = 0; h < heads; ++h) {
      for (int i = 0; i < hd; ++i) {
        const float g = all[static_cast<size_t>(h) * 2 * hd + hd + i];
        want_gate.push_back(1.0f / (1.0f + std::exp(-g)));
        is_gate[static_cast<size_t>(h) * 2 * hd + hd + i] = true;
      }
    }
    for (int r = 0; r < n; ++r) {
      if (!is_gate[static_cast<size_t>(r)]) want.push_back(all[static_cast<size_t>(r)]);
    }
    DeviceBuffer<float> dx(x), dy(std::vector<float>(static_cast<size_t>(n), 12345.0f)), dgate(want_gate.size());
    launch_gemv_bf16_without_gates(w.device.data(), dx.data(), n, k, heads, hd, dy.data(), nullptr);
    launch_gemv_bf16_gate_halves(w.device.data(), dx.data(), k, heads, hd, dgate.data(), nullptr);
    const std::vector<float> y = dy.download();
    std::vector<float> got, got_gate_slots;
    for (int r = 0; r < n; ++r) (is_gate[static_cast<size_t>(r)] ? got_gate_slots : got).push_back(y[static_cast<size_t>(r)]);
    EXPECT_EQ(got_gate_slots, std::vector<float>(want_gate.size(), 12345.0f)) << heads << " heads";
    // fp32 both sides, the dots in another order (expf vs std::exp for the gate): 1e-5 of the scale.
    EXPECT_LE(max_rel_diff(got, want), 1e-5) << heads << " heads";
    EXPECT_LE(max_rel_diff(dgate.download(), want_gate), 1e-5) << heads << " heads";
  }
}

TEST(GpuDecodeFused, SharedExpertIntoStreamsMatchesCpu) {
  for (auto [streams, d, inter] : {std::tuple{4, 2560, 640}, {3, 64, 32}, {4, 200, 8}}) {
    Bf16Weight down({d, inter}, 0.05f);
    // proj = [gate | up | gate_logit], as the MoE input projection leaves them.
    const std::vector<float> proj = random_floats(static_cast<size_t>(2 * inter + 1));
    const std::vector<float> experts = random_floats(static_cast<size_t>(d)), inject = positive_inject(streams);
    const std::vector<float> stream = random_floats(static_cast<size_t>(streams) * d, 2.0f);
    std::vector<float> act(static_cast<size_t>(inter)), shared(static_cast<size_t>(d)), y = experts, want = stream;
    for (int i = 0; i < inter; ++i) act[i] = proj[i] / (1.0f + std::exp(-proj[i])) * proj[inter + i];
    cpu::linear(&down.info, act.data(), 1, shared.data());
    const float gate = 1.0f / (1.0f + std::exp(-proj[2 * inter]));
    for (int n = 0; n < d; ++n) y[n] += gate * shared[n];
    cpu::hyper_connection_write(hc_config(streams, d), y.data(), inject.data(), 1, want.data());
    DeviceBuffer<float> dproj(proj), dexperts(experts), dinject(inject), dstream(stream);
    launch_shared_expert_hc_write(down.device.data(), dproj.data(), inter, d, dexperts.data(), dinject.data(), streams,
                                  dstream.data(), nullptr);
    // fp32 both sides; expf on the device vs std::exp: 1e-5 of the stream's scale.
    EXPECT_LE(max_rel_diff(dstream.download(), want), 1e-5) << streams << " x " << d << " x " << inter;
  }
}

TEST(GpuDecodeFused, GdnInProjectionWithConvStepMatchesCpu) {
  // Released shape: 16 key heads x 128, 48 value heads x 128 (10240 conv channels), z, b, a after them.
  for (auto [key_heads, value_heads, dim, kernel, k] : {std::tuple{16, 48, 128, 4, 2560}, {2, 4, 16, 3, 64}}) {
    GatedDeltaNetShape shape{key_heads, value_heads, dim, dim, kernel};
    const int channels = shape.conv_channels(), n = channels + value_heads * dim + 2 * value_heads;
    Bf16Weight w({n, k}, 0.05f), conv_w({channels, kernel}, 0.3f);
    const std::vector<float> x = random_floats(static_cast<size_t>(k));
    const std::vector<float> state = random_floats(static_cast<size_t>(kernel - 1) * channels);
    std::vector<float> want(static_cast<size_t>(n)), want_state = state;
    cpu::linear(&w.info, x.data(), 1, want.data());
    // The causal depthwise conv over [state ++ current], tap kernel-1 on the current token, then SiLU.
    const std::vector<float> cw = cpu::to_f32(&conv_w.info);
    for (int c = 0; c < channels; ++c) {
      float sum = cw[static_cast<size_t>(c) * kernel + kernel - 1] * want[c];
      for (int j = 0; j < kernel - 1; ++j) sum += cw[static_cast<size_t>(c) * kernel + j] * state[static_cast<size_t>(j) * channels + c];
      for (int j = 0; j + 1 < kernel - 1; ++j) want_state[static_cast<size_t>(j) * channels + c] = state[static_cast<size_t>(j + 1) * channels + c];
      want_state[static_cast<size_t>(kernel - 2) * channels + c] = want[c];
      want[c] = sum / (1.0f + std::exp(-sum));
    }
    // The z rows are launch_gdn_gate_act's: the in-projection leaves them as they were (a sentinel here), and the
    // gate kernel writes act(z) of them (sigmoid, the released gate; silu for the small shape).
    const int z_rows = value_heads * dim;
    const bool sigmoid = channels > 1000;
    shape.sigmoid_gate = sigmoid;
    const std::vector<float> sentinel(static_cast<size_t>(n), 12345.0f);
    std::vector<float> want_gate(static_cast<size_t>(z_rows));
    for (int i = 0; i < z_rows; ++i) {
      const float z = want[static_cast<size_t>(channels + i)];
      want_gate[static_cast<size_t>(i)] = sigmoid ? 1.0f / (1.0f + std::exp(-z)) : z / (1.0f + std::exp(-z));
    }
    want.erase(want.begin() + channels, want.begin() + channels + z_rows);
    DeviceBuffer<float> dx(x), dstate(state), dy(sentinel), dgate(static_cast<size_t>(z_rows));
    const GatedDeltaNetWeightsDevice dw{conv_w.device.data(), nullptr, nullptr, nullptr};
    launch_gdn_in_proj_conv(shape, dw, w.device.data(), dx.data(), n, k, dstate.data(), dy.data(), nullptr);
    launch_gdn_gate_act(shape, w.device.data(), dx.data(), k, dgate.data(), nullptr);
    // fp32 both sides, sums in other orders: 1e-5 of the scale; the shifted state is copied exactly; the z rows'
    // sentinels untouched.
    std::vector<float> got = dy.download();
    const std::vector<float> got_z(got.begin() + channels, got.begin() + channels + z_rows);
    EXPECT_EQ(got_z, std::vector<float>(static_cast<size_t>(z_rows), 12345.0f)) << channels << " channels";
    got.erase(got.begin() + channels, got.begin() + channels + z_rows);
    EXPECT_LE(max_rel_diff(got, want), 1e-5) << channels << " channels";
    EXPECT_LE(max_rel_diff(dstate.download(), want_state), 1e-6) << channels << " channels";
    // act(z): the dot in another order, then expf on the device vs std::exp: 1e-5 of the scale.
    EXPECT_LE(max_rel_diff(dgate.download(), want_gate), 1e-5) << channels << " channels";
  }
}

}  // namespace
}  // namespace imp::cuda
