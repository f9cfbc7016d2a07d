#include "cuda/kernels/gemm_bf16.h"

#include "cuda/check.h"
#include "cuda/kernels/prefill_common.cuh"

namespace imp::cuda {
namespace {

using namespace prefill;

constexpr int kBM = 128, kBN = 128, kBK = 64, kStages = 3, kThreads = 256, kGroupM = 8;
constexpr int kA32Stride = kBK + 4;  // floats: 272-byte rows, conflict-free float4 access
constexpr int kBStride = kBK + 8;    // bf16: 144-byte rows, conflict-free ldmatrix
constexpr int kA16Stride = kBK + 8;
constexpr size_t kA32StageBytes = static_cast<size_t>(kBM) * kA32Stride * 4;
constexpr size_t kBStageBytes = static_cast<size_t>(kBN) * kBStride * 2;
constexpr size_t kSmemBytes = kStages * (kA32StageBytes + kBStageBytes) + static_cast<size_t>(kBM) * kA16Stride * 2;

// Block: a 128 x 128 tile of y. x tiles arrive as fp32 (cp.async), are rounded to bf16 once per tile into
// a16, and both operands feed mma through ldmatrix. Warps: 2 (rows) x 4 (outputs), 64 x 32 each.
__global__ void __launch_bounds__(kThreads, 1)
    gemm_bf16_kernel(const float* __restrict__ x, const uint16_t* __restrict__ w, int rows, int n_out, int k,
                     float* __restrict__ y, int tiles_m, int tiles_n) {
  extern __shared__ __align__(16) uint8_t smem[];
  float* a32 = reinterpret_cast<float*>(smem);
  uint16_t* bs = reinterpret_cast<uint16_t*>(smem + kStages * kA32StageBytes);
  uint16_t* a16 = reinterpret_cast<uint16_t*>(smem + kStages * (kA32StageBytes + kBStageBytes));

  // Grouped block order: consecutive blocks walk kGroupM row tiles before the next output tile.
  const int pid = blockIdx.x;
  const int group_size = kGroupM * tiles_n;
  const int first_m = (pid / group_size) * kGroupM;
  const int gm = min(tiles_m - first_m, kGroupM);
  const int tile_m = first_m + (pid % group_size) % gm;
  const int tile_n = (pid % group_size) / gm;
  const int m0 = tile_m * kBM, n0 = tile_n * kBN;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int wm = warp / 4, wn = warp % 4;
  const int kt_count = (k + kBK - 1) / kBK;

  auto load_tile = [&](int kt, int stage) {
    const int kbase = kt * kBK;
    float* a_dst = a32 + static_cast<size_t>(stage) * kBM * kA32Stride;
#pragma unroll
    for (int i = 0; i < (kBM * kBK / 4) / kThreads; ++i) {
      const int id = tid + i * kThreads, r = id >> 4, c = (id & 15) * 4;
      const int gr = m0 + r, gk = kbase + c;
      const bool ok = gr < rows && gk < k;
      cp_async16(a_dst + r * kA32Stride + c, ok ? x + static_cast<size_t>(gr) * k + gk : x, ok);
    }
    uint16_t* b_dst = bs + static_cast<size_t>(stage) * kBN * kBStride;
#pragma unroll
    for (int i = 0; i < (kBN * kBK / 8) / kThreads; ++i) {
      const int id = tid + i * kThreads, r = id >> 3, c = (id & 7) * 8;
      const int gn = n0 + r, gk = kbase + c;
      const bool ok = gn < n_out && gk < k;
      cp_async16(b_dst + r * kBStride + c, ok ? w + static_cast<size_t>(gn) * k + gk : w, ok);
    }
  };

#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < kt_count) load_tile(s, s);
    cp_async_commit();
  }

  float acc[4][4][4];
#pragma unroll
  for (int mi = 0; mi < 4; ++mi)
#pragma unroll
    for (int ni = 0; ni < 4; ++ni)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[mi][ni][e] = 0.0f;

