// Where does a decode MoE layer's time go inside the two fused kernels? Compiles moe_decode.cu with its
// IMP_PHASE_PROBE timestamps (thread 0 of every block, %globaltimer) and runs the decode MoE of 48 layers in one
// PDL graph as the decode step does (router + gate/up, then down + shared expert + stream write; 512-slot NVFP4
// pools at the released shape, fresh random logits per layer). Prints, for the last layer, each step's time
// from the gate/up kernel's first block entry: min / median / max over blocks.
//   gate/up: 0 entry, 1 after the PDL wait, 2 routed (block barrier), 3 warp 0's dots done, 4 all warps' dots
//            done (barrier), 5 end
//   down:    0 entry, 1 warp 0 after the PDL wait, 2 warp 0's routed down done, 3 all warps done (barrier), 4 end
// `moe_phase_probe gate_up`: the gate/up kernels alone (48 in the PDL graph), so their weight phase runs without
// the down kernel's early fetch competing for HBM.
// Build (links the library for the fills and launch helpers):
//   nvcc -O3 -std=c++20 -gencode=arch=compute_90a,code=sm_90a --expt-relaxed-constexpr -Isrc \
//     bench/experiments/moe_phase_probe.cu build/cuda/libimp_cuda.a build/cuda/libimp_lib.a -lcuda -o build/exp/moe_phase_probe
#define IMP_PHASE_PROBE 1
#include "cuda/kernels/moe_decode.cu"

#include <algorithm>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "cuda/kernels/random_fill.h"
#include "cuda/launch.h"
#include "cuda/memory/device_buffer.h"

using imp::cuda::DeviceBuffer;

namespace {

void print_phases(const char* kernel, const unsigned long long (*stamps)[8], int blocks, int phases, unsigned long long t0) {
  for (int i = 0; i < phases; ++i) {
    std::vector<double> us;
    for (int b = 0; b < blocks; ++b) us.push_back(static_cast<double>(stamps[b][i] - t0) / 1000.0);
    std::sort(us.begin(), us.end());
    std::printf("%-8s step %d: min %7.2f  median %7.2f  max %7.2f us\n", kernel, i, us.front(), us[us.size() / 2], us.back());
  }
}

}  // namespace

