// Where does a step of the chunked GDN scan go? Compiles gated_delta_net_prefill.cu with its IMP_PHASE_PROBE
// timestamps (SM clock of thread 0 of each scan block at six points of every chunk) and runs the chunked prefill
// of one GDN layer at the released shape (16 key heads, 48 value heads, dims 128) over 4096 tokens of random
// inputs, twice (the second run is reported). Prints, per phase, the median and 90th percentile over blocks and
// chunks 1..62 of its cycles and microseconds at the SM's clock:
//   0 -> 1  the A fragments of -S^T, the state parked in shared memory, waiting for the chunk's stage
//   1 -> 2  U into the accumulators, V'^T = U^T - S^T W^T (3xBF16 wgmmas)
//   2 -> 3  V'^T's fragments, the parked state reloaded times gC
//   3 -> 4  S^T <- gC S^T + V'^T Kp (wgmmas), V' and the state snapshot stored while they run
//   4 -> 5  barrier, chunk + 2's bulk copies issued
// (until session 28 the mma.sync scan's phases: snapshot stores and waiting for W, U; V'; waiting for Kp; S update;
// issuing Kp: bench/results/2026-12-01_session28_ab.txt has both)
// and the whole step (0 -> the next chunk's 0); and the three kernels' time together from events, launched plainly
// and inside a PdlScope as prefill launches them (where a kernel may start before its predecessor ends). Then the prep
// kernel's phases per block (thread 0's clock after each of its barriers, g_prep_phase).
// Build (links the library for the fills; the probe's own copy of the GDN kernels replaces the archive's):
//   nvcc -O3 -std=c++20 -gencode=arch=compute_90a,code=sm_90a --expt-relaxed-constexpr -Isrc \
//     bench/experiments/gdn_scan_phase_probe.cu build/cuda/libimp_cuda.a build/cuda/libimp_lib.a -lcuda \
//     -o build/exp/gdn_scan_phase_probe
#define IMP_PHASE_PROBE 1
#include "cuda/kernels/gated_delta_net_prefill.cu"

#include <algorithm>
#include <cstdio>
#include <random>
#include <vector>

#include "cuda/kernels/random_fill.h"
#include "cuda/launch.h"
#include "cuda/memory/device_buffer.h"
#include "probe_graph.cuh"

using imp::cuda::DeviceBuffer;

namespace {

DeviceBuffer<float> random_floats(size_t n, float scale, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> host(n);
  for (float& v : host) v = normal(rng);
  return DeviceBuffer<float>(host);
}

}  // namespace

