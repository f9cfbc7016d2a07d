// The GPU Gated DeltaNet prefill (conv over [state ++ T rows], chunked delta rule, gated norm) against
// cpu::gated_delta_net(chunked = true) from a random non-zero state, at the released shapes and small ones.
// The projections (in and out) run on the CPU with the twin's own cpu::linear, so only the kernels under test
// differ: fp32 on the CPU, fp32 CUDA-core code plus 3xBF16 tensor-core products (~2^-17 per product, fp32
// sums) on the GPU. split > 0 runs the GPU side as two calls (tokens [0, split) then [split, tokens)) that carry
// the conv and recurrent states, against one CPU call.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "cpu/blocks.h"
#include "cuda/kernels/gated_delta_net_prefill.h"
#include "cuda/kernels/gemm_bf16_split.h"
#include "cuda/memory/device_buffer.h"
#include "gpu_test_util.h"

namespace imp::cuda {
namespace {

using namespace testing_support;

void run_case(int hidden, int key_heads, int value_heads, int key_dim, int value_dim, bool sigmoid_gate, int tokens,
              int split = 0) {
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
  const cpu::GatedDeltaNetState initial = state;
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
  DeviceBuffer<float> d_mixed(mixed), d_z(zv), d_b(bv), d_a(av), d_conv_out(mixed.size());
  DeviceBuffer<uint16_t> d_core_hi(zv.size()), d_core_lo(zv.size());  // the output's two bf16 terms
  const size_t ws_bytes = gdn_prefill_workspace_bytes(shape, tokens);
  DeviceBuffer<uint8_t> d_ws(ws_bytes);
  const int calls[2][2] = {{0, split > 0 ? split : tokens}, {split > 0 ? split : tokens, tokens}};
  for (const auto& call : calls) {
    const int t0 = call[0], n = call[1] - call[0];
    if (n <= 0) continue;
    const size_t ct = static_cast<size_t>(t0);
    launch_gdn_conv_prefill(shape, dev_w, d_mixed.data() + ct * conv, d_conv_state.data(), n,
                            d_conv_out.data() + ct * conv, nullptr);
    launch_gdn_chunked_prefill(shape, dev_w, d_conv_out.data() + ct * conv, d_z.data() + ct * vdim,
                               d_b.data() + ct * value_heads, d_a.data() + ct * value_heads, d_recurrent.data(), n,
                               d_ws.data(), ws_bytes, d_core_hi.data() + ct * vdim, d_core_lo.data() + ct * vdim, nullptr);
  }
  IMP_CUDA_CHECK(cudaDeviceSynchronize());
  const auto core_hi = d_core_hi.download(), core_lo = d_core_lo.download();
  std::vector<float> core(core_hi.size());
  for (size_t i = 0; i < core.size(); ++i) core[i] = bf16_to_f32(core_hi[i]) + bf16_to_f32(core_lo[i]);
  std::vector<float> got(want.size());
  cpu::linear(&out_proj.info, core.data(), tokens, got.data());

  // The same chunked algebra with sums in other orders (and rsqrtf / expf); the GPU's matrix products are
  // 3xBF16 (each fp32 operand as two bf16 terms: ~2^-17 relative per product instead of fp32's 2^-24, fp32
  // accumulation), so a dot product of length <= 128 differs by ~1e-5 of its terms' scale, and the contractive
  // recurrence adds at most that per chunk. Bounds: 1e-4 of the scale for the outputs and the states; measured
  // on the H200 (f67d1aa): at most 1.51e-5 and 1.42e-5 over every case below; with the scan on wgmma (session 28,
  // four visits) at most 1.90e-5 and 1.72e-5; with the output kernel on wgmma and prep's block rows on mma
  // (session 29, c091a12) at most 2.0e-5 and 1.67e-5. Until session 12 the products were
  // 3xTF32 (~2^-21) and the state bound 1e-5; measured then (b7b6eba): at most 9.4e-7 and 4.3e-6.
  const double y_err = max_rel_diff(got, want), s_err = max_rel_diff(d_recurrent.download(), state.recurrent);
  const double c_err = max_rel_diff(d_conv_state.download(), state.conv);
  EXPECT_LE(y_err, 1e-4) << "tokens " << tokens << " split " << split;
  EXPECT_LE(s_err, 1e-4) << "tokens " << tokens << " split " << split;
  EXPECT_LE(c_err, 0.0) << "tokens " << tokens << " split " << split;  // the conv state is a copy
  std::printf("gdn prefill T=%d (split %d) dk=%d dv=%d: y %.3g state %.3g\n", tokens, split, key_dim, value_dim,
              y_err, s_err);

  // Once more from the same states with only the fp16 term written: launch_f16_terms's bits of the terms above.
  if (split != 0) return;
  DeviceBuffer<float> d_conv_state2(initial.conv), d_recurrent2(initial.recurrent), d_conv_out2(mixed.size());
  DeviceBuffer<uint16_t> d_core16(zv.size()), want16(zv.size());
  const float scale = 64.0f;
  launch_gdn_conv_prefill(shape, dev_w, d_mixed.data(), d_conv_state2.data(), tokens, d_conv_out2.data(), nullptr);
  launch_gdn_chunked_prefill(shape, dev_w, d_conv_out2.data(), d_z.data(), d_b.data(), d_a.data(), d_recurrent2.data(),
                             tokens, d_ws.data(), ws_bytes, nullptr, nullptr, nullptr, d_core16.data(), scale);
  launch_f16_terms({d_core_hi.data(), d_core_lo.data(), tokens, vdim}, scale, want16.data(), nullptr);
  IMP_CUDA_CHECK(cudaDeviceSynchronize());
  EXPECT_TRUE(d_core16.download() == want16.download()) << "fp16 term, tokens " << tokens;
  EXPECT_TRUE(d_recurrent2.download() == d_recurrent.download()) << "the state with the fp16 term, tokens " << tokens;
}

// Released shape: 16 key heads, 48 value heads, dims 128 (2 state column slices of 64 per head in the scan).
// Token counts: several chunks with a partial last one, exactly one chunk, a single token, and 640 tokens
// (ten chunks: the state carried through a longer scan).
TEST(GpuGatedDeltaNetPrefill, ChunkedMatchesCpuAtReleasedShapes) {
  for (int tokens : {300, 64, 1, 640}) run_case(2560, 16, 48, 128, 128, true, tokens);
}
// Two GPU calls against one CPU call: the states (conv and recurrent) carried between calls, chunk boundaries
// of the second call not aligned with the CPU's.
TEST(GpuGatedDeltaNetPrefill, TwoCallsMatchOneAtReleasedShapes) {
  run_case(2560, 16, 48, 128, 128, true, 300, 100);
  run_case(2560, 16, 48, 128, 128, true, 200, 128);
}
// Small shapes (the golden fixtures use dims 16): the scan's 64-column slice part empty (dv = 16, 32, 48) or full
// (64), a full slice followed by a part-empty one (dv = 96), its instances for dk = 16, 32, 48, 64, 80, 96, 112;
// dk != dv; key heads shared by several value heads.
TEST(GpuGatedDeltaNetPrefill, ChunkedMatchesCpuAtSmallShapes) {
  for (int tokens : {1, 3, 63, 64, 130}) run_case(64, 2, 6, 16, 16, false, tokens);
  for (int tokens : {2, 129}) run_case(64, 2, 4, 32, 32, true, tokens);
  for (int tokens : {70, 257}) run_case(96, 1, 3, 48, 48, true, tokens);
  for (int tokens : {65, 200}) run_case(96, 2, 4, 64, 16, false, tokens);
  for (int tokens : {100}) run_case(96, 2, 2, 16, 64, true, tokens);
  for (int tokens : {150}) run_case(96, 1, 2, 96, 96, true, tokens);
  for (int tokens : {70}) run_case(96, 1, 2, 80, 32, false, tokens);
  for (int tokens : {70}) run_case(96, 1, 2, 112, 48, true, tokens);
  run_case(64, 2, 6, 16, 16, false, 130, 61);
  run_case(64, 2, 4, 32, 32, true, 129, 64);
}

}  // namespace
}  // namespace imp::cuda
