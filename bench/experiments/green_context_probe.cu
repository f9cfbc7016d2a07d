// Can the decode graph give its latency-bound chains SMs of their own (docs/cuda_engine.md, Next steps 1 (a))?
// Session 37 measured the QSA chain's steps running ~1.6-2x slower beside the attention in-projection GEMVs than
// alone, and a selection on whole SMs gaining 0.35% at 32K. This probe asks the three questions a green-context
// design needs answered on the H200 (CUDA 13 driver API: cuDevSmResourceSplitByCount, cuGreenCtxCreate,
// cuGreenCtxStreamCreate):
//   1. placement: blocks launched on a green context's stream, directly and in a captured graph that forks from one
//      context's stream to the other's and joins back, run only on that context's SMs (%smid of every block);
//   2. bandwidth: a streaming read of 2 GiB (the GEMVs' pattern: 16-byte loads, all in flight) on the large
//      partition against the whole GPU;
//   3. contention: a chain of 24 short dependent launches (8 blocks each, ~1-2 us of shuffles and shared-memory
//      atomics, like the radix passes) beside that stream: on the whole GPU at the highest priority, against the
//      chain on the small partition and the stream on the large one.
// Build: nvcc -O3 -std=c++20 -gencode=arch=compute_90a,code=sm_90a bench/experiments/green_context_probe.cu -lcuda \
//          -o build/exp/green_context_probe
// Run: build/exp/green_context_probe [small partition SMs, default 16]
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <set>
#include <vector>

namespace {

bool ok(CUresult r, const char* what) {
  if (r == CUDA_SUCCESS) return true;
  const char* name = nullptr;
  cuGetErrorName(r, &name);
  std::printf("  %s: %s\n", what, name ? name : "?");
  return false;
}
bool ok(cudaError_t r, const char* what) {
  if (r == cudaSuccess) return true;
  std::printf("  %s: %s\n", what, cudaGetErrorString(r));
  return false;
}

__device__ unsigned smid() {
  unsigned id;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
  return id;
}

// Every block records its SM, then stays ~5 us so that the grid spreads over every SM it may use.
__global__ void where_kernel(int* sm) {
  if (threadIdx.x == 0) sm[blockIdx.x] = static_cast<int>(smid());
  const long long start = clock64();
  while (clock64() - start < 10000) {
  }
}

// 16-byte loads over `n4` float4s, grid-stride, every load of a thread's stride in flight; one sum per block.
__global__ void stream_kernel(const float4* in, size_t n4, float* out) {
  float s = 0.0f;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n4;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const float4 v = __ldg(in + i);
    s += v.x + v.y + v.z + v.w;
  }
  if (s == 12345.0f) out[blockIdx.x] = s;  // never true for the zero input: keeps the loads
}

// One link of a latency-bound chain: shared-memory atomics into a histogram, a barrier, a warp scan, as a radix pass.
__global__ void chain_kernel(const unsigned* keys, int n, unsigned* out) {
  __shared__ unsigned hist[256];
  hist[threadIdx.x] = 0;
  __syncthreads();
  for (int i = threadIdx.x; i < n; i += blockDim.x) atomicAdd(&hist[(keys[blockIdx.x * n + i] >> 8) & 255u], 1u);
  __syncthreads();
  unsigned v = hist[threadIdx.x];
  for (int o = 1; o < 32; o *= 2) {
    const unsigned t = __shfl_up_sync(0xffffffffu, v, o);
    if ((threadIdx.x & 31) >= o) v += t;
  }
  if (threadIdx.x == 255) out[blockIdx.x] = v;
}

struct Partition {
  CUgreenCtx green = nullptr;
  CUcontext ctx = nullptr;
  CUstream stream = nullptr;
  unsigned sms = 0;
};

