// The GPU Gated DeltaNet prefill (conv over [state ++ T rows], chunked delta rule, gated norm) against
// cpu::gated_delta_net(chunked = true) from a random non-zero state, at the released shapes and small ones.
// The projections (in and out) run on the CPU with the twin's own cpu::linear, so only the kernels under test
// differ: fp32 on both sides.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "cpu/blocks.h"
#include "cuda/kernels/gated_delta_net_prefill.h"
#include "cuda/memory/device_buffer.h"
#include "gpu_test_util.h"

namespace imp::cuda {
namespace {

using namespace testing_support;

void run_case(int hidden, int key_heads, int value_heads, int key_dim, int value_dim, bool sigmoid_gate, int tokens) {
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

  std::normal_distribution<float> dist(0.0f, 1.0f);
  cpu::GatedDeltaNetState state;
  state.conv.resize(static_cast<size_t>(3 * conv));
  state.recurrent.resize(static_cast<size_t>(value_heads) * key_dim * value_dim);
  for (float& v : state.conv) v = dist(rng());
  for (float& v : state.recurrent) v = 0.1f * dist(rng());
  state.has_previous = true;
  DeviceBuffer<float> d_conv_state(state.conv), d_recurrent(state.recurrent);

  std::vector<float> x(static_cast<size_t>(tokens) * hidden);
  for (float& v : x) v = dist(rng());
  std::vector<float> mixed(static_cast<size_t>(tokens) * conv), zv(static_cast<size_t>(tokens) * vdim),
      bv(static_cast<size_t>(tokens) * value_heads), av(bv.size());
  cpu::linear(&qkv.info, x.data(), tokens, mixed.data());
  cpu::linear(&z.info, x.data(), tokens, zv.data());
  cpu::linear(&b.info, x.data(), tokens, bv.data());
  cpu::linear(&a.info, x.data(), tokens, av.data());
  std::vector<float> want(static_cast<size_t>(tokens) * hidden);
  cpu::gated_delta_net(config, cpu_w, x.data(), tokens, state, /*chunked=*/true, want.data());

  const GatedDeltaNetShape shape{key_heads, value_heads, key_dim, value_dim, 4, 1e-6f, sigmoid_gate};
  const GatedDeltaNetWeightsDevice dev_w{conv1d.device.data(), a_log.device.data(), dt_bias.device.data(),
                                         norm.device.data()};
  DeviceBuffer<float> d_mixed(mixed), d_z(zv), d_b(bv), d_a(av), d_conv_out(mixed.size()), d_core(zv.size());
  const size_t ws_bytes = gdn_prefill_workspace_bytes(shape, tokens);
  DeviceBuffer<uint8_t> d_ws(ws_bytes);
  launch_gdn_conv_prefill(shape, dev_w, d_mixed.data(), d_conv_state.data(), tokens, d_conv_out.data(), nullptr);
  launch_gdn_chunked_prefill(shape, dev_w, d_conv_out.data(), d_z.data(), d_b.data(), d_a.data(), d_recurrent.data(),
                             tokens, d_ws.data(), ws_bytes, d_core.data(), nullptr);
  IMP_CUDA_CHECK(cudaDeviceSynchronize());
  const auto core = d_core.download();
  std::vector<float> got(want.size());
  cpu::linear(&out_proj.info, core.data(), tokens, got.data());

  // fp32 on both sides, the same chunked algebra with sums in other orders (and rsqrtf / expf): 1e-4 of the
  // scale for the outputs (the gated norm rescales each head), 1e-5 for the states.
  const double y_err = max_rel_diff(got, want), s_err = max_rel_diff(d_recurrent.download(), state.recurrent);
  const double c_err = max_rel_diff(d_conv_state.download(), state.conv);
  EXPECT_LE(y_err, 1e-4) << "tokens " << tokens;
  EXPECT_LE(s_err, 1e-5) << "tokens " << tokens;
  EXPECT_LE(c_err, 0.0) << "tokens " << tokens;  // the conv state is a copy
  std::printf("gdn prefill T=%d dk=%d dv=%d: y %.3g state %.3g\n", tokens, key_dim, value_dim, y_err, s_err);
}

TEST(GpuGatedDeltaNetPrefill, ChunkedMatchesCpuAtReleasedShapes) {
  for (int tokens : {300, 64, 1}) run_case(2560, 16, 48, 128, 128, true, tokens);
}
TEST(GpuGatedDeltaNetPrefill, ChunkedMatchesCpuAtSmallShapes) {
  for (int tokens : {1, 3, 63, 64, 130}) run_case(64, 2, 6, 16, 16, false, tokens);
  for (int tokens : {2, 129}) run_case(64, 2, 4, 32, 32, true, tokens);
}

}  // namespace
}  // namespace imp::cuda
