#include "cuda/kernels/attention_prefill.h"

#include <cfloat>

#include "cuda/check.h"
#include "cuda/kernels/device_math.cuh"
#include "cuda/kernels/prefill_common.cuh"

namespace imp::cuda {
namespace {

using namespace prefill;

constexpr int kRows = 64, kKeys = 64, kThreads = 128;
static_assert(kThreads >= kRows + kKeys, "threads 0..63 find the keys each row attends, the last 64 the rows of the keys");

template <int D>
constexpr size_t smem_bytes() {
  return 3 * static_cast<size_t>(kRows) * (D + 8) * 2;
}

// Bits of the keys key0 .. key0 + 63 a row at `pos` attends: n <= pos and, with a block mask (row_mask, the
// row's words; nullptr = dense), bit n / ratio set. Only mask bits of blocks <= pos / ratio are read.
__device__ __forceinline__ uint64_t tile_keys(int key0, int pos, const uint32_t* row_mask, int ratio) {
  if (pos < key0) return 0;
  const int last = min(pos - key0, kKeys - 1);  // the last visible key, tile-relative
  const uint64_t causal = ~0ull >> (63 - last);
  if (row_mask == nullptr) return causal;
  // Blocks j0 .. j1 cover the visible keys: j1 - j0 < 64 / ratio + 2, so they fit in the 64 bits from bit
  // j0 % 32 of word j0 / 32 on (ratio 1: j0 % 32 == 0 and 64 blocks).
  const int j0 = key0 / ratio, j1 = (key0 + last) / ratio, span = j1 - j0 + 1, w = j0 / 32;
  uint64_t blocks = row_mask[w];
  if (j1 / 32 > w) blocks |= static_cast<uint64_t>(row_mask[w + 1]) << 32;
  const uint64_t span_bits = ~0ull >> (64 - span);
  blocks = (blocks >> (j0 % 32)) & span_bits;
  if (blocks == span_bits) return causal;
  uint64_t keys = 0;
  for (; blocks != 0; blocks &= blocks - 1) {
    const int j = j0 + __ffsll(static_cast<long long>(blocks)) - 1;
    const int lo = max(j * ratio - key0, 0), hi = min(j * ratio + ratio - 1 - key0, last);
    keys |= (~0ull >> (63 - hi)) & (~0ull << lo);
  }
  return keys;
}

template <int D, bool kBf16>
__global__ void __launch_bounds__(kThreads, 2)
    attention_prefill_kernel(KvPages cache, const float* __restrict__ q, const float* __restrict__ gate, int head_stride,
                             const int32_t* __restrict__ positions, int rows, int heads, int kv_heads,
                             const uint32_t* __restrict__ block_mask, int mask_words, int ratio,
                             float* __restrict__ out) {
  constexpr int kS = D + 8;  // bf16 row stride: 16-byte multiple, conflict-free ldmatrix
  extern __shared__ __align__(16) uint16_t sm[];
  uint16_t* Qs = sm;
  uint16_t* Ks = Qs + kRows * kS;
  uint16_t* Vs = Ks + kKeys * kS;
  __shared__ int s_pos[kRows];
  __shared__ int s_max;
  __shared__ uint64_t s_keys[kRows];  // the keys of the current tile each row attends (tile_keys)
  __shared__ int64_t s_row[kKeys];    // element offset of each key's row of this tile in the cache; -1 beyond max_pos

  const int row0 = (gridDim.x - 1 - blockIdx.x) * kRows;  // the longest rows first
  const int h = blockIdx.y;
  const int kvh = h / (heads / kv_heads), width = kv_heads * D;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, c = lane & 3;

  if (tid < kRows) s_pos[tid] = row0 + tid < rows ? positions[row0 + tid] : -1;
  for (int e = tid; e < kRows * D / 4; e += kThreads) {
    const int r = e / (D / 4), d4 = (e % (D / 4)) * 4, row = row0 + r;
    float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (row < rows) v = *reinterpret_cast<const float4*>(q + (static_cast<size_t>(row) * heads + h) * head_stride + d4);
    *reinterpret_cast<uint2*>(Qs + r * kS + d4) = make_uint2(pack_bf16x2(v.x, v.y), pack_bf16x2(v.z, v.w));
  }
  __syncthreads();
  if (warp == 0) {
    int m = max(s_pos[lane], s_pos[lane + 32]);
    for (int o = 16; o > 0; o >>= 1) m = max(m, __shfl_xor_sync(0xffffffffu, m, o));
    if (lane == 0) s_max = m;
  }
  __syncthreads();
  const int max_pos = s_max;  // >= 0: row0 < rows
  const float scale = 1.0f / sqrtf(static_cast<float>(D));
  // Threads 0..63 own a row's tile_keys; their row's mask words.
  const uint32_t* mask_row =
      block_mask != nullptr && tid < kRows && row0 + tid < rows ? block_mask + static_cast<size_t>(row0 + tid) * mask_words : nullptr;
  const int* table = cache.page_table;
  const int page_size = cache.page_size;

  float o[D / 8][4];
#pragma unroll
  for (int i = 0; i < D / 8; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
  float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;

  const int tiles = max_pos / kKeys + 1;
  for (int kt = 0; kt < tiles; ++kt) {
    // Which keys of the tile each row attends; a tile no row attends is skipped (masked rows).
    const uint64_t my_keys = tid < kRows ? tile_keys(kt * kKeys, s_pos[tid], mask_row, ratio) : 0;
    if (tid < kRows) s_keys[tid] = my_keys;
    if (tid >= kThreads - kKeys) {  // the other threads: where each key's K/V row lives (one page lookup per key)
      const int n = kt * kKeys + tid - (kThreads - kKeys);
      s_row[tid - (kThreads - kKeys)] =
          n <= max_pos ? (static_cast<int64_t>(table[n / page_size]) * page_size + n % page_size) * width + kvh * D : -1;
    }
    if (!__syncthreads_or(my_keys != 0)) continue;
    // K and V of tokens kt*64 .. kt*64+63 (zero beyond max_pos: masked, and V must stay finite).
    for (int e = tid; e < kKeys * D / 8; e += kThreads) {
      const int r = e / (D / 8), d8 = (e % (D / 8)) * 8;
      const int64_t row = s_row[r];
      const bool ok = row >= 0;
      const size_t idx = ok ? static_cast<size_t>(row + d8) : 0;
      if constexpr (kBf16) {
        const uint16_t* kb = static_cast<const uint16_t*>(cache.keys);
        const uint16_t* vb = static_cast<const uint16_t*>(cache.values);
        cp_async16(Ks + r * kS + d8, kb + idx, ok);
        cp_async16(Vs + r * kS + d8, vb + idx, ok);
      } else {
        uint4 kw = make_uint4(0, 0, 0, 0), vw = kw;
        if (ok) {
          const float* kf = static_cast<const float*>(cache.keys) + idx;
          const float* vf = static_cast<const float*>(cache.values) + idx;
          const float4 k0 = *reinterpret_cast<const float4*>(kf), k1 = *reinterpret_cast<const float4*>(kf + 4);
          const float4 v0 = *reinterpret_cast<const float4*>(vf), v1 = *reinterpret_cast<const float4*>(vf + 4);
          kw = make_uint4(pack_bf16x2(k0.x, k0.y), pack_bf16x2(k0.z, k0.w), pack_bf16x2(k1.x, k1.y), pack_bf16x2(k1.z, k1.w));
          vw = make_uint4(pack_bf16x2(v0.x, v0.y), pack_bf16x2(v0.z, v0.w), pack_bf16x2(v1.x, v1.y), pack_bf16x2(v1.z, v1.w));
        }
        *reinterpret_cast<uint4*>(Ks + r * kS + d8) = kw;
        *reinterpret_cast<uint4*>(Vs + r * kS + d8) = vw;
      }
    }
    if constexpr (kBf16) {
      cp_async_commit();
      cp_async_wait<0>();
    }
    __syncthreads();

    // S = Q K^T for this warp's 16 rows x 64 keys.
    float s[8][4];
#pragma unroll
    for (int i = 0; i < 8; ++i) s[i][0] = s[i][1] = s[i][2] = s[i][3] = 0.0f;
#pragma unroll
    for (int ks = 0; ks < D / 16; ++ks) {
      uint32_t a[4];
      ldmatrix_x4(a, Qs + (warp * 16 + (lane & 15)) * kS + ks * 16 + (lane >> 4) * 8);
#pragma unroll
      for (int nj = 0; nj < 4; ++nj) {
        uint32_t r[4];
        ldmatrix_x4(r, Ks + (nj * 16 + (lane & 7) + ((lane >> 4) << 3)) * kS + ks * 16 + ((lane >> 3) & 1) * 8);
        mma_16816(s[2 * nj], a, r[0], r[1]);
        mma_16816(s[2 * nj + 1], a, r[2], r[3]);
      }
    }
    // Mask (causal and block), scale, online softmax (rows g and g + 8; the 4 lanes of a quad share a row).
    // Key ni * 8 + 2c + (e & 1) is bit ni * 8 + (e & 1) after the shift by 2c: constant shifts below.
    const uint64_t keys_g = s_keys[warp * 16 + g] >> (2 * c), keys_g8 = s_keys[warp * 16 + g + 8] >> (2 * c);
    float mx0 = -INFINITY, mx1 = -INFINITY;
#pragma unroll
    for (int ni = 0; ni < 8; ++ni) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const bool visible = ((e < 2 ? keys_g : keys_g8) >> (ni * 8 + (e & 1))) & 1;
        const float v = visible ? s[ni][e] * scale : -INFINITY;
        s[ni][e] = v;
        if (e < 2) mx0 = fmaxf(mx0, v); else mx1 = fmaxf(mx1, v);
      }
    }
#pragma unroll
    for (int off = 1; off <= 2; off <<= 1) {
      mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, off));
      mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, off));
    }
    const float mn0 = fmaxf(m0, mx0), mn1 = fmaxf(m1, mx1);
    // A row with nothing visible yet (rows past `rows`, masked rows) keeps m = -inf: subtract 0 instead (p = 0);
    // a row that never sees a key ends with l = 0 and writes zeros.
    const float base0 = mn0 == -INFINITY ? 0.0f : mn0, base1 = mn1 == -INFINITY ? 0.0f : mn1;
    const float corr0 = __expf(m0 - base0), corr1 = __expf(m1 - base1);
    float sum0 = 0.0f, sum1 = 0.0f;