  for (int kt = 0; kt < kt_count; ++kt) {
    cp_async_wait<kStages - 2>();  // tile kt has landed (this thread's copies)
    __syncthreads();               // ... everyone's; and everyone is done with tile kt - 1 and a16
    const int next = kt + kStages - 1;
    if (next < kt_count) load_tile(next, next % kStages);
    cp_async_commit();

    const float* a_src = a32 + static_cast<size_t>(kt % kStages) * kBM * kA32Stride;
#pragma unroll
    for (int i = 0; i < (kBM * kBK / 4) / kThreads; ++i) {
      const int id = tid + i * kThreads, r = id >> 4, c = (id & 15) * 4;
      const float4 v = *reinterpret_cast<const float4*>(a_src + r * kA32Stride + c);
      *reinterpret_cast<uint2*>(a16 + r * kA16Stride + c) = make_uint2(pack_bf16x2(v.x, v.y), pack_bf16x2(v.z, v.w));
    }
    __syncthreads();

    const uint16_t* b_src = bs + static_cast<size_t>(kt % kStages) * kBN * kBStride;
#pragma unroll
    for (int ks = 0; ks < kBK / 16; ++ks) {
      uint32_t af[4][4], bf[4][2];
#pragma unroll
      for (int mi = 0; mi < 4; ++mi) {
        ldmatrix_x4(af[mi], a16 + (wm * 64 + mi * 16 + (lane & 15)) * kA16Stride + ks * 16 + (lane >> 4) * 8);
      }
#pragma unroll
      for (int nj = 0; nj < 2; ++nj) {
        uint32_t r[4];
        ldmatrix_x4(r, b_src + (wn * 32 + nj * 16 + (lane & 7) + ((lane >> 4) << 3)) * kBStride + ks * 16 +
                           ((lane >> 3) & 1) * 8);
        bf[2 * nj][0] = r[0];
        bf[2 * nj][1] = r[1];
        bf[2 * nj + 1][0] = r[2];
        bf[2 * nj + 1][1] = r[3];
      }
#pragma unroll
      for (int mi = 0; mi < 4; ++mi)
#pragma unroll
        for (int ni = 0; ni < 4; ++ni) mma_16816(acc[mi][ni], af[mi], bf[ni][0], bf[ni][1]);
    }
  }
  cp_async_wait<0>();  // nothing may be in flight when the block exits

  const int g = lane / 4, c = lane % 4;
  const bool pairs = (n_out % 2) == 0;
#pragma unroll
  for (int mi = 0; mi < 4; ++mi) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int row = m0 + wm * 64 + mi * 16 + g + half * 8;
      if (row >= rows) continue;
      float* out = y + static_cast<size_t>(row) * n_out;
#pragma unroll
      for (int ni = 0; ni < 4; ++ni) {
        const int col = n0 + wn * 32 + ni * 8 + 2 * c;
        const float v0 = acc[mi][ni][2 * half], v1 = acc[mi][ni][2 * half + 1];
        if (pairs && col + 1 < n_out) {
          *reinterpret_cast<float2*>(out + col) = make_float2(v0, v1);
        } else {
          if (col < n_out) out[col] = v0;
          if (col + 1 < n_out) out[col + 1] = v1;
        }
      }
    }
  }
}

}  // namespace

void launch_gemm_bf16(const float* x, const uint16_t* weight, int32_t rows, int32_t n_out, int32_t k, float* y,
                      cudaStream_t stream) {
  if (k <= 0 || k % 8 != 0 || n_out <= 0 || rows < 0) throw_invalid_launch("gemm_bf16: needs k % 8 == 0 and n_out > 0");
  if ((reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(weight)) % 16 != 0) {
    throw_invalid_launch("gemm_bf16: x and W must be 16-byte aligned");
  }
  if (rows == 0) return;
  static const bool configured = [] {
    IMP_CUDA_CHECK(cudaFuncSetAttribute(gemm_bf16_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        static_cast<int>(kSmemBytes)));
    return true;
  }();
  (void)configured;
  const int tiles_m = (rows + kBM - 1) / kBM, tiles_n = (n_out + kBN - 1) / kBN;
  const long long blocks = static_cast<long long>(tiles_m) * tiles_n;
  if (blocks > 0x7fffffffLL) throw_invalid_launch("gemm_bf16: too many tiles");
  gemm_bf16_kernel<<<static_cast<unsigned>(blocks), kThreads, kSmemBytes, stream>>>(x, weight, rows, n_out, k, y, tiles_m,
                                                                                  tiles_n);
  IMP_CUDA_CHECK_LAUNCH();
}

}  // namespace imp::cuda
