// The GPU Gated DeltaNet decode step (projections by the BF16 GEMV, conv step, recurrent step, out_proj)
// against cpu::gated_delta_net's token-by-token path, over several tokens from a random non-zero state,
// for the released shapes and a small fixture-like shape.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "cpu/blocks.h"
#include "cuda/kernels/dense.h"
#include "cuda/kernels/gated_delta_net.h"
#include "cuda/memory/device_buffer.h"
#include "gpu_test_util.h"

namespace imp::cuda {
namespace {

using namespace testing_support;

void run_case(int hidden, int key_heads, int value_heads, int key_dim, int value_dim, bool sigmoid_gate) {
  model::ModelConfig config;
  config.hidden_size = hidden;
  config.linear_num_key_heads = key_heads;
  config.linear_num_value_heads = value_heads;
  config.linear_key_head_dim = key_dim;
  config.linear_value_head_dim = value_dim;
  config.linear_conv_kernel_dim = 4;
  config.output_gate_type = sigmoid_gate ? "sigmoid" : "silu";
  const int conv = static_cast<int>(config.gdn_conv_dim()), vdim = value_heads * value_dim;

  Bf16Weight qkv({conv, hidden}, 0.05f), z({vdim, hidden}, 0.05f), b({value_heads, hidden}, 0.05f),
      a({value_heads, hidden}, 0.05f), conv1d({conv, 1, 4}, 0.4f), dt_bias({value_heads}, 0.3f),
      a_log({value_heads}, 0.5f), norm({value_dim}, 0.1f, 1.0f), out_proj({hidden, vdim}, 0.05f);
  const model::GatedDeltaNetWeights cpu_w{&qkv.info, &z.info, &b.info, &a.info, &conv1d.info,
                                          &dt_bias.info, &a_log.info, &norm.info, &out_proj.info};

  // A random state, as after a prefill.
  std::normal_distribution<float> dist(0.0f, 1.0f);
  cpu::GatedDeltaNetState state;
  state.conv.resize(static_cast<size_t>(3 * conv));
  state.recurrent.resize(static_cast<size_t>(value_heads) * key_dim * value_dim);
  for (float& v : state.conv) v = dist(rng());
  for (float& v : state.recurrent) v = 0.1f * dist(rng());
  state.has_previous = true;

  DeviceBuffer<float> d_conv_state(state.conv), d_recurrent(state.recurrent);
  DeviceBuffer<float> d_x(static_cast<size_t>(hidden)), d_mixed(static_cast<size_t>(conv)), d_z(static_cast<size_t>(vdim)),
      d_b(static_cast<size_t>(value_heads)), d_a(static_cast<size_t>(value_heads)), d_core(static_cast<size_t>(vdim)),
      d_y(static_cast<size_t>(hidden));
  const GatedDeltaNetShape shape{key_heads, value_heads, key_dim, value_dim, 4, 1e-6f, sigmoid_gate};
  const GatedDeltaNetWeightsDevice dev_w{conv1d.device.data(), a_log.device.data(), dt_bias.device.data(),
                                         norm.device.data()};

  for (int step = 0; step < 3; ++step) {
    std::vector<float> x(static_cast<size_t>(hidden));
    for (float& v : x) v = dist(rng());
    std::vector<float> want(static_cast<size_t>(hidden));
    cpu::gated_delta_net(config, cpu_w, x.data(), 1, state, /*chunked=*/false, want.data());

    d_x.upload(x);
    launch_gemv_bf16(qkv.device.data(), d_x.data(), 1, conv, hidden, d_mixed.data(), nullptr);
    launch_gemv_bf16(z.device.data(), d_x.data(), 1, vdim, hidden, d_z.data(), nullptr);
    launch_gemv_bf16(b.device.data(), d_x.data(), 1, value_heads, hidden, d_b.data(), nullptr);
    launch_gemv_bf16(a.device.data(), d_x.data(), 1, value_heads, hidden, d_a.data(), nullptr);
    launch_gdn_conv_step(shape, dev_w, d_mixed.data(), d_conv_state.data(), 1, nullptr);
    launch_gdn_recurrent_step(shape, dev_w, d_mixed.data(), d_z.data(), d_b.data(), d_a.data(), d_recurrent.data(),
                              d_core.data(), 1, nullptr);
    launch_gemv_bf16(out_proj.device.data(), d_core.data(), 1, hidden, vdim, d_y.data(), nullptr);

    // fp32 on both sides, sums in other orders: 1e-4 of the scale (outputs), 1e-5 (state).
    EXPECT_LE(max_rel_diff(d_y.download(), want), 1e-4) << "step " << step;
    EXPECT_LE(max_rel_diff(d_recurrent.download(), state.recurrent), 1e-5) << "step " << step;
    EXPECT_LE(max_rel_diff(d_conv_state.download(), state.conv), 1e-5) << "step " << step;
  }
}

TEST(GpuGatedDeltaNet, DecodeStepMatchesCpuAtReleasedShapes) { run_case(2560, 16, 48, 128, 128, true); }
TEST(GpuGatedDeltaNet, DecodeStepMatchesCpuAtSmallShapesWithSiluGate) { run_case(64, 2, 6, 16, 16, false); }
// The step splits the key rows over slices of threads: rows not a multiple of the 16-row slice, and a wide
// value head (one slice of 40 rows: the rows past the register cache are read twice).
TEST(GpuGatedDeltaNet, DecodeStepMatchesCpuWithUnevenKeySlices) { run_case(64, 2, 4, 40, 96, true); }
TEST(GpuGatedDeltaNet, DecodeStepMatchesCpuWithWideValueHeads) { run_case(64, 1, 2, 40, 640, false); }

// The decode step without z (the graph applies the gate in the output projection) writes the normed output
// before its gate: times act(z), the gated step's output bit for bit, and the same state. The released shape with
// either gate, and a small one.
TEST(GpuGatedDeltaNet, DecodeStepWithoutZIsTheGatedOutputBeforeItsGate) {
  for (auto [sigmoid_gate, key_heads, value_heads, dim] : {std::tuple{true, 16, 48, 128}, {false, 16, 48, 128}, {true, 2, 6, 16}}) {
    const int conv = 2 * key_heads * dim + value_heads * dim, vdim = value_heads * dim;
    const GatedDeltaNetShape shape{key_heads, value_heads, dim, dim, 4, 1e-6f, sigmoid_gate};
    Bf16Weight dt_bias({value_heads}, 0.3f), a_log({value_heads}, 0.5f), norm({dim}, 0.1f, 1.0f);
    const GatedDeltaNetWeightsDevice dev_w{nullptr, a_log.device.data(), dt_bias.device.data(), norm.device.data()};
    const std::vector<float> mixed = random_floats(static_cast<size_t>(conv)), z = random_floats(static_cast<size_t>(vdim));
    const std::vector<float> b = random_floats(static_cast<size_t>(value_heads)), a = random_floats(static_cast<size_t>(value_heads));
    const std::vector<float> state = random_floats(static_cast<size_t>(value_heads) * dim * dim, 0.1f);
    DeviceBuffer<float> d_mixed(mixed), d_z(z), d_b(b), d_a(a), d_gated_state(state), d_plain_state(state);
    DeviceBuffer<float> d_gated(static_cast<size_t>(vdim)), d_plain(static_cast<size_t>(vdim));
    launch_gdn_recurrent_step(shape, dev_w, d_mixed.data(), d_z.data(), d_b.data(), d_a.data(), d_gated_state.data(),
                              d_gated.data(), 1, nullptr);
    launch_gdn_recurrent_step(shape, dev_w, d_mixed.data(), nullptr, d_b.data(), d_a.data(), d_plain_state.data(),
                              d_plain.data(), 1, nullptr);
    const std::vector<float> gated = d_gated.download(), plain = d_plain.download();
    // act(z) in fp32 as the device's sigmoidf (1 / (1 + e^-z)); the device's expf is within 2 ulps of std::exp, so
    // the bound is ~8 ulps of each product (1e-6 relative, element by element) rather than equality. A gate
    // missing or applied twice is off by O(1).
    double worst = 0.0;
    for (int i = 0; i < vdim; ++i) {
      const float s = 1.0f / (1.0f + std::exp(-z[i]));
      const float act = sigmoid_gate ? s : z[i] * s;
      const double want = static_cast<double>(gated[i]), got = static_cast<double>(plain[i] * act);
      worst = std::max(worst, std::abs(got - want) / std::max(1e-30, std::abs(want)));
    }
    EXPECT_LE(worst, 1e-6) << "sigmoid " << sigmoid_gate << ", " << vdim << " rows";
    EXPECT_EQ(d_gated_state.download(), d_plain_state.download()) << "sigmoid " << sigmoid_gate << ", " << vdim << " rows";
  }
}

}  // namespace
}  // namespace imp::cuda
