// Does a GEMV's pre-wait weight prefetch overlap a latency-bound predecessor under programmatic dependent launch?
// gemv_streamed_probe.cu timed (predecessor, GEMV) pairs and saw no overlap gain even for a kernel that copies
// 160 KB per SM into shared memory before its wait. This probe stamps %globaltimer per block (start, after its
// wait, end) for the predecessor (320 x 256 threads, 76 registers, 4 us after its wait) and for the GEMV (the
// engine's 128-thread block kernel, or a bulk-copy kernel: one block per SM, 8 warps, stages of 8 rows copied by
// cp.async.bulk before the wait, x in shared memory), 8 pairs per graph, and prints the 5th pair's times relative
// to the predecessor's first start. The 16480 x 2560 GEMV (the GDN in-projection) is 84 MB.
// Build and run on the GPU machine from the repository root:
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -Isrc bench/experiments/pdl_overlap_probe.cu \
//     -o build/exp/pdl_overlap_probe && build/exp/pdl_overlap_probe
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "cuda/kernels/device_math.cuh"
#include "cuda/kernels/gemv_row.cuh"
#include "bulk_copy.cuh"
#include "probe_graph.cuh"

using namespace imp::cuda;

__device__ __forceinline__ long long now() {
  long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
constexpr int kPairs = 8, kShown = 4;  // the 5th pair is printed
constexpr int kPredBlocks = 320;

// stamps[launch][block][3]: start, after the wait, end (thread 0 of each block).
__global__ void __launch_bounds__(256) pred_kernel(const float4* in, float* out, long long spin_ns, long long* stamps) {
  const long long t0 = now();
  pdl_trigger();
  float4 v[16];
#pragma unroll
  for (int i = 0; i < 16; ++i) v[i] = in[(blockIdx.x * 16 + i) * 256 + threadIdx.x];
  pdl_wait();
  const long long t1 = now();
  long long t = t1;
  while (t - t1 < spin_ns) t = now();
  float sum = 0.0f;
#pragma unroll
  for (int i = 0; i < 16; ++i) sum += v[i].x * v[i].y + v[i].z * v[i].w;
  if (sum == 12345.0f) out[threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.x == 0) {
    stamps[blockIdx.x * 3] = t0;
    stamps[blockIdx.x * 3 + 1] = t1;
    stamps[blockIdx.x * 3 + 2] = now();
  }
}

__global__ void block_kernel(const uint16_t* w, const float* x, int n, int k, float* y, long long* stamps) {
  const long long t0 = now();
  pdl_trigger();
  long long t1 = 0;
  gemv_rows<1>(w, n, k, 1, PlainX{x, k}, [&](int row, const float (&acc)[1]) { y[row] = acc[0]; });
  t1 = now();  // (the wait is inside gemv_rows: record the end only)
  __syncthreads();
  if (threadIdx.x == 0) {
    stamps[blockIdx.x * 3] = t0;
    stamps[blockIdx.x * 3 + 1] = t1;
    stamps[blockIdx.x * 3 + 2] = now();
  }
}

constexpr int kLaneChunks = 10;  // K = 2560
constexpr int kWarps = 8, kRows = 8, kStages = 4;

__global__ void __launch_bounds__(kWarps * 32) bulk_kernel(const uint16_t* w, const float* x, int n, int k, float* y,
                                                           long long* stamps) {
  const long long t0 = now();
  pdl_trigger();
  extern __shared__ __align__(128) uint8_t stages[];
  __shared__ __align__(8) uint64_t full[kStages];
  __shared__ __align__(16) float xs[kLaneChunks * 32 * 8];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int first = static_cast<int>(static_cast<int64_t>(blockIdx.x) * n / gridDim.x);
  const int last = static_cast<int>(static_cast<int64_t>(blockIdx.x + 1) * n / gridDim.x);
  const int row_bytes = k * 2;
  const int rounds = (last - first + kRows - 1) / kRows;
  auto issue = [&](int round) {
    if (round >= rounds) return;
    const int r0 = first + round * kRows, count = min(kRows, last - r0);
    const uint32_t bytes = static_cast<uint32_t>(count * row_bytes);
    const int s = round % kStages;
    bulk_copy(stages + static_cast<size_t>(s) * kRows * row_bytes, w + static_cast<size_t>(r0) * k, bytes, &full[s]);
  };
  if (threadIdx.x == 0) {
    mbarriers_init(full, kStages);
    for (int s = 0; s < kStages; ++s) issue(s);
  }
  pdl_wait();
  const long long t1 = now();
  for (int i = threadIdx.x; i < k / 4; i += kWarps * 32) reinterpret_cast<float4*>(xs)[i] = reinterpret_cast<const float4*>(x)[i];
  __syncthreads();
  for (int round = 0; round < rounds; ++round) {
    const int s = round % kStages;
    const uint32_t parity = (round / kStages) & 1;
    mbarrier_wait(&full[s], parity);
    const int r0 = first + round * kRows;
#pragma unroll 1
    for (int j = 0; j < kRows / kWarps; ++j) {
      const int local = warp + j * kWarps, r = r0 + local;
      if (r < last) {
        const uint8_t* src = stages + (static_cast<size_t>(s) * kRows + local) * row_bytes;
        float acc = 0.0f;
#pragma unroll
        for (int i = 0; i < kLaneChunks; ++i) {
          const int c = lane + 32 * i;
          const uint4 word = *reinterpret_cast<const uint4*>(src + 16 * c);
          const float4 a = *reinterpret_cast<const float4*>(xs + 8 * c), b = *reinterpret_cast<const float4*>(xs + 8 * c + 4);
          const float xv[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
          acc += dot8(word, xv);
        }
        acc = warp_sum(acc);
        if (lane == 0) y[r] = acc;
      }
    }
    __syncthreads();
    if (threadIdx.x == 0) issue(round + kStages);
  }
  if (threadIdx.x == 0) {
    stamps[blockIdx.x * 3] = t0;
    stamps[blockIdx.x * 3 + 1] = t1;
    stamps[blockIdx.x * 3 + 2] = now();
  }
}

struct Span {
  long long lo, mid, hi;
};
Span span(const std::vector<long long>& s, int blocks, int field, long long origin) {
  std::vector<long long> v;
  for (int b = 0; b < blocks; ++b) v.push_back(s[b * 3 + field] - origin);
  std::sort(v.begin(), v.end());
  return {v.front(), v[v.size() / 2], v.back()};
}

template <class Launch>
void run(const char* name, unsigned gemv_blocks, Launch launch_gemv, long long* pred_stamps, long long* gemv_stamps) {
  const CapturedGraph g(launch_gemv, kPairs);
  const std::vector<float> t = g.replay_ms(5);
  const float best = *std::min_element(t.begin(), t.end());
  std::vector<long long> ps(static_cast<size_t>(kPairs) * kPredBlocks * 3), gs(static_cast<size_t>(kPairs) * gemv_blocks * 3);
  CHECK(cudaMemcpy(ps.data(), pred_stamps, ps.size() * 8, cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(gs.data(), gemv_stamps, gs.size() * 8, cudaMemcpyDeviceToHost));
  const std::vector<long long> p(ps.begin() + kShown * kPredBlocks * 3, ps.begin() + (kShown + 1) * kPredBlocks * 3);
  const std::vector<long long> q(gs.begin() + static_cast<size_t>(kShown) * gemv_blocks * 3,
                                 gs.begin() + static_cast<size_t>(kShown + 1) * gemv_blocks * 3);
  long long origin = p[0];
  for (int bl = 0; bl < kPredBlocks; ++bl) origin = std::min(origin, p[bl * 3]);
  auto show = [](const char* what, Span v) { std::printf("    %-22s %7.2f %7.2f %7.2f us\n", what, v.lo / 1e3, v.mid / 1e3, v.hi / 1e3); };
  std::printf("%s: %.1f us per pair (best of 5 graph runs of %d pairs); pair %d, us from the predecessor's first start "
              "(min, median, max over blocks):\n", name, best * 1000.0f / kPairs, kPairs, kShown + 1);
  show("pred start", span(p, kPredBlocks, 0, origin));
  show("pred after wait", span(p, kPredBlocks, 1, origin));
  show("pred end", span(p, kPredBlocks, 2, origin));
  show("gemv start", span(q, static_cast<int>(gemv_blocks), 0, origin));
  show("gemv after wait", span(q, static_cast<int>(gemv_blocks), 1, origin));
  show("gemv end", span(q, static_cast<int>(gemv_blocks), 2, origin));
}

int main() {
  int sms = 0;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const int n = 16480, k = 2560;
  uint16_t* w;
  float *x, *y, *pred_out;
  float4* pred_in;
  long long *pred_stamps, *gemv_stamps;
  CHECK(cudaMalloc(&w, static_cast<size_t>(n) * k * 2));
  CHECK(cudaMemset(w, 0x3c, static_cast<size_t>(n) * k * 2));
  CHECK(cudaMalloc(&x, k * 4));
  CHECK(cudaMemset(x, 0, k * 4));
  CHECK(cudaMalloc(&y, n * 4));
  CHECK(cudaMalloc(&pred_in, size_t{kPredBlocks} * 16 * 256 * sizeof(float4)));
  CHECK(cudaMemset(pred_in, 0, size_t{kPredBlocks} * 16 * 256 * sizeof(float4)));
  CHECK(cudaMalloc(&pred_out, 256 * 4));
  const unsigned block_blocks = static_cast<unsigned>((n + kGemvWarps - 1) / kGemvWarps);
  CHECK(cudaMalloc(&pred_stamps, size_t{kPairs} * kPredBlocks * 3 * 8));
  CHECK(cudaMalloc(&gemv_stamps, size_t{kPairs} * block_blocks * 3 * 8));
  const long long spin = 4000;
  const size_t bulk_smem = static_cast<size_t>(kStages) * kRows * k * 2;
  CHECK(cudaFuncSetAttribute(bulk_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bulk_smem)));
  run("block kernel (engine, 128 threads)", block_blocks, [&](cudaStream_t s, int i) {
    launch_pdl(pred_kernel, unsigned{kPredBlocks}, 256u, size_t{0}, s, (const float4*)pred_in, pred_out, spin,
               pred_stamps + static_cast<size_t>(i) * kPredBlocks * 3);
    launch_pdl(block_kernel, block_blocks, unsigned{kGemvThreads}, size_t{0}, s, (const uint16_t*)w, (const float*)x, n, k, y,
               gemv_stamps + static_cast<size_t>(i) * block_blocks * 3);
  }, pred_stamps, gemv_stamps);
  const unsigned bulk_blocks = static_cast<unsigned>(sms);
  run("bulk kernel (1 block per SM, 4 stages of 8 rows, x in shared memory)", bulk_blocks, [&](cudaStream_t s, int i) {
    launch_pdl(pred_kernel, unsigned{kPredBlocks}, 256u, size_t{0}, s, (const float4*)pred_in, pred_out, spin,
               pred_stamps + static_cast<size_t>(i) * kPredBlocks * 3);
    launch_pdl(bulk_kernel, bulk_blocks, unsigned{kWarps * 32}, bulk_smem, s, (const uint16_t*)w, (const float*)x, n, k, y,
               gemv_stamps + static_cast<size_t>(i) * bulk_blocks * 3);
  }, pred_stamps, gemv_stamps);
  std::printf("(for the bulk kernel 'after wait' is when its wait returned; for the block kernel it is when its "
              "rows were done)\n");
  return 0;
}
