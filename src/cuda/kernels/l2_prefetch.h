// Fetching a later decode kernel's weights into L2 ahead of time. A decode step alternates kernels that stream
// weights at HBM speed with kernels bound by latency (hyper-connection reads, the router, the recurrent step);
// while the latter run, HBM idles. Such a kernel takes an L2Prefetch of the weights the next bandwidth-bound
// kernel will read (weights, or state no kernel in between writes) and its blocks issue bulk L2 prefetches for
// their shares of it; the later kernel's loads then hit L2. A hint only: L2 is the point of coherence, so a
// prefetch never yields stale data; nothing waits for it, and results never depend on it.
#pragma once

#include <cstdint>

namespace imp::cuda {

struct L2Prefetch {
  const void* data = nullptr;  // 16-byte aligned
  uint64_t bytes = 0;          // rounded down to a multiple of 16 by the kernels
};

// The first `bytes` of a weight (all of it if smaller).
inline L2Prefetch l2_prefetch_head(const void* data, uint64_t size, uint64_t bytes) {
  return {data, size < bytes ? size : bytes};
}

#ifdef __CUDACC__
// Share `part` of `parts` of p, issued by thread 0 of the calling block in bulk prefetches of up to 32 KiB.
__device__ __forceinline__ void l2_prefetch_share(const L2Prefetch& p, unsigned part, unsigned parts) {
  if (threadIdx.x != 0 || p.bytes < 16 || parts == 0) return;
  const uint64_t total = p.bytes & ~uint64_t{15};
  const uint64_t share = ((total + parts - 1) / parts + 15) & ~uint64_t{15};
  const uint64_t begin = share * part;
  const uint64_t end = begin + share < total ? begin + share : total;
  constexpr uint64_t kPiece = 32 * 1024;
  const char* base = static_cast<const char*>(p.data);
  for (uint64_t at = begin; at < end; at += kPiece) {
    const uint32_t n = static_cast<uint32_t>(end - at < kPiece ? end - at : kPiece);
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(base + at), "r"(n) : "memory");
  }
}
#endif

}  // namespace imp::cuda