#pragma unroll
    for (int ni = 0; ni < 8; ++ni) {
      s[ni][0] = __expf(s[ni][0] - base0);
      s[ni][1] = __expf(s[ni][1] - base0);
      s[ni][2] = __expf(s[ni][2] - base1);
      s[ni][3] = __expf(s[ni][3] - base1);
      sum0 += s[ni][0] + s[ni][1];
      sum1 += s[ni][2] + s[ni][3];
    }
    l0 = l0 * corr0 + sum0;
    l1 = l1 * corr1 + sum1;
    m0 = mn0;
    m1 = mn1;
#pragma unroll
    for (int dt = 0; dt < D / 8; ++dt) {
      o[dt][0] *= corr0;
      o[dt][1] *= corr0;
      o[dt][2] *= corr1;
      o[dt][3] *= corr1;
    }
    // O += P V: P from the S accumulators as bf16 A fragments, V through ldmatrix.trans.
#pragma unroll
    for (int kk = 0; kk < kKeys / 16; ++kk) {
      uint32_t a[4];
      a[0] = pack_bf16x2(s[2 * kk][0], s[2 * kk][1]);
      a[1] = pack_bf16x2(s[2 * kk][2], s[2 * kk][3]);
      a[2] = pack_bf16x2(s[2 * kk + 1][0], s[2 * kk + 1][1]);
      a[3] = pack_bf16x2(s[2 * kk + 1][2], s[2 * kk + 1][3]);
#pragma unroll
      for (int dn = 0; dn < D / 16; ++dn) {
        uint32_t r[4];
        ldmatrix_x4_trans(r, Vs + (kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * kS + dn * 16 + (lane >> 4) * 8);
        mma_16816(o[2 * dn], a, r[0], r[1]);
        mma_16816(o[2 * dn + 1], a, r[2], r[3]);
      }
    }
    __syncthreads();  // K/V are overwritten next
  }