int main(int argc, char** argv) {
  const bool gate_up_only = argc > 1 && std::string(argv[1]) == "gate_up";
  const int layers = 48, experts = 512, k = 10, H = 2560, I = 640, shared_inter = 640, streams = 4;
  const auto layout = imp::model::ExpertSlotLayout::make(H, I);
  std::vector<DeviceBuffer<uint8_t>> pools;
  std::vector<DeviceBuffer<uint16_t>> shared_down;
  for (int l = 0; l < layers; ++l) {
    pools.emplace_back(layout.slot_bytes * experts);
    imp::cuda::launch_fill_random_bytes(pools.back().data(), pools.back().size(), 100 + l, 0, 255, nullptr);
    shared_down.emplace_back(static_cast<size_t>(H) * shared_inter);
    imp::cuda::launch_fill_random_bytes(reinterpret_cast<uint8_t*>(shared_down.back().data()), shared_down.back().size() * 2,
                                        300 + l, 0x00, 0x3c, nullptr);
  }
  std::vector<imp::model::SlotScales> host_scales(experts, {0.01f, 0.01f, 0.01f, 0.0f});
  DeviceBuffer<imp::model::SlotScales> scales(host_scales);
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> host_logits(static_cast<size_t>(layers) * experts), host_x(H);
  for (float& v : host_logits) v = normal(rng);
  for (float& v : host_x) v = 0.1f * normal(rng);
  DeviceBuffer<float> logits(host_logits), x(host_x), top_weights(static_cast<size_t>(layers) * k);
  DeviceBuffer<int32_t> top_experts(static_cast<size_t>(layers) * k);
  DeviceBuffer<uint16_t> act(static_cast<size_t>(k) * layout.padded_intermediate);
  std::vector<float> host_proj(2 * shared_inter + 1, 0.25f), host_inject(streams, 1.0f);
  DeviceBuffer<float> shared_proj(host_proj), inject(host_inject), stream_row(static_cast<size_t>(streams) * H);
  IMP_CUDA_CHECK(cudaMemset(stream_row.data(), 0, stream_row.size() * sizeof(float)));

  cudaStream_t stream;
  IMP_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  IMP_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  {
    const imp::cuda::PdlScope pdl;
    for (int l = 0; l < layers; ++l) {
      int32_t* chosen = top_experts.data() + static_cast<size_t>(l) * k;
      float* chosen_w = top_weights.data() + static_cast<size_t>(l) * k;
      imp::cuda::launch_moe_decode_gate_up(pools[l].data(), scales.data(), layout, x.data(),
                                           logits.data() + static_cast<size_t>(l) * experts, experts, k, true, act.data(),
                                           chosen, chosen_w, stream);
      if (gate_up_only) continue;
      imp::cuda::launch_moe_decode_down_hc_write(pools[l].data(), experts, scales.data(), layout, act.data(), chosen, chosen_w, k,
                                                 shared_down[l].data(), shared_proj.data(), shared_inter, inject.data(),
                                                 streams, stream_row.data(), stream);
    }
  }
  IMP_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  IMP_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  for (int run = 0; run < 5; ++run) IMP_CUDA_CHECK(cudaGraphLaunch(exec, stream));
  cudaEvent_t a, b;
  IMP_CUDA_CHECK(cudaEventCreate(&a));
  IMP_CUDA_CHECK(cudaEventCreate(&b));
  IMP_CUDA_CHECK(cudaEventRecord(a, stream));
  IMP_CUDA_CHECK(cudaGraphLaunch(exec, stream));
  IMP_CUDA_CHECK(cudaEventRecord(b, stream));
  IMP_CUDA_CHECK(cudaStreamSynchronize(stream));
  float ms = 0;
  IMP_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
  std::printf("48 layers: %.1f us per layer\n", ms * 1000.0f / layers);

  static unsigned long long host[2][1024][8];
  IMP_CUDA_CHECK(cudaMemcpyFromSymbol(host, imp::cuda::moe::g_phase, sizeof(host)));
  const int gate_blocks = (layout.padded_intermediate / 16) * k, down_blocks = layout.padded_hidden / 16;
  unsigned long long t0 = ~0ull;
  for (int blk = 0; blk < gate_blocks; ++blk) t0 = std::min(t0, host[0][blk][0]);
  print_phases("gate/up", host[0], gate_blocks, 6, t0);
  {  // the gate/up blocks' end (step 5) by how many gate/up blocks shared their SM
    std::vector<int> per_sm(256, 0);
    for (int blk = 0; blk < gate_blocks; ++blk) ++per_sm[host[0][blk][7] % 256];
    for (int n = 1; n <= 8; ++n) {
      std::vector<double> us[6];
      for (int blk = 0; blk < gate_blocks; ++blk) {
        if (per_sm[host[0][blk][7] % 256] != n) continue;
        for (int i = 0; i < 6; ++i) us[i].push_back(static_cast<double>(host[0][blk][i] - t0) / 1000.0);
      }
      if (us[0].empty()) continue;
      for (auto& v : us) std::sort(v.begin(), v.end());
      std::printf("gate/up blocks on SMs with %d of them: %3zu blocks, end min %7.2f median %7.2f max %7.2f us; "
                  "medians of steps 0-4: %.2f %.2f %.2f %.2f %.2f\n", n, us[5].size(), us[5].front(), us[5][us[5].size() / 2],
                  us[5].back(), us[0][us[0].size() / 2], us[1][us[1].size() / 2], us[2][us[2].size() / 2],
                  us[3][us[3].size() / 2], us[4][us[4].size() / 2]);
    }
  }
  if (!gate_up_only) print_phases("down", host[1], down_blocks, 5, t0);
  return 0;
}
