#include "cuda/kernels/dense.h"

#include <cooperative_groups.h>

#include <algorithm>
#include <type_traits>

#include "cuda/check.h"
#include "cuda/launch.h"
#include "cuda/kernels/device_math.cuh"
#include "cuda/kernels/fp_codes.cuh"
#include "cuda/kernels/gemv_row.cuh"

namespace imp::cuda {
namespace {

namespace cg = cooperative_groups;

constexpr int kMaxRows = 8;

template <int Rows, int Batch>
__global__ void gemv_bf16_kernel(const uint16_t* weight, const float* x, int n, int k, int split, float* y) {
  pdl_trigger();  // weights first: the dots wait before they read x
  auto store = [&](int row, const float (&acc)[Rows]) {
#pragma unroll
    for (int r = 0; r < Rows; ++r) y[static_cast<size_t>(r) * n + row] = acc[r];
  };
  gemv_rows<Rows, PlainX, decltype(store), AllRows, Batch>(weight, n, k, split, PlainX{x, k}, store);
}

// The projection's output goes straight into the hyper-connection streams (cpu::hyper_connection_write).
__global__ void gemv_bf16_hc_write_kernel(const uint16_t* weight, GatedX load_x, int n, int k, int split,
                                          const float* inject, int streams, float* stream_row) {
  pdl_trigger();  // weights first: the dots wait before they read x
  gemv_rows_prepared<1>(
      weight, n, k, split, load_x,
      [&](int row) {
        HcWriteLoads loads;
        loads.load(stream_row, static_cast<size_t>(n), static_cast<size_t>(row), inject, streams);
        return loads;
      },
      [&](int row, const float (&acc)[1], const HcWriteLoads& loads) {
        loads.add(stream_row, static_cast<size_t>(n), static_cast<size_t>(row), streams, acc[0]);
      });
}

// Attention in-projection rows [q_h | gate_h] per head, then the rest: the q halves and the rest (offset 0), or
// the gate halves only (offset hd).
struct HeadHalves {
  int hd, heads, offset;
  __device__ __forceinline__ int operator()(int r) const {
    return r < heads * hd ? (r / hd) * 2 * hd + offset + r % hd : r + heads * hd;
  }
};

__global__ void gemv_bf16_without_gates_kernel(const uint16_t* weight, const float* x, int n, int k, int split,
                                               HeadHalves rows, float* y) {
  pdl_trigger();  // weights first: the dots wait before they read x
  gemv_rows<1>(weight, n, k, split, PlainX{x, k}, [&](int row, const float (&acc)[1]) { y[row] = acc[0]; }, rows);
}

__global__ void gemv_bf16_gate_halves_kernel(const uint16_t* weight, const float* x, int n, int k, int split,
                                             HeadHalves rows, float* act) {
  pdl_trigger();
  gemv_rows<1>(weight, n, k, split, PlainX{x, k}, [&](int row, const float (&acc)[1]) {
    const int head = row / (2 * rows.hd);
    act[head * rows.hd + row % (2 * rows.hd) - rows.hd] = sigmoidf(acc[0]);
  }, rows);
}

// A small single-row GEMV (the MoE input: 1793 x 2560, 9.2 MB) has every weight load of a warp in flight before the
// PDL wait when the register file of the resident warps can hold the whole matrix (33 MiB on the H200's 132 SMs;
// at most half of it here, the previous kernel's blocks hold the rest): after the wait only x is loaded. Decode
// +0.8% on top of the segmented hyper-connection up/mix, +0.0% before it (session 19). Larger GEMVs stream at full
// bandwidth anyway and keep kGemvBatch (more loads per lane cost them resident blocks).
constexpr int kGemvWholeBatch = 6;
constexpr size_t kGemvWholeBytes = size_t{16} << 20;

template <int Rows>
void launch_rows(const uint16_t* weight, const float* x, int32_t n, int32_t k, float* y, cudaStream_t stream) {
  const int split = gemv_split(n, k);
  auto kernel = gemv_bf16_kernel<Rows, kGemvBatch>;
  if constexpr (Rows == 1) {
    const int chunks_per_lane = (k / 8 / split + kWarp - 1) / kWarp;
    const size_t bytes = static_cast<size_t>(n) * static_cast<size_t>(k) * sizeof(uint16_t);
    if (chunks_per_lane <= kGemvWholeBatch && bytes <= kGemvWholeBytes) kernel = gemv_bf16_kernel<1, kGemvWholeBatch>;
  }
  launch_kernel(kernel, gemv_split_blocks(n, split), kGemvThreads, 0, stream, 1, weight, x, n, k, split, y);
}

// One block per (row, group); groups are at most a few thousand wide. kVec values per load (4: 16-byte loads of
// x and y, 8-byte loads of the weight, when every row and group start is 16-byte aligned).
template <int kVec>
__global__ void rms_norm_kernel(const float* x, const uint16_t* weight, int width, int group, float eps, float* y) {
  pdl_begin();
  __shared__ float partial[32];
  using Vec = std::conditional_t<kVec == 4, float4, float>;
  using WeightVec = std::conditional_t<kVec == 4, uint2, uint16_t>;
  const int groups = width / group;
  const int row = blockIdx.x / groups, g = blockIdx.x % groups, n = group / kVec;
  const Vec* in = reinterpret_cast<const Vec*>(x + static_cast<size_t>(row) * width + static_cast<size_t>(g) * group);
  Vec* out = reinterpret_cast<Vec*>(y + static_cast<size_t>(row) * width + static_cast<size_t>(g) * group);
  const WeightVec* w = reinterpret_cast<const WeightVec*>(weight + static_cast<size_t>(g) * group);
  float s = 0.0f;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    const Vec v = in[i];
    if constexpr (kVec == 4) {
      s += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
    } else {
      s += v * v;
    }
  }
  s = warp_sum(s);
  if (threadIdx.x % kWarp == 0) partial[threadIdx.x / kWarp] = s;
  __syncthreads();
  if (threadIdx.x < kWarp) {
    s = warp_sum(threadIdx.x < blockDim.x / kWarp ? partial[threadIdx.x] : 0.0f);
    if (threadIdx.x == 0) partial[0] = rsqrtf(s / static_cast<float>(group) + eps);
  }
  __syncthreads();
  const float inv = partial[0];
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    const Vec v = in[i];  // an L1/L2 hit: this block read it above
    const WeightVec wv = w[i];
    if constexpr (kVec == 4) {
      out[i] = make_float4(v.x * inv * (1.0f + bf16_bits_to_float(wv.x & 0xffffu)),
                           v.y * inv * (1.0f + bf16_bits_to_float(wv.x >> 16)),
                           v.z * inv * (1.0f + bf16_bits_to_float(wv.y & 0xffffu)),
                           v.w * inv * (1.0f + bf16_bits_to_float(wv.y >> 16)));
    } else {
      out[i] = v * inv * (1.0f + bf16_bits_to_float(wv));
    }
  }
}

