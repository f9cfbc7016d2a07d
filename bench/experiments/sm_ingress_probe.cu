// How fast can one SM pull weights from HBM when the others pull too? The decode MoE gate/up kernel lands 4 blocks
// (4 x 46 KB of NVFP4 strips) on ~90 SMs and 0-1 on the rest under PDL, and those 4-block SMs end last. If an SM's
// ingress is capped (outstanding requests per SM), the bytes per SM, not the total, set the phase's length and a
// balanced spread would be shorter. This probe launches 4 blocks of 256 threads per SM (46 KB of shared memory
// each, so exactly 4 fit), lets each block learn its place (SM id, arrival slot on that SM) and, by a pattern,
// work or exit at once; a working block fetches its own fresh 46,080 bytes (8 warps x 5760, as the gate/up
// strips) by bulk copies (one warp lane, four copies on an mbarrier) or by cp.async (16 bytes per lane and
// instruction). Makespan = last working block's end - first working block's start, medians of 21 repetitions.
// Build and run on the GPU machine from the repository root:
//   nvcc -O3 -std=c++20 -gencode=arch=compute_90a,code=sm_90a -Isrc bench/experiments/sm_ingress_probe.cu \
//     -o build/probes/sm_ingress_probe && build/probes/sm_ingress_probe
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "cuda/kernels/device_math.cuh"

using namespace imp::cuda;