bool make_partition(CUdevResource resource, CUdevice dev, int priority, Partition& p) {
  CUdevResourceDesc desc;
  if (!ok(cuDevResourceGenerateDesc(&desc, &resource, 1), "cuDevResourceGenerateDesc")) return false;
  if (!ok(cuGreenCtxCreate(&p.green, desc, dev, CU_GREEN_CTX_DEFAULT_STREAM), "cuGreenCtxCreate")) return false;
  if (!ok(cuCtxFromGreenCtx(&p.ctx, p.green), "cuCtxFromGreenCtx")) return false;
  if (!ok(cuGreenCtxStreamCreate(&p.stream, p.green, CU_STREAM_NON_BLOCKING, priority), "cuGreenCtxStreamCreate")) {
    return false;
  }
  p.sms = resource.sm.smCount;
  return true;
}

std::set<int> sms_of(const std::vector<int>& ids) { return std::set<int>(ids.begin(), ids.end()); }

// Launches where_kernel on `stream` with `ctx` current and returns the distinct SMs its blocks ran on.
std::set<int> placement(CUcontext ctx, cudaStream_t stream, int* d_sm, int blocks) {
  cuCtxSetCurrent(ctx);
  where_kernel<<<blocks, 32, 0, stream>>>(d_sm);
  if (!ok(cudaStreamSynchronize(stream), "placement launch")) return {};
  std::vector<int> ids(static_cast<size_t>(blocks));
  cudaMemcpy(ids.data(), d_sm, ids.size() * sizeof(int), cudaMemcpyDeviceToHost);
  return sms_of(ids);
}

float stream_ms(CUcontext ctx, cudaStream_t stream, const float4* in, size_t n4, float* out, int blocks) {
  cuCtxSetCurrent(ctx);
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  stream_kernel<<<blocks, 512, 0, stream>>>(in, n4, out);  // warm-up
  cudaEventRecord(a, stream);
  for (int r = 0; r < 5; ++r) stream_kernel<<<blocks, 512, 0, stream>>>(in, n4, out);
  cudaEventRecord(b, stream);
  float ms = 0.0f;
  if (!ok(cudaEventSynchronize(b), "stream timing")) return -1.0f;
  cudaEventElapsedTime(&ms, a, b);
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return ms / 5.0f;
}

// The chain of `links` launches on chain_stream, timed there, while stream_stream runs stream_kernel throughout.
float chain_beside_stream_ms(CUcontext chain_ctx, cudaStream_t chain_stream, CUcontext stream_ctx,
                             cudaStream_t stream_stream, const float4* in, size_t n4, float* out, int stream_blocks,
                             const unsigned* keys, unsigned* chain_out, int links, bool with_stream) {
  if (with_stream) {
    cuCtxSetCurrent(stream_ctx);
    for (int r = 0; r < 3; ++r) stream_kernel<<<stream_blocks, 512, 0, stream_stream>>>(in, n4, out);
  }
  cuCtxSetCurrent(chain_ctx);
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  cudaEventRecord(a, chain_stream);
  for (int i = 0; i < links; ++i) chain_kernel<<<8, 256, 0, chain_stream>>>(keys, 4096, chain_out);
  cudaEventRecord(b, chain_stream);
  float ms = 0.0f;
  if (!ok(cudaEventSynchronize(b), "chain timing")) return -1.0f;
  cudaEventElapsedTime(&ms, a, b);
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  cudaDeviceSynchronize();
  return ms;
}

}  // namespace