// Few rows (decode): a cluster of kNormCluster blocks per (row, group), each squaring and scaling a
// contiguous slice; the slices' sums meet through distributed shared memory, added in rank order by
// every block (so all blocks use the same scale).
constexpr int kNormCluster = 4;
constexpr int kNormClusterThreads = 256;
constexpr int kNormClusterMaxItems = 64;  // rows * groups up to which the cluster kernel is used

__global__ void __cluster_dims__(kNormCluster, 1, 1) __launch_bounds__(kNormClusterThreads)
    rms_norm_cluster_kernel(const float* x, const uint16_t* weight, int width, int group, float eps, float* y) {
  pdl_begin();
  __shared__ float partial[kNormClusterThreads / kWarp];
  __shared__ float inv_s;
  cg::cluster_group cluster = cg::this_cluster();
  const int rank = static_cast<int>(cluster.block_rank());
  const int item = blockIdx.x / kNormCluster, groups = width / group;
  const int row = item / groups, g = item % groups;
  const float* in = x + static_cast<size_t>(row) * width + static_cast<size_t>(g) * group;
  float* out = y + static_cast<size_t>(row) * width + static_cast<size_t>(g) * group;
  const int per_block = (group + kNormCluster - 1) / kNormCluster;
  const int lo = min(group, rank * per_block), hi = min(group, lo + per_block);
  float s = 0.0f;
  for (int i = lo + static_cast<int>(threadIdx.x); i < hi; i += kNormClusterThreads) s += in[i] * in[i];
  s = warp_sum(s);
  if (threadIdx.x % kWarp == 0) partial[threadIdx.x / kWarp] = s;
  __syncthreads();
  if (threadIdx.x == 0) {
    float t = 0.0f;
    for (int w = 0; w < kNormClusterThreads / kWarp; ++w) t += partial[w];
    partial[0] = t;
  }
  cluster.sync();  // every block's slice sum is in its partial[0]
  if (threadIdx.x == 0) {
    float total = 0.0f;
    for (int r = 0; r < kNormCluster; ++r) total += *cluster.map_shared_rank(&partial[0], r);
    inv_s = rsqrtf(total / static_cast<float>(group) + eps);
  }
  cluster.sync();  // the remote reads are done before any block moves on (and exits)
  const float inv = inv_s;
  for (int i = lo + static_cast<int>(threadIdx.x); i < hi; i += kNormClusterThreads) {
    out[i] = in[i] * inv * (1.0f + bf16_bits_to_float(weight[g * group + i]));
  }
}

}  // namespace

