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

}  // namespace
}  // namespace imp::cuda