int main() {
  using namespace imp::cuda;
  const GatedDeltaNetShape shape{16, 48, 128, 128, 4, 1e-6f, true};
  const int T = 4096, hv = shape.value_heads, vd = hv * shape.value_dim, channels = shape.conv_channels();
  DeviceBuffer<uint16_t> a_log(hv), dt_bias(hv), norm(shape.value_dim);
  launch_fill_bf16(a_log.data(), a_log.size(), 1, 0.5f, 0.3f, nullptr);
  launch_fill_bf16(dt_bias.data(), dt_bias.size(), 2, 0.0f, 0.5f, nullptr);
  launch_fill_bf16(norm.data(), norm.size(), 3, 1.0f, 0.1f, nullptr);
  const GatedDeltaNetWeightsDevice w{nullptr, a_log.data(), dt_bias.data(), norm.data()};
  DeviceBuffer<float> conv_out = random_floats(static_cast<size_t>(T) * channels, 1.0f, 4);
  DeviceBuffer<float> z = random_floats(static_cast<size_t>(T) * vd, 1.0f, 5);
  DeviceBuffer<float> b = random_floats(static_cast<size_t>(T) * hv, 1.0f, 6);
  DeviceBuffer<float> a = random_floats(static_cast<size_t>(T) * hv, 1.0f, 7);
  DeviceBuffer<float> recurrent(static_cast<size_t>(hv) * shape.key_dim * shape.value_dim);
  const size_t ws_bytes = gdn_prefill_workspace_bytes(shape, T);
  DeviceBuffer<uint8_t> workspace(ws_bytes);
  DeviceBuffer<uint16_t> out_hi(static_cast<size_t>(T) * vd), out_lo(static_cast<size_t>(T) * vd);
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  float ms = 0.0f;
  for (int run = 0; run < 2; ++run) {
    cudaMemset(recurrent.data(), 0, recurrent.size() * sizeof(float));
    cudaEventRecord(start);
    launch_gdn_chunked_prefill(shape, w, conv_out.data(), z.data(), b.data(), a.data(), recurrent.data(), T,
                               workspace.data(), ws_bytes, out_hi.data(), out_lo.data(), nullptr);
    cudaEventRecord(stop);
    if (cudaEventSynchronize(stop) != cudaSuccess || cudaGetLastError() != cudaSuccess) {
      std::fprintf(stderr, "gdn_scan_phase_probe: the prefill failed\n");
      return 1;
    }
    cudaEventElapsedTime(&ms, start, stop);
  }
  std::printf("chunked prefill (prep + scan + out), 4096 tokens: %.1f us\n", ms * 1000.0f);
  {
    // As prefill launches them (inside a PdlScope: the kernels that go through launch_kernel may start while the
    // previous one runs), median of 5 after one warm-up; the stamps below are from the last of these runs.
    const PdlScope pdl;
    std::vector<double> times;
    for (int run = 0; run < 6; ++run) {
      cudaEventRecord(start);
      launch_gdn_chunked_prefill(shape, w, conv_out.data(), z.data(), b.data(), a.data(), recurrent.data(), T,
                                 workspace.data(), ws_bytes, out_hi.data(), out_lo.data(), nullptr);
      cudaEventRecord(stop);
      if (cudaEventSynchronize(stop) != cudaSuccess || cudaGetLastError() != cudaSuccess) {
        std::fprintf(stderr, "gdn_scan_phase_probe: the prefill failed inside a PdlScope\n");
        return 1;
      }
      cudaEventElapsedTime(&ms, start, stop);
      if (run > 0) times.push_back(ms * 1000.0);
    }
    std::printf("the same inside a PdlScope (as prefill launches it), median of 5: %.1f us\n", percentile(times, 0.5));
  }

  static long long stamps[256][128][6];
  cudaMemcpyFromSymbol(stamps, g_scan_phase, sizeof(stamps));
  int clock_khz = 0;
  cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0);
  const double cycles_per_us = clock_khz / 1000.0;
  const int blocks = hv * (shape.value_dim / 64), chunks = T / 64;
  const char* names[6] = {"frags, park, wait", "V'", "frags, reload", "S update", "issue", "whole step"};
  for (int phase = 0; phase < 6; ++phase) {
    std::vector<double> cycles;
    for (int blk = 0; blk < blocks; ++blk) {
      for (int c = 1; c + 1 < chunks; ++c) {
        const long long from = stamps[blk][c][phase == 5 ? 0 : phase];
        const long long to = phase == 5 ? stamps[blk][c + 1][0] : stamps[blk][c][phase + 1];
        cycles.push_back(static_cast<double>(to - from));
      }
    }
    const double median = percentile(cycles, 0.5), p90 = percentile(cycles, 0.9);
    std::printf("%-18s median %8.0f cycles %6.2f us   p90 %8.0f cycles %6.2f us\n", names[phase], median,
                median / cycles_per_us, p90, p90 / cycles_per_us);
  }
  std::printf("(SM clock attribute %.0f MHz; %d blocks x %d chunks)\n", cycles_per_us, blocks, chunks - 2);

  // The prep kernel's blocks (chunk, value head), phases between its barriers.
  static long long prep[4096][8];
  cudaMemcpyFromSymbol(prep, g_prep_phase, sizeof(prep));
  const int prep_blocks = chunks * hv;
  const char* prep_names[7] = {"q, k, beta, gamma loads", "cumsum, q/k norms", "K K^T, Q K^T, Aqk",
                               "Qg, Kp images, diag", "L^-1 block rows", "[W | U], W image, U", "whole block"};
  long long first = prep[0][0], last = prep[0][6];
  for (int blk = 0; blk < prep_blocks; ++blk) first = std::min(first, prep[blk][0]), last = std::max(last, prep[blk][6]);
  for (int phase = 0; phase < 7; ++phase) {
    std::vector<double> cycles;
    for (int blk = 0; blk < prep_blocks; ++blk) {
      cycles.push_back(static_cast<double>(phase == 6 ? prep[blk][6] - prep[blk][0] : prep[blk][phase + 1] - prep[blk][phase]));
    }
    const double median = percentile(cycles, 0.5), p90 = percentile(cycles, 0.9);
    std::printf("prep %-26s median %8.0f cycles %6.2f us   p90 %8.0f cycles %6.2f us\n", prep_names[phase], median,
                median / cycles_per_us, p90, p90 / cycles_per_us);
  }
  std::printf("prep: %d blocks, first start to last end %.1f us (SM clocks: comparable across SMs only roughly)\n",
              prep_blocks, static_cast<double>(last - first) / cycles_per_us);
  return 0;
}
