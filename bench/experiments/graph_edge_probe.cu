// Which captured graph edges are programmatic (PDL) when a PDL launch follows a cross-stream join (session 36)?
// The decode timelines show the attention layers' output projection starting only after the combine kernel ends,
// with the gate branch joined just before it. This captures the same shape with spinning kernels:
//   main: A; fork -> side: G; main: B; main waits on G's join; main: C   (every launch with PDL)
// and prints C's incoming edges (port, type) and whether C started before B ended, first as captured, then with
// the joined stream's dependencies rewritten to programmatic edges (cudaStreamUpdateCaptureDependencies).
// Build: nvcc -std=c++20 -gencode=arch=compute_90a,code=sm_90a -o build/exp/graph_edge_probe bench/experiments/graph_edge_probe.cu
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK(x)                                                                        \
  do {                                                                                  \
    cudaError_t e = (x);                                                                \
    if (e != cudaSuccess) {                                                             \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e)); \
      std::exit(1);                                                                     \
    }                                                                                   \
  } while (0)

__device__ unsigned long long now_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t));
  return t;
}

// times[2 id] = start, times[2 id + 1] = end (block 0, thread 0).
__global__ void spin_kernel(int id, unsigned long long spin_ns, unsigned long long* times) {
  const unsigned long long start = now_ns();
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  asm volatile("griddepcontrol.wait;" ::: "memory");
  const unsigned long long begin = now_ns();
  while (now_ns() - begin < spin_ns) {
  }
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    times[2 * id] = start;
    times[2 * id + 1] = now_ns();
  }
}

void launch(cudaStream_t s, int id, unsigned long long ns, unsigned long long* times, int priority = 0) {
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(8);
  config.blockDim = dim3(64);
  config.stream = s;
  cudaLaunchAttribute attr[2]{};
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  attr[1].id = cudaLaunchAttributePriority;
  attr[1].val.priority = priority;
  config.attrs = attr;
  config.numAttrs = priority != 0 ? 2 : 1;
  CHECK(cudaLaunchKernelEx(&config, spin_kernel, id, ns, times));
}

cudaGraphNode_t last_node(cudaStream_t s) {
  cudaStreamCaptureStatus status;
  const cudaGraphNode_t* deps = nullptr;
  size_t n = 0;
  CHECK(cudaStreamGetCaptureInfo(s, &status, nullptr, nullptr, &deps, nullptr, &n));
  return n == 1 ? deps[0] : nullptr;
}

// Every current dependency of the capturing stream becomes a programmatic edge (kernel nodes only).
void programmatic_dependencies(cudaStream_t s) {
  cudaStreamCaptureStatus status;
  const cudaGraphNode_t* deps = nullptr;
  const cudaGraphEdgeData* data = nullptr;
  size_t n = 0;
  CHECK(cudaStreamGetCaptureInfo(s, &status, nullptr, nullptr, &deps, &data, &n));
  std::vector<cudaGraphNode_t> nodes(deps, deps + n);
  std::vector<cudaGraphEdgeData> edges(n);
  for (size_t i = 0; i < n; ++i) {
    edges[i] = cudaGraphEdgeData{};
    edges[i].from_port = cudaGraphKernelNodePortProgrammatic;
    edges[i].type = cudaGraphDependencyTypeProgrammatic;
  }
  CHECK(cudaStreamUpdateCaptureDependencies(s, nodes.data(), edges.data(), n, cudaStreamSetCaptureDependencies));
}

// priorities: the side branch at the device's lowest priority, the main chain at one above it (as the decode
// step's gate branch), instantiated with cudaGraphInstantiateFlagUseNodePriority.
void run(bool rewrite, bool join_before_b, bool priorities = false) {
  int low = 0, high = 0;
  CHECK(cudaDeviceGetStreamPriorityRange(&low, &high));
  const int side_priority = priorities ? low : 0, main_priority = priorities ? low - 1 : 0;
  cudaStream_t main_s, side_s;
  CHECK(cudaStreamCreateWithFlags(&main_s, cudaStreamNonBlocking));
  CHECK(cudaStreamCreateWithFlags(&side_s, cudaStreamNonBlocking));
  cudaEvent_t fork, join;
  CHECK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
  CHECK(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));
  unsigned long long* times;
  CHECK(cudaMalloc(&times, 8 * sizeof(unsigned long long)));
  cudaGraph_t graph;
  CHECK(cudaStreamBeginCapture(main_s, cudaStreamCaptureModeThreadLocal));
  launch(main_s, 0, 20000, times, main_priority);  // A
  CHECK(cudaEventRecord(fork, main_s));
  CHECK(cudaStreamWaitEvent(side_s, fork, 0));
  launch(side_s, 1, 5000, times, side_priority);  // G: ends long before B
  CHECK(cudaEventRecord(join, side_s));
  if (join_before_b) CHECK(cudaStreamWaitEvent(main_s, join, 0));
  launch(main_s, 2, 30000, times, main_priority);  // B
  if (!join_before_b) CHECK(cudaStreamWaitEvent(main_s, join, 0));
  if (rewrite) programmatic_dependencies(main_s);
  launch(main_s, 3, 1000, times, main_priority);  // C
  const cudaGraphNode_t c = last_node(main_s);
  CHECK(cudaStreamEndCapture(main_s, &graph));
  size_t n = 0;
  CHECK(cudaGraphNodeGetDependencies(c, nullptr, nullptr, &n));
  std::vector<cudaGraphNode_t> deps(n);
  std::vector<cudaGraphEdgeData> data(n);
  CHECK(cudaGraphNodeGetDependencies(c, deps.data(), data.data(), &n));
  std::printf("%s%s, join %s B: C has %zu incoming edges:", rewrite ? "rewritten" : "as captured",
              priorities ? " with priorities" : "", join_before_b ? "before" : "after", n);
  for (size_t i = 0; i < n; ++i) std::printf(" (port %d type %d)", data[i].from_port, data[i].type);
  cudaGraphExec_t exec;
  CHECK(cudaGraphInstantiate(&exec, graph, priorities ? cudaGraphInstantiateFlagUseNodePriority : 0));
  unsigned long long h[8];
  double lead = 0;
  for (int r = 0; r < 5; ++r) {
    CHECK(cudaGraphLaunch(exec, main_s));
    CHECK(cudaStreamSynchronize(main_s));
    CHECK(cudaMemcpy(h, times, sizeof(h), cudaMemcpyDeviceToHost));
    lead = (static_cast<double>(h[5]) - static_cast<double>(h[6])) / 1000.0;  // B's end - C's start
  }
  std::printf("; C started %.2f us before B ended (negative: after)\n", lead);
  CHECK(cudaGraphExecDestroy(exec));
  CHECK(cudaGraphDestroy(graph));
  CHECK(cudaFree(times));
}

int main() {
  run(false, false);
  run(true, false);
  run(false, true);
  run(false, false, true);
  run(true, false, true);
  return 0;
}