#pragma unroll
  for (int off = 1; off <= 2; off <<= 1) {
    l0 += __shfl_xor_sync(0xffffffffu, l0, off);
    l1 += __shfl_xor_sync(0xffffffffu, l1, off);
  }
  const float inv0 = l0 > 0.0f ? 1.0f / l0 : 0.0f, inv1 = l1 > 0.0f ? 1.0f / l1 : 0.0f;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int row = row0 + warp * 16 + g + 8 * half;
    if (row >= rows) continue;
    const float inv = half ? inv1 : inv0;
    const float* grow = gate + (static_cast<size_t>(row) * heads + h) * head_stride;
    float* orow = out + (static_cast<size_t>(row) * heads + h) * D;
#pragma unroll
    for (int dt = 0; dt < D / 8; ++dt) {
      const int d = dt * 8 + 2 * c;
      const float2 gv = *reinterpret_cast<const float2*>(grow + d);
      *reinterpret_cast<float2*>(orow + d) =
          make_float2(o[dt][2 * half] * inv * sigmoidf(gv.x), o[dt][2 * half + 1] * inv * sigmoidf(gv.y));
    }
  }
}

template <int D>
void launch_d(const KvPages& cache, const float* q, const float* gate, int head_stride, const int32_t* positions,
              int rows, int heads, int kv_heads, const uint32_t* block_mask, int mask_words, int ratio, float* out,
              cudaStream_t stream) {
  constexpr size_t bytes = smem_bytes<D>();
  static const bool ready = [] {
    IMP_CUDA_CHECK(cudaFuncSetAttribute(attention_prefill_kernel<D, true>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
    IMP_CUDA_CHECK(cudaFuncSetAttribute(attention_prefill_kernel<D, false>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
    return true;
  }();
  (void)ready;
  const dim3 grid((rows + kRows - 1) / kRows, heads);
  if (cache.bf16) {
    attention_prefill_kernel<D, true><<<grid, kThreads, bytes, stream>>>(cache, q, gate, head_stride, positions, rows, heads, kv_heads,
                                                                                block_mask, mask_words, ratio, out);
  } else {
    attention_prefill_kernel<D, false><<<grid, kThreads, bytes, stream>>>(cache, q, gate, head_stride, positions, rows, heads, kv_heads,
                                                                                block_mask, mask_words, ratio, out);
  }
  IMP_CUDA_CHECK_LAUNCH();
}

}  // namespace

void launch_attention_prefill(const KvPages& cache, const float* q, const float* gate, int32_t head_stride,
                              const int32_t* positions, int32_t rows, int32_t heads, int32_t kv_heads,
                              int32_t head_dim, float* out, cudaStream_t stream, const uint32_t* block_mask,
                              int32_t mask_words, int32_t ratio) {
  if (kv_heads <= 0 || heads % kv_heads != 0) throw_invalid_launch("attention prefill: heads must be a multiple of kv heads");
  if (head_stride % 4 != 0 || (reinterpret_cast<uintptr_t>(q) | reinterpret_cast<uintptr_t>(gate)) % 16 != 0) {
    throw_invalid_launch("attention prefill: q and gate must be 16-byte aligned with head_stride % 4 == 0");
  }
  if (block_mask != nullptr && (ratio < 1 || mask_words < 1)) {
    throw_invalid_launch("attention prefill: a block mask needs ratio >= 1 and mask_words >= 1");
  }
  if (rows <= 0) return;
  switch (head_dim) {
    case 32: return launch_d<32>(cache, q, gate, head_stride, positions, rows, heads, kv_heads, block_mask, mask_words, ratio, out, stream);
    case 64: return launch_d<64>(cache, q, gate, head_stride, positions, rows, heads, kv_heads, block_mask, mask_words, ratio, out, stream);
    case 128: return launch_d<128>(cache, q, gate, head_stride, positions, rows, heads, kv_heads, block_mask, mask_words, ratio, out, stream);
    case 256: return launch_d<256>(cache, q, gate, head_stride, positions, rows, heads, kv_heads, block_mask, mask_words, ratio, out, stream);
    default: throw_invalid_launch("attention prefill: head_dim must be 32, 64, 128 or 256");
  }
}

}  // namespace imp::cuda