void launch_gemv_bf16(const uint16_t* weight, const float* x, int32_t rows, int32_t n, int32_t k, float* y,
                      cudaStream_t stream) {
  if (k % 8 != 0 || rows < 1 || rows > kMaxRows) throw_invalid_launch("gemv_bf16: K % 8 != 0 or rows outside [1, 8]");
  switch (rows) {
    case 1: launch_rows<1>(weight, x, n, k, y, stream); break;
    case 2: launch_rows<2>(weight, x, n, k, y, stream); break;
    case 3: launch_rows<3>(weight, x, n, k, y, stream); break;
    case 4: launch_rows<4>(weight, x, n, k, y, stream); break;
    case 5: launch_rows<5>(weight, x, n, k, y, stream); break;
    case 6: launch_rows<6>(weight, x, n, k, y, stream); break;
    case 7: launch_rows<7>(weight, x, n, k, y, stream); break;
    default: launch_rows<8>(weight, x, n, k, y, stream); break;
  }
}

void launch_gemv_bf16_hc_write(const uint16_t* weight, const float* x, const float* gate, int32_t n, int32_t k,
                               const float* inject, int32_t streams, float* stream_row, cudaStream_t stream) {
  if (k % 8 != 0 || streams < 1 || streams > kMaxHcStreams || gate == nullptr) {
    throw_invalid_launch("gemv_bf16_hc_write: K % 8 != 0, streams outside [1, 8] or no gate");
  }
  const int split = gemv_split(n, k);
  launch_kernel(gemv_bf16_hc_write_kernel, gemv_split_blocks(n, split), kGemvThreads, 0, stream, 1, weight,
                GatedX{x, gate}, n, k, split, inject, streams, stream_row);
}

void launch_gemv_bf16_without_gates(const uint16_t* weight, const float* x, int32_t n, int32_t k, int32_t heads,
                                    int32_t head_dim, float* y, cudaStream_t stream) {
  if (k % 8 != 0 || heads < 1 || head_dim < 1 || n < 2 * heads * head_dim) {
    throw_invalid_launch("gemv_bf16_without_gates: K % 8 != 0 or fewer rows than the query and gate heads");
  }
  const int computed = n - heads * head_dim, split = gemv_split(computed, k);
  launch_kernel(gemv_bf16_without_gates_kernel, gemv_split_blocks(computed, split), kGemvThreads, 0, stream, 1, weight, x,
                computed, k, split, HeadHalves{head_dim, heads, 0}, y);
}

void launch_gemv_bf16_gate_halves(const uint16_t* weight, const float* x, int32_t k, int32_t heads, int32_t head_dim,
                                  float* act, cudaStream_t stream) {
  if (k % 8 != 0 || heads < 1 || head_dim < 1) throw_invalid_launch("gemv_bf16_gate_halves: K % 8 != 0 or no heads");
  const int n = heads * head_dim, split = gemv_split(n, k);
  launch_kernel(gemv_bf16_gate_halves_kernel, gemv_split_blocks(n, split), kGemvThreads, 0, stream, 1, weight, x, n, k,
                split, HeadHalves{head_dim, heads, head_dim}, act);
}

void launch_rms_norm(const float* x, const uint16_t* weight, int32_t rows, int32_t width, int32_t group, float eps,
                     float* y, cudaStream_t stream) {
  if (group <= 0 || width % group != 0) throw_invalid_launch("rms_norm: width must be a multiple of the group");
  const int items = rows * (width / group);
  if (items <= kNormClusterMaxItems && group >= kNormCluster * kNormClusterThreads) {
    launch_kernel(rms_norm_cluster_kernel, items * kNormCluster, kNormClusterThreads, 0, stream, 1,
                  x, weight, width, group, eps, y);
  } else {
    // At most 256 threads per block: up to 8 blocks per SM keep rows in flight (1024-thread blocks allow 2).
    const bool vec4 = group % 4 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0 && reinterpret_cast<uintptr_t>(y) % 16 == 0 &&
                      reinterpret_cast<uintptr_t>(weight) % 8 == 0;
    const int per_thread = vec4 ? 4 : 1;
    const int threads = std::min(256, (group / per_thread + kWarp - 1) / kWarp * kWarp);
    if (vec4) {
      launch_kernel(rms_norm_kernel<4>, items, threads, 0, stream, 1, x, weight, width, group, eps, y);
    } else {
      launch_kernel(rms_norm_kernel<1>, items, threads, 0, stream, 1, x, weight, width, group, eps, y);
    }
  }
}

}  // namespace imp::cuda
