// A/B of decode GEMV load schemes on the H200 (the source of bench/results/2026-11-29_gemv_load_schemes_ab.txt),
// each timed as 20 back-to-back launches in a graph. Standalone: nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a
#include <cstdio>
#include <cstdint>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>
__device__ __forceinline__ float bf(uint32_t b) { return __uint_as_float(b << 16); }
__device__ __forceinline__ float wsum(float v) { for (int o = 16; o; o /= 2) v += __shfl_xor_sync(~0u, v, o); return v; }
template <int Mode, int Batch>
__global__ void gemv(const uint16_t* W, const float* x, int n, int k, float* y) {
  const int lane = threadIdx.x % 32, row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  if (row >= n) return;
  const uint4* w = reinterpret_cast<const uint4*>(W + (size_t)row * k);
  const int chunks = k / 8;
  float acc = 0.f;
  if (Mode == 0) {
    for (int c = lane; c < chunks; c += 32) {
      uint4 p = w[c];
      const float4 a = *reinterpret_cast<const float4*>(x + 8 * c), b = *reinterpret_cast<const float4*>(x + 8 * c + 4);
      acc += bf(p.x & 0xffff) * a.x + bf(p.x >> 16) * a.y + bf(p.y & 0xffff) * a.z + bf(p.y >> 16) * a.w +
             bf(p.z & 0xffff) * b.x + bf(p.z >> 16) * b.y + bf(p.w & 0xffff) * b.z + bf(p.w >> 16) * b.w;
    }
  } else {
    for (int c0 = lane; c0 < chunks; c0 += 32 * Batch) {
      uint4 p[Batch];
#pragma unroll
      for (int i = 0; i < Batch; ++i) if (c0 + 32 * i < chunks) p[i] = Mode == 1 ? __ldcs(w + c0 + 32 * i) : (Mode == 2 ? __ldg(w + c0 + 32 * i) : __ldlu(w + c0 + 32 * i));
#pragma unroll
      for (int i = 0; i < Batch; ++i) {
        const int c = c0 + 32 * i;
        if (c >= chunks) break;
        const float4 a = *reinterpret_cast<const float4*>(x + 8 * c), b = *reinterpret_cast<const float4*>(x + 8 * c + 4);
        acc += bf(p[i].x & 0xffff) * a.x + bf(p[i].x >> 16) * a.y + bf(p[i].y & 0xffff) * a.z + bf(p[i].y >> 16) * a.w +
               bf(p[i].z & 0xffff) * b.x + bf(p[i].z >> 16) * b.y + bf(p[i].w & 0xffff) * b.z + bf(p[i].w >> 16) * b.w;
      }
    }
  }
  acc = wsum(acc);
  if (lane == 0) y[row] = acc;
}
template <int Mode, int Batch, int Threads>
double time_graph(const uint16_t* W, const float* x, int n, int k, float* y) {
  cudaStream_t s; cudaStreamCreate(&s);
  cudaGraph_t g; cudaGraphExec_t ge;
  cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
  for (int i = 0; i < 20; ++i) gemv<Mode, Batch><<<(n + Threads / 32 - 1) / (Threads / 32), Threads, 0, s>>>(W, x, n, k, y);
  cudaStreamEndCapture(s, &g);
  cudaGraphInstantiate(&ge, g, 0);
  cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
  std::vector<float> t;
  for (int r = 0; r < 7; ++r) {
    cudaEventRecord(a, s); cudaGraphLaunch(ge, s); cudaEventRecord(b, s); cudaEventSynchronize(b);
    float ms; cudaEventElapsedTime(&ms, a, b); if (r) t.push_back(ms / 20);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2] * 1000.0;
}
int main() {
  const int shapes[][2] = {{16480, 2560}, {2560, 6144}, {1793, 2560}, {248320, 2560}, {10240, 320}, {324, 10240}};
  for (auto& sh : shapes) {
    const int n = sh[0], k = sh[1];
    uint16_t* W; float *x, *y;
    cudaMalloc(&W, (size_t)n * k * 2); cudaMalloc(&x, k * 4); cudaMalloc(&y, n * 4);
    cudaMemset(W, 0x3c, (size_t)n * k * 2); cudaMemset(x, 0, k * 4);
    const double mb = (double)n * k * 2 / 1e6;
    double r[8] = {time_graph<0, 1, 256>(W, x, n, k, y), time_graph<1, 8, 256>(W, x, n, k, y), time_graph<2, 8, 256>(W, x, n, k, y),
                   time_graph<2, 4, 256>(W, x, n, k, y), time_graph<3, 8, 256>(W, x, n, k, y), time_graph<0, 1, 128>(W, x, n, k, y),
                   time_graph<2, 4, 128>(W, x, n, k, y), time_graph<2, 8, 512>(W, x, n, k, y)};
    const char* names[8] = {"plain", "cs8", "ldg8", "ldg4", "lu8", "plain128", "ldg4_128", "ldg8_512"};
    printf("%6dx%-6d %8.1f MB:", n, k, mb);
    for (int i = 0; i < 8; ++i) printf(" %s %.1fus(%.2fTB/s)", names[i], r[i], mb / r[i]);
    printf("\n");
    cudaFree(W); cudaFree(x); cudaFree(y);
  }
}