namespace {

constexpr int kThreads = 256, kWarps = kThreads / 32, kWarpBytes = 5760, kBlockBytes = kWarps * kWarpBytes;
constexpr int kMaxSms = 256;

__device__ __forceinline__ long long now() {
  long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// pattern: per-SM working slots. 0: 4 on every SM; 1: 4 on SMs with id < split, 1 on the others; 2: 3 on every SM;
// 3: 1 on every SM; 4: 4 on SMs with id < split, none elsewhere; 5: 1 on SMs with id < split; 6: 2 on every SM.
__device__ bool works(int pattern, int sm, int slot, int split) {
  switch (pattern) {
    case 0: return slot < 4;
    case 1: return slot < (sm < split ? 4 : 1);
    case 2: return slot < 3;
    case 3: return slot < 1;
    case 4: return sm < split && slot < 4;
    case 5: return sm < split && slot < 1;
    default: return slot < 2;
  }
}

__global__ void __launch_bounds__(kThreads) fetch_kernel(const uint8_t* buffer, size_t buffer_bytes, int pattern, int split,
                                                         int rep, bool bulk, unsigned* sm_slots, unsigned* items,
                                                         long long* stamps, uint32_t* sink) {
  extern __shared__ __align__(128) uint8_t stage[];
  __shared__ int slot, item;
  __shared__ uint64_t bars[kWarps];
  unsigned sm;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
  if (threadIdx.x == 0) slot = static_cast<int>(atomicAdd(&sm_slots[sm % kMaxSms], 1u));
  __syncthreads();
  if (!works(pattern, static_cast<int>(sm), slot, split)) return;
  if (threadIdx.x == 0) item = static_cast<int>(atomicAdd(items, 1u));
  __syncthreads();
  const long long t0 = now();
  const size_t region = (static_cast<size_t>(rep) * 600 + static_cast<size_t>(item)) * kBlockBytes % (buffer_bytes - kBlockBytes);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const uint8_t* src = buffer + region / 128 * 128 + warp * kWarpBytes;
  uint8_t* dst = stage + warp * kWarpBytes;
  if (bulk) {
    uint64_t* bar = bars + warp;
    if (lane == 0) {
      mbarrier_init(bar, 1);
      mbarrier_arrive_expect_tx(bar, kWarpBytes);
      // as gate_up_dot_bulk: gate codes, up codes (2560 each), gate scales, up scales (320 each)
      bulk_copy_to_shared(dst, src, 2560, bar);
      bulk_copy_to_shared(dst + 2560, src + 2560, 2560, bar);
      bulk_copy_to_shared(dst + 5120, src + 5120, 320, bar);
      bulk_copy_to_shared(dst + 5440, src + 5440, 320, bar);
    }
    __syncwarp();
    mbarrier_wait(bar, 0);
  } else {
    for (int i = lane; i < kWarpBytes / 16; i += 32) cp_async16(dst + 16 * i, src + 16 * i);
    cp_async_commit();
    cp_async_wait_all();
    __syncwarp();
  }
  uint32_t acc = reinterpret_cast<const uint32_t*>(dst)[lane];  // use the bytes
  __syncthreads();
  if (threadIdx.x == 0) {
    stamps[2 * item] = t0;
    stamps[2 * item + 1] = now();
  }
  if (acc == 0x12345678u) sink[0] = acc;
}

#define CHECK(x)                                                                      \
  do {                                                                                \
    cudaError_t e = (x);                                                              \
    if (e != cudaSuccess) {                                                           \
      std::printf("%s failed: %s\n", #x, cudaGetErrorString(e));                      \
      return 1;                                                                       \
    }                                                                                 \
  } while (0)

}  // namespace

int main() {
  int sms = 0;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const size_t buffer_bytes = size_t{4} << 30;
  uint8_t* buffer;
  CHECK(cudaMalloc(&buffer, buffer_bytes));
  CHECK(cudaMemset(buffer, 1, buffer_bytes));
  unsigned *sm_slots, *items;
  long long* stamps;
  uint32_t* sink;
  CHECK(cudaMalloc(&sm_slots, kMaxSms * sizeof(unsigned)));
  CHECK(cudaMalloc(&items, sizeof(unsigned)));
  CHECK(cudaMalloc(&stamps, 2 * 4 * kMaxSms * sizeof(long long)));
  CHECK(cudaMalloc(&sink, sizeof(uint32_t)));
  CHECK(cudaFuncSetAttribute(fetch_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kBlockBytes));
  const int split_two_thirds = sms * 2 / 3, split_quarter = sms / 4;
  struct Case {
    int pattern, split;
    const char* name;
  } cases[] = {{0, 0, "4 per SM, all SMs"},
               {1, split_two_thirds, "4 per SM on 2/3 of SMs, 1 on the rest (gate/up under PDL)"},
               {2, 0, "3 per SM, all SMs (balanced, same blocks as above)"},
               {6, 0, "2 per SM, all SMs"},
               {3, 0, "1 per SM, all SMs"},
               {4, split_quarter, "4 per SM on 1/4 of SMs only"},
               {5, split_quarter, "1 per SM on 1/4 of SMs only"}};
  std::printf("%d SMs; each working block fetches %d bytes; makespan medians of 21 repetitions\n", sms, kBlockBytes);
  int rep = 0;
  for (bool bulk : {true, false}) {
    for (const Case& c : cases) {
      std::vector<double> spans, per_block;
      int working = 0;
      for (int r = 0; r < 21; ++r, ++rep) {
        CHECK(cudaMemset(sm_slots, 0, kMaxSms * sizeof(unsigned)));
        CHECK(cudaMemset(items, 0, sizeof(unsigned)));
        fetch_kernel<<<sms * 4, kThreads, kBlockBytes>>>(buffer, buffer_bytes, c.pattern, c.split, rep, bulk, sm_slots,
                                                          items, stamps, sink);
        CHECK(cudaDeviceSynchronize());
        unsigned n = 0;
        CHECK(cudaMemcpy(&n, items, sizeof(unsigned), cudaMemcpyDeviceToHost));
        std::vector<long long> host(2 * n);
        CHECK(cudaMemcpy(host.data(), stamps, host.size() * sizeof(long long), cudaMemcpyDeviceToHost));
        long long first = host[0], last = host[1];
        std::vector<double> durations;
        for (unsigned i = 0; i < n; ++i) {
          first = std::min(first, host[2 * i]);
          last = std::max(last, host[2 * i + 1]);
          durations.push_back((host[2 * i + 1] - host[2 * i]) / 1000.0);
        }
        std::sort(durations.begin(), durations.end());
        spans.push_back((last - first) / 1000.0);
        per_block.push_back(durations[durations.size() / 2]);
        working = static_cast<int>(n);
      }
      std::sort(spans.begin(), spans.end());
      std::sort(per_block.begin(), per_block.end());
      const double span = spans[spans.size() / 2], mb = working * static_cast<double>(kBlockBytes) / 1e6;
      std::printf("%-5s %-58s blocks %3d (%5.1f MB): makespan %6.2f us (%5.2f TB/s), block median %5.2f us\n",
                  bulk ? "bulk" : "cp16", c.name, working, mb, span, mb / span, per_block[per_block.size() / 2]);
    }
  }
  return 0;
}
