// A/B of decode GEMV work splits on the H200, with cold weights: each shape is timed as a graph of 20 launches
// over 20 different weight matrices (no launch finds its weights in L2, as in a decode step). The library's
// scheme (one warp per row, 4 loads of 16 bytes per lane in flight, 128-thread blocks) against K split over 2
// or 4 warps of a block (partials added in order in shared memory) and against double-buffered batches (the
// next batch's loads issued before the current one is used). Standalone:
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a bench/experiments/gemv_split_k.cu -o gemv_split_k
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

__device__ __forceinline__ float bf(uint32_t b) { return __uint_as_float(b << 16); }
__device__ __forceinline__ float wsum(float v) {
  for (int o = 16; o; o /= 2) v += __shfl_xor_sync(~0u, v, o);
  return v;
}
__device__ __forceinline__ float dot8(const uint4& p, const float* x) {
  const float4 a = *reinterpret_cast<const float4*>(x), b = *reinterpret_cast<const float4*>(x + 4);
  return bf(p.x & 0xffff) * a.x + bf(p.x >> 16) * a.y + bf(p.y & 0xffff) * a.z + bf(p.y >> 16) * a.w +
         bf(p.z & 0xffff) * b.x + bf(p.z >> 16) * b.y + bf(p.w & 0xffff) * b.z + bf(p.w >> 16) * b.w;
}

constexpr int kBatch = 4, kThreads = 128, kWarps = kThreads / 32;

// Split warps per row (4 / Split rows per block); Double: two batches in flight.
template <int Split, bool Double>
__global__ void gemv(const uint16_t* W, const float* x, int n, int k, float* y) {
  __shared__ float part[kWarps];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int row = blockIdx.x * (kWarps / Split) + warp / Split, p = warp % Split;
  const int chunks = k / 8, per = (chunks + Split - 1) / Split;
  const int begin = p * per, end = min(chunks, begin + per);
  float acc = 0.f;
  if (row < n) {
    const uint4* w = reinterpret_cast<const uint4*>(W + (size_t)row * k);
    uint4 cur[kBatch], next[kBatch];
    auto load = [&](uint4 (&b)[kBatch], int c0) {
#pragma unroll
      for (int i = 0; i < kBatch; ++i) if (c0 + 32 * i < end) b[i] = __ldg(w + c0 + 32 * i);
    };
    auto use = [&](const uint4 (&b)[kBatch], int c0) {
#pragma unroll
      for (int i = 0; i < kBatch; ++i) {
        const int c = c0 + 32 * i;
        if (c >= end) break;
        acc += dot8(b[i], x + 8 * c);
      }
    };
    load(cur, begin + lane);
    for (int c0 = begin + lane; c0 < end; c0 += 32 * kBatch) {
      if (Double) {
        if (c0 + 32 * kBatch < end) load(next, c0 + 32 * kBatch);
        use(cur, c0);
#pragma unroll
        for (int i = 0; i < kBatch; ++i) cur[i] = next[i];
      } else {
        if (c0 != begin + lane) load(cur, c0);
        use(cur, c0);
      }
    }
  }
  acc = wsum(acc);
  if (Split == 1) {
    if (lane == 0 && row < n) y[row] = acc;
    return;
  }
  if (lane == 0) part[warp] = acc;
  __syncthreads();
  const int r = threadIdx.x, out = blockIdx.x * (kWarps / Split) + r;
  if (r < kWarps / Split && out < n) {
    float sum = 0.f;
    for (int q = 0; q < Split; ++q) sum += part[r * Split + q];
    y[out] = sum;
  }
}

template <int Split, bool Double>
double time_cold(const std::vector<uint16_t*>& ws, const float* x, int n, int k, float* y) {
  cudaStream_t s;
  cudaStreamCreate(&s);
  cudaGraph_t g;
  cudaGraphExec_t ge;
  const int rows_per_block = kWarps / Split;
  cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
  for (uint16_t* W : ws) gemv<Split, Double><<<(n + rows_per_block - 1) / rows_per_block, kThreads, 0, s>>>(W, x, n, k, y);
  cudaStreamEndCapture(s, &g);
  cudaGraphInstantiate(&ge, g, 0);
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  std::vector<float> t;
  for (int r = 0; r < 8; ++r) {
    cudaEventRecord(a, s);
    cudaGraphLaunch(ge, s);
    cudaEventRecord(b, s);
    cudaEventSynchronize(b);
    float ms;
    cudaEventElapsedTime(&ms, a, b);
    if (r) t.push_back(ms / static_cast<float>(ws.size()));
  }
  std::sort(t.begin(), t.end());
  cudaGraphExecDestroy(ge);
  cudaGraphDestroy(g);
  cudaStreamDestroy(s);
  return t[t.size() / 2] * 1000.0;
}

int main() {
  // GDN out_proj / attention o_proj, MoE input, GDN in_proj, attention in_proj, shared-expert down.
  const int shapes[][2] = {{2560, 6144}, {1793, 2560}, {16480, 2560}, {13952, 2560}, {2560, 640}};
  for (auto& sh : shapes) {
    const int n = sh[0], k = sh[1];
    const size_t bytes = (size_t)n * k * 2;
    std::vector<uint16_t*> ws(20);
    for (auto& W : ws) {
      cudaMalloc(&W, bytes);
      cudaMemset(W, 0x3c, bytes);
    }
    float *x, *y;
    cudaMalloc(&x, k * 4);
    cudaMalloc(&y, n * 4);
    cudaMemset(x, 0, k * 4);
    const double mb = bytes / 1e6;
    const double r[6] = {time_cold<1, false>(ws, x, n, k, y), time_cold<1, true>(ws, x, n, k, y),
                         time_cold<2, false>(ws, x, n, k, y), time_cold<2, true>(ws, x, n, k, y),
                         time_cold<4, false>(ws, x, n, k, y), time_cold<4, true>(ws, x, n, k, y)};
    const char* names[6] = {"row", "row_db", "split2", "split2_db", "split4", "split4_db"};
    printf("%6dx%-6d %7.1f MB:", n, k, mb);
    for (int i = 0; i < 6; ++i) printf(" %s %.1fus(%.2fTB/s)", names[i], r[i], mb / r[i]);
    printf("\n");
    for (auto* W : ws) cudaFree(W);
    cudaFree(x);
    cudaFree(y);
  }
}
