// Where do the QSA decode selection's ~10.6 us on the critical path go at 32K context (session 27's timeline of
// 803adfa; its cluster of 8 blocks should need ~5 us of work)? Compiles qsa.cu with its IMP_PHASE_PROBE timestamps
// (thread 0 of every block, %globaltimer) and replays 12 score + select launches (the released model's attention
// layers) in one PDL graph at the released indexer shape (4 heads of 128, ratio 4, budget 2048: the top 512 of the
// blocks), random block keys and queries. `qsa_select_phase_probe 32768` (the context; default 32768). Prints the
// time per launch pair and, for the last pair, the selection's steps from the score kernel's last block end:
//   0 entry, 1 after the wait, 2 keys in shared memory, 3..6 after each radix pass (cluster barrier, the summed
//   histograms, the digit), 7 end (the scans' two cluster barriers, the writes, the exit barrier)
// min / median / max over the 8 blocks.
// Build (the probe's own copy of the QSA kernels replaces the archive's; links the library for the launch helpers):
//   nvcc -O3 -std=c++20 -gencode=arch=compute_90a,code=sm_90a --expt-relaxed-constexpr -Isrc \
//     bench/experiments/qsa_select_phase_probe.cu build/cuda/libimp_cuda.a build/cuda/libimp_lib.a -lcuda \
//     -o build/exp/qsa_select_phase_probe
#define IMP_PHASE_PROBE 1
#include "cuda/kernels/qsa.cu"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "cuda/launch.h"
#include "cuda/memory/device_buffer.h"
#include "probe_graph.cuh"

using imp::cuda::DeviceBuffer;

int main(int argc, char** argv) {
  const int context = argc > 1 ? std::atoi(argv[1]) : 32768;
  const int heads = 4, dim = 128, ratio = 4, budget = 2048, layers = 12;
  const int blocks = context / ratio;
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> block_keys(static_cast<size_t>(blocks) * dim), queries(static_cast<size_t>(heads) * dim);
  for (float& v : block_keys) v = normal(rng);
  for (float& v : queries) v = normal(rng);
  DeviceBuffer<float> d_keys(block_keys), d_queries(queries), d_scores(static_cast<size_t>(blocks) + 1);
  DeviceBuffer<int32_t> d_pos(std::vector<int32_t>{context - 1}), d_selected(static_cast<size_t>(budget + ratio - 1)),
      d_count(1);

  const imp::cuda::PdlScope pdl;  // the decode graph's launches (launch_kernel reads it while capturing)
  const CapturedGraph graph(
      [&](cudaStream_t stream, int) {
        imp::cuda::launch_qsa_select(d_queries.data(), heads, dim, d_keys.data(), d_pos.data(), ratio, budget / ratio,
                                     blocks + 1, d_scores.data(), d_selected.data(), d_count.data(), stream);
      },
      layers);
  graph.replay_ms(5);  // warm-up
  static unsigned long long stamps[8 + 128][8];
  IMP_CUDA_CHECK(cudaMemcpyToSymbol(imp::cuda::g_qsa_phase, stamps, sizeof(stamps)));  // zeros
  const float ms = graph.replay_ms(1)[0];
  std::printf("context %d (%d blocks, top %d): %d launches, %.2f us per score + select, %d tokens selected\n",
              context, blocks, budget / ratio, layers, ms * 1000.0f / layers, d_count.download()[0]);
  IMP_CUDA_CHECK(cudaMemcpyFromSymbol(stamps, imp::cuda::g_qsa_phase, sizeof(stamps)));
  unsigned long long score_end = 0;
  for (int blk = 0; blk < 128; ++blk) score_end = std::max(score_end, stamps[8 + blk][0]);
  for (int i = 0; i < 8; ++i) {
    std::vector<double> us;
    for (int blk = 0; blk < 8; ++blk) {  // signed: the selection's blocks start before the scores end
      const auto ns = static_cast<long long>(stamps[blk][i] - score_end);
      if (stamps[blk][i] != 0) us.push_back(static_cast<double>(ns) / 1000.0);
    }
    if (us.empty()) continue;
    std::sort(us.begin(), us.end());
    std::printf("select step %d: min %7.2f  median %7.2f  max %7.2f us after the scores' end\n", i, us.front(),
                us[us.size() / 2], us.back());
  }
  return 0;
}
