// Kernel launches for the decode graph with programmatic dependent launch (PDL): a kernel launched this
// way may start while the previous kernel in the stream finishes, so its launch latency and block scheduling
// overlap that kernel's tail. Decode is ~700 short kernels per token, where these gaps add up.
//
// Contract: a kernel launched through launch_kernel calls pdl_begin() (device_math.cuh) as its first
// statement: griddepcontrol.wait blocks until the previous grid has completed and its memory is visible (so
// dependencies hold transitively along the stream), then launch_dependents lets the next grid start launching.
// Outside a PdlScope (prefill, tests) launch_kernel is an ordinary launch and pdl_begin() is a no-op.
#pragma once

#include <cuda_runtime.h>

#include <optional>
#include <utility>

#include "cuda/check.h"

namespace imp::cuda {

// PDL on for launch_kernel calls of this thread while alive (the decode step's capture).
class PdlScope {
 public:
  PdlScope();
  ~PdlScope();
  PdlScope(const PdlScope&) = delete;
  PdlScope& operator=(const PdlScope&) = delete;

 private:
  bool previous_;
};

bool pdl_enabled();

// launch_kernel calls of this thread while alive carry this scheduling priority (a stream priority: lower runs
// first; the decode graph is instantiated with cudaGraphInstantiateFlagUseNodePriority so that it holds there).
class LaunchPriority {
 public:
  explicit LaunchPriority(int priority);
  ~LaunchPriority();
  LaunchPriority(const LaunchPriority&) = delete;
  LaunchPriority& operator=(const LaunchPriority&) = delete;

 private:
  std::optional<int> previous_;
};

// The priority of the innermost LaunchPriority alive, if any.
std::optional<int> launch_priority();

// kernel<<<grid, block, shared, stream>>>(args...), with PDL inside a PdlScope and the LaunchPriority's priority;
// optionally a cluster shape.
template <class... Params, class... Args>
void launch_kernel(void (*kernel)(Params...), dim3 grid, dim3 block, size_t shared, cudaStream_t stream,
                   unsigned cluster_x, Args&&... args) {
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = shared;
  config.stream = stream;
  cudaLaunchAttribute attrs[3]{};
  unsigned count = 0;
  if (pdl_enabled()) {
    attrs[count].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attrs[count++].val.programmaticStreamSerializationAllowed = 1;
  }
  if (cluster_x > 1) {
    attrs[count].id = cudaLaunchAttributeClusterDimension;
    attrs[count++].val.clusterDim = {cluster_x, 1, 1};
  }
  if (const std::optional<int> priority = launch_priority()) {
    attrs[count].id = cudaLaunchAttributePriority;
    attrs[count++].val.priority = *priority;
  }
  config.attrs = attrs;
  config.numAttrs = count;
  IMP_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...));
}

// A kernel's dynamic shared-memory limit raised to `bytes` when above the default 48 KB (nothing below it). The
// first decode step may be being captured into a graph, where attribute calls are not allowed: the call runs in
// relaxed capture mode for this thread. Callers with a fixed size do it once (std::call_once).
void raise_shared_limit_outside_capture(const void* kernel, size_t bytes);
template <class... Params>
void raise_shared_limit_outside_capture(void (*kernel)(Params...), size_t bytes) {
  raise_shared_limit_outside_capture(reinterpret_cast<const void*>(kernel), bytes);
}

// The SMs of the process's device (read once): the grid of kernels that size it to fill the GPU.
int sm_count();

}  // namespace imp::cuda
