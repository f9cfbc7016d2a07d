// Where does a decode hyper-connection read go after its PDL wait? Compiles hyper_connection.cu with its
// IMP_PHASE_PROBE stamps (SM clock of thread 0 of each block) and replays, as one PDL graph, 48 reads (read-down then
// up/mix, the decode step's two kernels) at the released shape (4 streams of 2560, rank 320, 324 down/inject rows),
// the weights of each read distinct so that they come from HBM. Prints the graph's time per read and, for the last
// read, per phase the median and 90th percentile over blocks (cycles and microseconds at the SM's clock):
//   read-down: 0 entry -> 1 after the wait (weights in flight) -> 2 stream staged (cp.async, barrier) -> 3 dots done
//              -> 4 block sums (barrier) -> 5 low written
//   up/mix:    0 entry -> 1 after the wait -> 2 low staged, own stream value loaded (barrier) -> 3 dots done -> 4 x
// In the step the reads follow other kernels; here each read-down follows the previous read's up/mix.
// Build (the probe's own copy of the hyper-connection kernels replaces the archive's):
//   nvcc -O3 -std=c++20 -gencode=arch=compute_90a,code=sm_90a --expt-relaxed-constexpr -Isrc \
//     bench/experiments/hc_read_phase_probe.cu build/cuda/libimp_cuda.a build/cuda/libimp_lib.a -lcuda \
//     -o build/exp/hc_read_phase_probe
#define IMP_PHASE_PROBE 1
#include "cuda/kernels/hyper_connection.cu"

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

void print_phases(const char* kernel, const long long (*stamps)[8], int blocks, int phases, double cycles_per_us) {
  for (int i = 0; i + 1 < phases; ++i) {
    std::vector<double> cycles;
    for (int b = 0; b < blocks; ++b) cycles.push_back(static_cast<double>(stamps[b][i + 1] - stamps[b][i]));
    const double median = percentile(cycles, 0.5), p90 = percentile(cycles, 0.9);
    std::printf("%-9s %d -> %d: median %7.0f cycles %6.2f us   p90 %7.0f cycles %6.2f us\n", kernel, i, i + 1, median,
                median / cycles_per_us, p90, p90 / cycles_per_us);
  }
}

}  // namespace

int main() {
  using namespace imp::cuda;
  const int reads = 48, S = 4, d = 2560, rank = 320, rows_out = rank + S, width = S * d;
  std::vector<DeviceBuffer<uint16_t>> down, up;
  DeviceBuffer<uint16_t> norm(width);
  launch_fill_bf16(norm.data(), norm.size(), 1, 0.0f, 0.1f, nullptr);
  for (int r = 0; r < reads; ++r) {
    down.emplace_back(static_cast<size_t>(rows_out) * width);
    launch_fill_bf16(down.back().data(), down.back().size(), 100 + r, 0.0f, 0.02f, nullptr);
    up.emplace_back(static_cast<size_t>(width) * rank);
    launch_fill_bf16(up.back().data(), up.back().size(), 200 + r, 0.0f, 0.05f, nullptr);
  }
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> host_stream(width);
  for (float& v : host_stream) v = normal(rng);
  DeviceBuffer<float> stream_row(host_stream), low(rows_out), inv_rms(S), x(d);

  hc_read_down_shared_limit();  // raises the kernel's shared-memory limit outside the capture
  const PdlScope pdl;
  const double us = time_graph(
      [&](cudaStream_t stream, int r) {
        launch_hc_read_down(stream_row.data(), norm.data(), down[r].data(), rows_out, rank, S, d, 1e-6f, low.data(),
                            inv_rms.data(), stream);
        launch_hc_read_up_mix(stream_row.data(), norm.data(), inv_rms.data(), up[r].data(), rank, low.data(), rank, S,
                              d, x.data(), stream);
      },
      reads, 5);
  std::printf("%d reads: %.2f us per read (read-down + up/mix; median of 5 replays)\n", reads, us);

  static long long stamps[2][512][8];
  IMP_CUDA_CHECK(cudaMemcpyFromSymbol(stamps, g_hc_phase, sizeof(stamps)));
  int clock_khz = 0;
  IMP_CUDA_CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));
  const double cycles_per_us = clock_khz / 1000.0;
  print_phases("read-down", stamps[0], (rows_out + kDownRows - 1) / kDownRows, 6, cycles_per_us);
  print_phases("up/mix", stamps[1], d / 8, 5, cycles_per_us);
  std::printf("(SM clock attribute %.0f MHz)\n", cycles_per_us);
  return 0;
}
