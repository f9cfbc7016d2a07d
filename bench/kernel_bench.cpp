// Kernel microbenchmarks on the GPU machine: measured HBM copy bandwidth, and the effective read bandwidth
// of the decode kernels at the released model's shapes (LM head GEMV, 48 layers of top-10 NVFP4 experts
// from 512-slot pools with fresh random routing per layer, the router, the decode MoE unfused and fused), and the device sampler's time per
// row at the released vocabulary. Prints one JSON object.
#include <cuda_runtime.h>

#include <algorithm>
#include <tuple>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cuda/kernels/dense.h"
#include "cuda/kernels/moe_decode.h"
#include "cuda/kernels/moe_expert.h"
#include "cuda/kernels/moe_router.h"
#include "cuda/kernels/random_fill.h"
#include "cuda/kernels/sampling.h"
#include "cuda/kernels/shared_expert.h"
#include "cuda/launch.h"
#include "cuda/memory/device_buffer.h"

namespace {

using imp::cuda::DeviceBuffer;

// Median milliseconds of `runs` timed repetitions of fn after `warmup` untimed ones.
template <typename Fn>
double median_ms(int warmup, int runs, Fn&& fn) {
  cudaEvent_t start, stop;
  IMP_CUDA_CHECK(cudaEventCreate(&start));
  IMP_CUDA_CHECK(cudaEventCreate(&stop));
  for (int i = 0; i < warmup; ++i) fn(i);
  std::vector<double> times;
  for (int i = 0; i < runs; ++i) {
    IMP_CUDA_CHECK(cudaEventRecord(start));
    fn(warmup + i);
    IMP_CUDA_CHECK(cudaEventRecord(stop));
    IMP_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    IMP_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    times.push_back(ms);
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

}  // namespace

int main() {
  cudaDeviceProp prop{};
  IMP_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  nlohmann::json out;
  out["device"] = prop.name;
  out["sms"] = prop.multiProcessorCount;
  out["memory_gib"] = static_cast<double>(prop.totalGlobalMem) / (1ull << 30);

  // HBM: device-to-device copy of 4 GiB (read + write counted).
  {
    const size_t bytes = 4ull << 30;
    DeviceBuffer<uint8_t> a(bytes), b(bytes);
    const double ms = median_ms(2, 9, [&](int) { IMP_CUDA_CHECK(cudaMemcpyAsync(b.data(), a.data(), bytes, cudaMemcpyDeviceToDevice)); });
    out["hbm_copy_read_plus_write_GBps"] = 2.0 * static_cast<double>(bytes) / (ms * 1e6);
  }

  // LM head GEMV: 248320 x 2560 BF16, one row.
  {
    const int n = 248320, k = 2560;
    DeviceBuffer<uint16_t> w(static_cast<size_t>(n) * k);
    imp::cuda::launch_fill_random_bytes(reinterpret_cast<uint8_t*>(w.data()), w.size() * 2, 1, 0x00, 0x3c, nullptr);
    DeviceBuffer<float> x(k), y(n);
    IMP_CUDA_CHECK(cudaMemset(x.data(), 0, k * sizeof(float)));
    const double ms = median_ms(3, 11, [&](int) { imp::cuda::launch_gemv_bf16(w.data(), x.data(), 1, n, k, y.data(), nullptr); });
    out["lm_head_gemv"] = {{"ms", ms}, {"GBps", static_cast<double>(w.size()) * 2 / (ms * 1e6)}};
  }

  // Per-layer dense GEMVs of the released shapes (one row): GDN in_proj_qkv, out_proj, HC down and up.
  for (auto [name, n, k] : {std::tuple{"gemv_10240x2560", 10240, 2560}, {"gemv_2560x6144", 2560, 6144},
                            {"gemv_320x10240", 320, 10240}, {"gemv_10240x320", 10240, 320}}) {
    DeviceBuffer<uint16_t> w(static_cast<size_t>(n) * k);
    imp::cuda::launch_fill_random_bytes(reinterpret_cast<uint8_t*>(w.data()), w.size() * 2, 2, 0x00, 0x3c, nullptr);
    DeviceBuffer<float> x(k), y(n);
    IMP_CUDA_CHECK(cudaMemset(x.data(), 0, k * sizeof(float)));
    const double ms = median_ms(3, 21, [&](int) { imp::cuda::launch_gemv_bf16(w.data(), x.data(), 1, n, k, y.data(), nullptr); });
    out[name] = {{"us", ms * 1000}, {"GBps", static_cast<double>(w.size()) * 2 / (ms * 1e6)}};
  }

  // 48 layers x top-10 NVFP4 experts (H 2560, I 640) from 512-slot pools, random routing per layer.
  {
    const int layers = 48, experts = 512, k = 10, H = 2560, I = 640;
    const auto layout = imp::model::ExpertSlotLayout::make(H, I);
    std::vector<DeviceBuffer<uint8_t>> pools;
    for (int l = 0; l < layers; ++l) {
      pools.emplace_back(layout.slot_bytes * experts);
      imp::cuda::launch_fill_random_bytes(pools.back().data(), pools.back().size(), 100 + l, 0, 255, nullptr);
    }
    std::vector<imp::model::SlotScales> host_scales(experts, {0.01f, 0.01f, 0.01f, 0.0f});
    DeviceBuffer<imp::model::SlotScales> scales(host_scales);
    std::mt19937 rng(7);
    const int variants = 64;
    std::vector<int32_t> routes(static_cast<size_t>(variants) * layers * k);
    for (int v = 0; v < variants * layers; ++v) {
      std::vector<int32_t> all(experts);
      for (int e = 0; e < experts; ++e) all[e] = e;
      std::shuffle(all.begin(), all.end(), rng);
      std::copy_n(all.begin(), k, routes.begin() + static_cast<ptrdiff_t>(v) * k);
    }
    DeviceBuffer<int32_t> slots(routes);
    std::vector<float> host_w(k, 0.1f);
    DeviceBuffer<float> weights(host_w), x(H), y(H);
    DeviceBuffer<uint16_t> act(static_cast<size_t>(k) * I);
    IMP_CUDA_CHECK(cudaMemset(x.data(), 0, H * sizeof(float)));
    const double ms = median_ms(2, 9, [&](int iter) {
      for (int l = 0; l < layers; ++l) {
        const int32_t* s = slots.data() + (static_cast<size_t>(iter % variants) * layers + l) * k;
        imp::cuda::launch_expert_gate_up(pools[l].data(), scales.data(), layout, x.data(), s, 1, k, act.data(), nullptr);
        imp::cuda::launch_expert_down(pools[l].data(), scales.data(), layout, act.data(), s, weights.data(), 1, k, y.data(), nullptr);
      }
    });
    const double bytes = static_cast<double>(layers) * k * static_cast<double>(layout.slot_bytes);
    out["experts_48_layers_top10"] = {{"ms", ms}, {"bytes", bytes}, {"GBps", bytes / (ms * 1e6)},
                                      {"slot_bytes", layout.slot_bytes}};
    // The same 96 launches captured once as a CUDA graph and replayed (how a decode step runs).
    cudaStream_t stream;
    IMP_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    IMP_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    for (int l = 0; l < layers; ++l) {
      const int32_t* s = slots.data() + static_cast<size_t>(l) * k;
      imp::cuda::launch_expert_gate_up(pools[l].data(), scales.data(), layout, x.data(), s, 1, k, act.data(), stream);
      imp::cuda::launch_expert_down(pools[l].data(), scales.data(), layout, act.data(), s, weights.data(), 1, k, y.data(), stream);
    }
    IMP_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
    IMP_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    const double graph_ms = median_ms(2, 9, [&](int) {
      IMP_CUDA_CHECK(cudaGraphLaunch(exec, stream));
      IMP_CUDA_CHECK(cudaStreamSynchronize(stream));
    });
    out["experts_48_layers_top10_graph"] = {{"ms", graph_ms}, {"GBps", bytes / (graph_ms * 1e6)}};

    // The router alone: 48 launches (512 experts, top 10, one row) in a graph, microseconds per launch.
    std::vector<float> host_logits(static_cast<size_t>(layers) * experts);
    std::normal_distribution<float> normal(0.0f, 2.0f);
    for (float& v : host_logits) v = normal(rng);
    DeviceBuffer<float> logits(host_logits), top_weights(static_cast<size_t>(layers) * k);
    DeviceBuffer<int32_t> top_experts(static_cast<size_t>(layers) * k);
    cudaGraph_t router_graph;
    cudaGraphExec_t router_exec;
    IMP_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    for (int l = 0; l < layers; ++l) {
      imp::cuda::launch_router_topk(logits.data() + static_cast<size_t>(l) * experts, 1, experts, k, true,
                                    top_experts.data() + static_cast<size_t>(l) * k,
                                    top_weights.data() + static_cast<size_t>(l) * k, stream);
    }
    IMP_CUDA_CHECK(cudaStreamEndCapture(stream, &router_graph));
    IMP_CUDA_CHECK(cudaGraphInstantiate(&router_exec, router_graph, 0));
    const double router_ms = median_ms(2, 9, [&](int) {
      IMP_CUDA_CHECK(cudaGraphLaunch(router_exec, stream));
      IMP_CUDA_CHECK(cudaStreamSynchronize(stream));
    });
    out["router_512_top10_48_graph"] = {{"ms", router_ms}, {"us_per_launch", router_ms * 1000 / layers}};

    // The decode MoE after its input projection, 48 layers in one graph with programmatic dependent launch (as
    // the decode step runs), two ways in the same run: the unfused kernels (router -> gate/up -> down, then
    // the shared expert written into the streams) and the fused pair forward.cpp runs for NVFP4 slots (router
    // inside gate/up; down + shared expert + stream write). Bytes: the
    // chosen experts' slots and the shared expert's down projection.
    const int shared_inter = 640, streams = 4;
    std::vector<DeviceBuffer<uint16_t>> shared_down;
    for (int l = 0; l < layers; ++l) {
      shared_down.emplace_back(static_cast<size_t>(H) * shared_inter);
      imp::cuda::launch_fill_random_bytes(reinterpret_cast<uint8_t*>(shared_down.back().data()),
                                          shared_down.back().size() * 2, 300 + l, 0x00, 0x3c, nullptr);
    }
    std::vector<float> host_proj(2 * shared_inter + 1, 0.25f), host_inject(streams, 1.0f);
    DeviceBuffer<float> shared_proj(host_proj), inject(host_inject), stream_row(static_cast<size_t>(streams) * H);
    IMP_CUDA_CHECK(cudaMemset(stream_row.data(), 0, stream_row.size() * sizeof(float)));
    const double moe_bytes = bytes + static_cast<double>(layers) * H * shared_inter * 2;
    auto graph_ms_of = [&](auto&& enqueue_layer) {
      cudaGraph_t g;
      cudaGraphExec_t e;
      IMP_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
      {
        const imp::cuda::PdlScope pdl;
        for (int l = 0; l < layers; ++l) enqueue_layer(l);
      }
      IMP_CUDA_CHECK(cudaStreamEndCapture(stream, &g));
      IMP_CUDA_CHECK(cudaGraphInstantiate(&e, g, 0));
      const double ms = median_ms(2, 9, [&](int) {
        IMP_CUDA_CHECK(cudaGraphLaunch(e, stream));
        IMP_CUDA_CHECK(cudaStreamSynchronize(stream));
      });
      IMP_CUDA_CHECK(cudaGraphExecDestroy(e));
      IMP_CUDA_CHECK(cudaGraphDestroy(g));
      return ms;
    };
    const double unfused_ms = graph_ms_of([&](int l) {
      int32_t* chosen = top_experts.data() + static_cast<size_t>(l) * k;
      float* chosen_w = top_weights.data() + static_cast<size_t>(l) * k;
      imp::cuda::launch_router_topk(logits.data() + static_cast<size_t>(l) * experts, 1, experts, k, true, chosen, chosen_w,
                                    stream);
      imp::cuda::launch_expert_gate_up(pools[l].data(), scales.data(), layout, x.data(), chosen, 1, k, act.data(), stream);
      imp::cuda::launch_expert_down(pools[l].data(), scales.data(), layout, act.data(), chosen, chosen_w, 1, k, y.data(),
                                    stream);
      imp::cuda::launch_shared_expert_hc_write(shared_down[l].data(), shared_proj.data(), shared_inter, H, y.data(),
                                               inject.data(), streams, stream_row.data(), stream);
    });
    const double fused_ms = graph_ms_of([&](int l) {
      int32_t* chosen = top_experts.data() + static_cast<size_t>(l) * k;
      float* chosen_w = top_weights.data() + static_cast<size_t>(l) * k;
      imp::cuda::launch_moe_decode_gate_up(pools[l].data(), scales.data(), layout, x.data(),
                                           logits.data() + static_cast<size_t>(l) * experts, experts, k, true, act.data(),
                                           chosen, chosen_w, stream);
      imp::cuda::launch_moe_decode_down_hc_write(pools[l].data(), experts, scales.data(), layout, act.data(), chosen, chosen_w, k,
                                                 shared_down[l].data(), shared_proj.data(), shared_inter, inject.data(),
                                                 streams, stream_row.data(), stream);
    });
    out["moe_decode_48_layers_graph"] = {
        {"unfused_ms", unfused_ms}, {"unfused_GBps", moe_bytes / (unfused_ms * 1e6)},
        {"fused_ms", fused_ms},     {"fused_GBps", moe_bytes / (fused_ms * 1e6)},
        {"fused_speedup", unfused_ms / fused_ms}};
    IMP_CUDA_CHECK(cudaGraphExecDestroy(router_exec));
    IMP_CUDA_CHECK(cudaGraphDestroy(router_graph));
    IMP_CUDA_CHECK(cudaGraphExecDestroy(exec));
    IMP_CUDA_CHECK(cudaGraphDestroy(graph));
    IMP_CUDA_CHECK(cudaStreamDestroy(stream));
  }
  // Sampling one row of the released vocabulary (as the engine does per sampled token), by option mix.
  {
    constexpr int kVocab = 248320;
    std::vector<float> logits(kVocab);
    std::mt19937 rng(7);
    std::normal_distribution<float> normal(0.0f, 3.0f);
    for (float& v : logits) v = normal(rng);
    DeviceBuffer<float> d_logits(logits);
    DeviceBuffer<int32_t> token(1);
    const std::tuple<const char*, imp::cuda::SampleParams> mixes[] = {
        {"greedy", {0.0f, 0, 1.0f, 0.0f, 0.37}},
        {"temperature", {1.0f, 0, 1.0f, 0.0f, 0.37}},
        {"min_p", {1.0f, 0, 1.0f, 0.05f, 0.37}},
        {"top_p", {0.7f, 0, 0.9f, 0.0f, 0.37}},
        {"top_k_top_p", {0.8f, 50, 0.95f, 0.0f, 0.37}},
        {"top_k_top_p_min_p", {0.6f, 40, 0.8f, 0.02f, 0.37}}};
    for (const auto& [name, params] : mixes) {
      DeviceBuffer<imp::cuda::SampleParams> d_params(std::vector<imp::cuda::SampleParams>{params});
      const double ms = median_ms(1, 51, [&](int) {
        imp::cuda::launch_sample_tokens(d_logits.data(), 1, kVocab, d_params.data(), token.data(), nullptr);
      });
      out["sample_tokens_248320"][name] = {{"us", ms * 1000.0}};
    }
  }
  std::printf("%s\n", out.dump(2).c_str());
  return 0;
}