int main(int argc, char** argv) {
  const unsigned want_small = argc > 1 ? static_cast<unsigned>(std::atoi(argv[1])) : 16;
  cudaFree(nullptr);  // the primary context, current
  CUcontext primary = nullptr;
  cuCtxGetCurrent(&primary);
  CUdevice dev = 0;
  cuCtxGetDevice(&dev);
  CUdevResource all;
  if (!ok(cuDeviceGetDevResource(dev, &all, CU_DEV_RESOURCE_TYPE_SM), "cuDeviceGetDevResource")) return 1;
  std::printf("device SMs %u, min partition %u, co-scheduled alignment %u\n", all.sm.smCount, all.sm.minSmPartitionSize,
              all.sm.smCoscheduledAlignment);
  CUdevResource small, rest;
  unsigned groups = 1;
  if (!ok(cuDevSmResourceSplitByCount(&small, &groups, &all, &rest, 0, want_small), "split")) return 1;
  std::printf("split: %u group(s) of %u SMs, remainder %u SMs\n", groups, small.sm.smCount, rest.sm.smCount);
  int least = 0, greatest = 0;
  cudaDeviceGetStreamPriorityRange(&least, &greatest);
  Partition p_small, p_rest;
  if (!make_partition(small, dev, greatest, p_small) || !make_partition(rest, dev, least, p_rest)) return 1;

  cuCtxSetCurrent(primary);
  const int where_blocks = 4 * static_cast<int>(all.sm.smCount);
  int* d_sm = nullptr;
  cudaMalloc(&d_sm, sizeof(int) * static_cast<size_t>(where_blocks));
  const size_t bytes = size_t{2} << 30, n4 = bytes / sizeof(float4);
  float4* d_in = nullptr;
  float* d_out = nullptr;
  if (!ok(cudaMalloc(&d_in, bytes), "cudaMalloc input")) return 1;
  cudaMemset(d_in, 0, bytes);
  cudaMalloc(&d_out, sizeof(float) * 4096);
  unsigned *d_keys = nullptr, *d_chain = nullptr;
  cudaMalloc(&d_keys, sizeof(unsigned) * 8 * 4096);
  cudaMemset(d_keys, 0x5a, sizeof(unsigned) * 8 * 4096);
  cudaMalloc(&d_chain, sizeof(unsigned) * 8);
  cudaStream_t primary_high = nullptr, primary_low = nullptr;
  cudaStreamCreateWithPriority(&primary_high, cudaStreamNonBlocking, greatest);
  cudaStreamCreateWithPriority(&primary_low, cudaStreamNonBlocking, least);
  cudaDeviceSynchronize();

  std::printf("1. placement (distinct SMs used by %d blocks):\n", where_blocks);
  const std::set<int> on_all = placement(primary, primary_low, d_sm, where_blocks);
  const std::set<int> on_small = placement(p_small.ctx, p_small.stream, d_sm, where_blocks);
  const std::set<int> on_rest = placement(p_rest.ctx, p_rest.stream, d_sm, where_blocks);
  std::vector<int> overlap;
  std::set_intersection(on_small.begin(), on_small.end(), on_rest.begin(), on_rest.end(), std::back_inserter(overlap));
  std::printf("  primary %zu, small partition %zu (of %u), rest %zu (of %u), small and rest overlapping on %zu\n",
              on_all.size(), on_small.size(), p_small.sms, on_rest.size(), p_rest.sms, overlap.size());

  // The same through a captured graph: where_kernel on the rest, a fork to the small partition's stream, a join.
  {
    cuCtxSetCurrent(p_rest.ctx);
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    cudaEvent_t fork, join;
    cudaEventCreateWithFlags(&fork, cudaEventDisableTiming);
    cudaEventCreateWithFlags(&join, cudaEventDisableTiming);
    int* d_sm2 = nullptr;
    cuCtxSetCurrent(primary);
    cudaMalloc(&d_sm2, sizeof(int) * static_cast<size_t>(where_blocks));
    bool captured = ok(cudaStreamBeginCapture(p_rest.stream, cudaStreamCaptureModeThreadLocal), "begin capture");
    if (captured) {
      cuCtxSetCurrent(p_rest.ctx);
      where_kernel<<<where_blocks, 32, 0, p_rest.stream>>>(d_sm);
      ok(cudaEventRecord(fork, p_rest.stream), "record fork");
      ok(cudaStreamWaitEvent(p_small.stream, fork, 0), "wait fork (cross-context)");
      cuCtxSetCurrent(p_small.ctx);
      where_kernel<<<where_blocks, 32, 0, p_small.stream>>>(d_sm2);
      ok(cudaGetLastError(), "launch in capture on the small partition");
      ok(cudaEventRecord(join, p_small.stream), "record join");
      cuCtxSetCurrent(p_rest.ctx);
      ok(cudaStreamWaitEvent(p_rest.stream, join, 0), "wait join");
      captured = ok(cudaStreamEndCapture(p_rest.stream, &graph), "end capture");
    }
    if (captured && ok(cudaGraphInstantiate(&exec, graph, 0), "instantiate") &&
        ok(cudaGraphLaunch(exec, p_rest.stream), "graph launch") && ok(cudaStreamSynchronize(p_rest.stream), "graph run")) {
      std::vector<int> a(static_cast<size_t>(where_blocks)), b(a.size());
      cudaMemcpy(a.data(), d_sm, a.size() * sizeof(int), cudaMemcpyDeviceToHost);
      cudaMemcpy(b.data(), d_sm2, b.size() * sizeof(int), cudaMemcpyDeviceToHost);
      const std::set<int> ga = sms_of(a), gb = sms_of(b);
      std::vector<int> outside_rest, outside_small;
      std::set_difference(ga.begin(), ga.end(), on_rest.begin(), on_rest.end(), std::back_inserter(outside_rest));
      std::set_difference(gb.begin(), gb.end(), on_small.begin(), on_small.end(), std::back_inserter(outside_small));
      std::printf("  graph: rest-stream node on %zu SMs (%zu outside the rest), small-stream node on %zu SMs (%zu "
                  "outside the small partition)\n",
                  ga.size(), outside_rest.size(), gb.size(), outside_small.size());
    }
  }

  std::printf("2. streaming read of 2 GiB (ms, GB/s):\n");
  for (int per_sm : {2, 4}) {
    const float all_ms = stream_ms(primary, primary_low, d_in, n4, d_out, per_sm * static_cast<int>(all.sm.smCount));
    const float rest_ms = stream_ms(p_rest.ctx, p_rest.stream, d_in, n4, d_out, per_sm * static_cast<int>(p_rest.sms));
    std::printf("  %d blocks of 512 per SM: whole GPU %.3f ms (%.0f GB/s), rest (%u SMs) %.3f ms (%.0f GB/s)\n", per_sm,
                all_ms, bytes / all_ms / 1e6, p_rest.sms, rest_ms, bytes / rest_ms / 1e6);
  }

  std::printf("3. a chain of 24 dependent launches (8 blocks) alone and beside the stream (ms):\n");
  const int links = 24, stream_blocks = 4 * static_cast<int>(all.sm.smCount);
  const int rest_blocks = 4 * static_cast<int>(p_rest.sms);
  const float alone = chain_beside_stream_ms(primary, primary_high, primary, primary_low, d_in, n4, d_out, stream_blocks,
                                             d_keys, d_chain, links, false);
  const float shared = chain_beside_stream_ms(primary, primary_high, primary, primary_low, d_in, n4, d_out, stream_blocks,
                                              d_keys, d_chain, links, true);
  const float small_alone = chain_beside_stream_ms(p_small.ctx, p_small.stream, p_rest.ctx, p_rest.stream, d_in, n4,
                                                   d_out, rest_blocks, d_keys, d_chain, links, false);
  const float split = chain_beside_stream_ms(p_small.ctx, p_small.stream, p_rest.ctx, p_rest.stream, d_in, n4, d_out,
                                             rest_blocks, d_keys, d_chain, links, true);
  std::printf("  whole GPU: alone %.3f, beside the stream (high priority) %.3f; small partition: alone %.3f, beside the "
              "stream on the rest %.3f\n",
              alone, shared, small_alone, split);
  return 0;
}
