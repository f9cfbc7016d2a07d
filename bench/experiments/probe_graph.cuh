// Host helpers shared by the decode probes (gemv_streamed_probe.cu, pdl_overlap_probe.cu, l2_prefetch_probe.cu):
// a checked CUDA call, a launch with programmatic dependent launch as in the engine's decode graph, and launches
// captured once into a graph and replayed, timed with events.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK(call)                                                                  \
  do {                                                                               \
    const cudaError_t e = (call);                                                    \
    if (e != cudaSuccess) {                                                          \
      std::fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); \
      std::exit(1);                                                                  \
    }                                                                                \
  } while (0)

template <class... Params, class... Args>
void launch_pdl(void (*kernel)(Params...), unsigned grid, unsigned block, size_t smem, cudaStream_t s, Args... args) {
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = s;
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  config.attrs = &attr;
  config.numAttrs = 1;
  CHECK(cudaLaunchKernelEx(&config, kernel, args...));
}

// launch(stream, i) for i < launches, captured into one graph on a new stream.
struct CapturedGraph {
  cudaStream_t stream = nullptr;
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  template <class Launch>
  CapturedGraph(Launch launch, int launches) {
    CHECK(cudaStreamCreate(&stream));
    CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < launches; ++i) launch(stream, i);
    CHECK(cudaStreamEndCapture(stream, &graph));
    CHECK(cudaGraphInstantiate(&exec, graph, 0));
  }
  ~CapturedGraph() {
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    cudaStreamDestroy(stream);
  }
  CapturedGraph(const CapturedGraph&) = delete;
  CapturedGraph& operator=(const CapturedGraph&) = delete;
  // Milliseconds of each of `replays` replays.
  std::vector<float> replay_ms(int replays) const {
    cudaEvent_t a, b;
    CHECK(cudaEventCreate(&a));
    CHECK(cudaEventCreate(&b));
    std::vector<float> t;
    for (int r = 0; r < replays; ++r) {
      CHECK(cudaEventRecord(a, stream));
      CHECK(cudaGraphLaunch(exec, stream));
      CHECK(cudaEventRecord(b, stream));
      CHECK(cudaEventSynchronize(b));
      float ms = 0.0f;
      CHECK(cudaEventElapsedTime(&ms, a, b));
      t.push_back(ms);
    }
    CHECK(cudaEventDestroy(a));
    CHECK(cudaEventDestroy(b));
    return t;
  }
};

// Microseconds per launch: the median of `replays` replays after a first (warm-up) one.
template <class Launch>
double time_graph(Launch launch, int launches, int replays) {
  const CapturedGraph g(launch, launches);
  std::vector<float> t = g.replay_ms(replays + 1);
  t.erase(t.begin());
  std::sort(t.begin(), t.end());
  return t[t.size() / 2] * 1000.0 / launches;
}

// The q-quantile (0..1) of v, nearest rank below.
inline double percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(q * static_cast<double>(v.size() - 1))];
}
