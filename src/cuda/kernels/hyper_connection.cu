#include "cuda/kernels/hyper_connection.h"

#include <cuda_bf16.h>

#include <algorithm>
#include <type_traits>

#include "cuda/check.h"
#include "cuda/launch.h"
#include "cuda/kernels/device_math.cuh"
#include "cuda/kernels/fp_codes.cuh"
#include "cuda/kernels/prefill_common.cuh"

namespace imp::cuda {
namespace {

constexpr int kThreads = 256;

// raw_low [rows, rank] and raw_inject [rows, injects] (the down and inject projections) -> low [rows, rank] =
// silu(v / S) and inject [rows, injects] = 2 sigmoid(v / S).
__global__ void hc_activations_kernel(const float* raw_low, const float* raw_inject, int rows, int rank, int injects,
                                      float inv_streams, float* low, float* inject) {
  pdl_begin();
  const int width = rank + injects;
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= static_cast<int64_t>(rows) * width) return;
  const int64_t row = i / width;
  const int col = static_cast<int>(i - row * width);
  if (col < rank) {
    const float x = raw_low[row * rank + col] * inv_streams;
    low[row * rank + col] = x * sigmoidf(x);
  } else {
    const float x = raw_inject[row * injects + col - rank] * inv_streams;
    inject[row * injects + col - rank] = 2.0f * sigmoidf(x);
  }
}

// N from its two bf16 terms (launch_split_bf16's hi and lo), kVec values at element offset i.
template <int kVec>
__device__ __forceinline__ void load_split_terms(const uint16_t* hi, const uint16_t* lo, size_t i, float (&n)[kVec]) {
  if constexpr (kVec == 4) {
    const uint2 h = *reinterpret_cast<const uint2*>(hi + i), l = *reinterpret_cast<const uint2*>(lo + i);
    const uint32_t hw[4] = {h.x & 0xffffu, h.x >> 16, h.y & 0xffffu, h.y >> 16};
    const uint32_t lw[4] = {l.x & 0xffffu, l.x >> 16, l.y & 0xffffu, l.y >> 16};
#pragma unroll
    for (int v = 0; v < 4; ++v) n[v] = bf16_bits_to_float(hw[v]) + bf16_bits_to_float(lw[v]);
  } else {
    n[0] = bf16_bits_to_float(hi[i]) + bf16_bits_to_float(lo[i]);
  }
}

// One output per thread, or with kVec = 4 four adjacent ones through 16- and 8-byte loads (d % 4 == 0); the same
// arithmetic per output either way. x also as its two bf16 terms (x_hi, x_lo: the next GEMMs' input).
template <int kVec>
__global__ void hc_mix_kernel(const float* mix, const uint16_t* normed_hi, const uint16_t* normed_lo, int streams, int d,
                              float* x, __nv_bfloat16* x_hi, __nv_bfloat16* x_lo) {
  pdl_begin();
  using V = std::conditional_t<kVec == 4, float4, float>;
  const int row = blockIdx.y, j = (blockIdx.x * blockDim.x + threadIdx.x) * kVec;
  if (j >= d) return;
  const size_t base = static_cast<size_t>(row) * streams * d + j;
  float sum[kVec] = {};
  for (int s = 0; s < streams; ++s) {
    const V m = *reinterpret_cast<const V*>(mix + base + static_cast<size_t>(s) * d);
    float nf[kVec];
    load_split_terms<kVec>(normed_hi, normed_lo, base + static_cast<size_t>(s) * d, nf);
    const float* mf = reinterpret_cast<const float*>(&m);
#pragma unroll
    for (int v = 0; v < kVec; ++v) sum[v] += sigmoidf(mf[v]) * nf[v];
  }
  V out;
  float* of = reinterpret_cast<float*>(&out);
#pragma unroll
  for (int v = 0; v < kVec; ++v) of[v] = sum[v] * (1.0f / static_cast<float>(streams));
  const size_t at = static_cast<size_t>(row) * d + j;
  if (x != nullptr) *reinterpret_cast<V*>(x + at) = out;
  if constexpr (kVec == 4) {
    prefill::split_bf16x4(out, *reinterpret_cast<uint2*>(x_hi + at), *reinterpret_cast<uint2*>(x_lo + at));
  } else {
    const __nv_bfloat16 hi = __float2bfloat16_rn(out);
    x_hi[at] = hi;
    x_lo[at] = __float2bfloat16_rn(out - __bfloat162float(hi));
  }
}

__global__ void hc_write_kernel(const float* y, const float* inject, int streams, int d, float* rows) {
  pdl_begin();
  const int row = blockIdx.y, j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= d) return;
  hc_write_value(rows + static_cast<size_t>(row) * streams * d, static_cast<size_t>(d), static_cast<size_t>(j),
                 inject + static_cast<size_t>(row) * streams, streams, y[static_cast<size_t>(row) * d + j]);
}

// The pieces both write/norm/split kernels share, so their values stay the same bit for bit.
// Each stream's inverse RMS from the warps' partial sums of squares (partial[s][warp]), by the first warp; the
// caller's barrier follows.
__device__ __forceinline__ void streams_inv_rms(const float (&partial)[kMaxHcStreams][32], int streams, int d, float eps,
                                                float* inv_s) {
  if (threadIdx.x < kWarp) {
    for (int s = 0; s < streams; ++s) {
      const float t = warp_sum(threadIdx.x < blockDim.x / kWarp ? partial[s][threadIdx.x] : 0.0f);
      if (threadIdx.x == 0) inv_s[s] = rsqrtf(t / static_cast<float>(d) + eps);
    }
  }
}

// Quad i of stream s, v, normed with inv and the (1 + w) weight wv, written as its split terms at quad `at + i`;
// the inject logits of the normed quad added into logit.
template <int kMaxInjects>
__device__ __forceinline__ void norm_split_quad(float4 v, float inv, uint2 wv, size_t at, int i, int s, int d,
                                                size_t width, const uint16_t* inject_w, int injects, __nv_bfloat16* hi,
                                                __nv_bfloat16* lo, float (&logit)[kMaxInjects > 0 ? kMaxInjects : 1]) {
  const float4 o = make_float4(v.x * inv * (1.0f + bf16_bits_to_float(wv.x & 0xffffu)),
                               v.y * inv * (1.0f + bf16_bits_to_float(wv.x >> 16)),
                               v.z * inv * (1.0f + bf16_bits_to_float(wv.y & 0xffffu)),
                               v.w * inv * (1.0f + bf16_bits_to_float(wv.y >> 16)));
  prefill::split_bf16x4(o, reinterpret_cast<uint2*>(hi)[at + i], reinterpret_cast<uint2*>(lo)[at + i]);
#pragma unroll
  for (int k = 0; k < kMaxInjects; ++k) {
    if (k < injects) {
      const uint2 iw = reinterpret_cast<const uint2*>(inject_w + static_cast<size_t>(k) * width + s * d)[i];
      logit[k] += o.x * bf16_bits_to_float(iw.x & 0xffffu) + o.y * bf16_bits_to_float(iw.x >> 16) +
                  o.z * bf16_bits_to_float(iw.y & 0xffffu) + o.w * bf16_bits_to_float(iw.y >> 16);
    }
  }
}

// The threads' inject logits summed over the block into raw_inject[row, :injects] (partial is free: the norm sums
// were read before the caller's last barrier). Every thread calls it.
template <int kMaxInjects>
__device__ __forceinline__ void write_inject_logits(const float (&logit)[kMaxInjects > 0 ? kMaxInjects : 1], int injects,
                                                    float (&partial)[kMaxHcStreams][32], size_t row, float* raw_inject) {
  if (injects == 0) return;
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
#pragma unroll
  for (int k = 0; k < kMaxInjects; ++k) {
    if (k < injects) {
      const float t = warp_sum(logit[k]);
      if (lane == 0) partial[k][warp] = t;
    }
  }
  __syncthreads();
  if (warp == 0) {
    for (int k = 0; k < injects; ++k) {
      const float t = warp_sum(lane < blockDim.x / kWarp ? partial[k][lane] : 0.0f);
      if (lane == 0) raw_inject[row * injects + k] = t;
    }
  }
}

// One block per row (see launch_hc_write_norm_split). Each stream's quads are visited by the threads in the
// order of rms_norm_kernel<4>, and its sums meet through the same reduction, so every value matches the three
// kernels it replaces bit for bit. The second pass reads back the row this block wrote (L1/L2) and, with inject
// weights (injects <= kMaxInjects rows of streams * d, read through L1: every block reads the same ones), sums the
// inject logits of the normed row. kMaxInjects 4 for the released S = 4 keeps the kernel at 32 registers (eight
// blocks per SM: it is bound by the bytes it moves).
template <int kMaxInjects>
__global__ void __launch_bounds__(256, kMaxInjects > 4 ? 6 : 8)
    hc_write_norm_split_kernel(const float* y, const float* inject, int streams, int d, float* stream_rows,
                               const uint16_t* nw, float eps, const uint16_t* inject_w, int injects, float* raw_inject,
                               __nv_bfloat16* hi, __nv_bfloat16* lo) {
  pdl_begin();
  __shared__ float partial[kMaxHcStreams][32];
  __shared__ float inv_s[kMaxHcStreams];
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp, quads = d / 4;
  const size_t row = blockIdx.x, width = static_cast<size_t>(streams) * d;
  const float4* y4 = reinterpret_cast<const float4*>(y + row * d);
  for (int s = 0; s < streams; ++s) {
    const float a = inject[row * streams + s];
    float4* h4 = reinterpret_cast<float4*>(stream_rows + row * width + static_cast<size_t>(s) * d);
    float sum = 0.0f;
    for (int i = threadIdx.x; i < quads; i += blockDim.x) {
      const float4 h = h4[i], v = y4[i];
      const float4 n = make_float4(h.x + a * v.x, h.y + a * v.y, h.z + a * v.z, h.w + a * v.w);
      h4[i] = n;
      sum += n.x * n.x + n.y * n.y + n.z * n.z + n.w * n.w;
    }
    sum = warp_sum(sum);
    if (lane == 0) partial[s][warp] = sum;
  }
  __syncthreads();
  streams_inv_rms(partial, streams, d, eps, inv_s);
  __syncthreads();  // also orders this block's stream writes before the reads below
  float logit[kMaxInjects > 0 ? kMaxInjects : 1] = {};
  for (int s = 0; s < streams; ++s) {
    const float inv = inv_s[s];
    const size_t at = (row * width + static_cast<size_t>(s) * d) / 4;  // in quads
    const float4* h4 = reinterpret_cast<const float4*>(stream_rows) + at;
    const uint2* w = reinterpret_cast<const uint2*>(nw + static_cast<size_t>(s) * d);
    for (int i = threadIdx.x; i < quads; i += blockDim.x) {
      norm_split_quad<kMaxInjects>(h4[i], inv, w[i], at, i, s, d, width, inject_w, injects, hi, lo, logit);
    }
  }
  write_inject_logits<kMaxInjects>(logit, injects, partial, row, raw_inject);
}

// hc_write_norm_split_kernel with the row held in registers, for S <= kRowStreams and kQuads quads per thread and
// stream (1 up to 640 quads, the released shape's 4 streams of 640; 3 up to 768): every load of the row is issued
// before any is used, and the second pass reads the registers instead of the row it wrote. The other kernel, one
// stream's quads at a time, has a load, an add and a store per round trip and reads the row back: 213.9 us per
// 4096-row call for its 492 MB of HBM traffic (2.3 TB/s), this one 170.7 us (H200, session 17: pp 4096 +1.2%).
// Up to 640 quads per stream (the released shape) it takes one quad per thread and stream: 640 threads at 48
// registers, two blocks (40 warps) per SM instead of 256 threads at 104 registers (16 warps), so that more loads
// are in flight while other blocks reduce (pp 4096 +0.7%, session 31; three blocks of 256 threads: -0.8%). Its
// sums then run in another order than launch_rms_norm's (256 threads): its norms may differ in the last bit.
// With more quads per thread, the same per-thread quads and reductions as hc_write_norm_split_kernel (bit for bit).
constexpr int kRowStreams = 4;
template <int kMaxInjects, int kQuads>
__global__ void __launch_bounds__(kQuads == 1 ? 640 : 256, 2)
    hc_write_norm_split_row_kernel(const float* y, const float* inject, int streams, int d, float* stream_rows,
                                   const uint16_t* nw, float eps, const uint16_t* inject_w, int injects,
                                   float* raw_inject, __nv_bfloat16* hi, __nv_bfloat16* lo) {
  pdl_begin();
  __shared__ float partial[kMaxHcStreams][32];
  __shared__ float inv_s[kRowStreams];
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp, quads = d / 4;
  const size_t row = blockIdx.x, width = static_cast<size_t>(streams) * d;
  const float4* y4 = reinterpret_cast<const float4*>(y + row * d);
  float4* row4 = reinterpret_cast<float4*>(stream_rows + row * width);
  float4 v[kQuads], h[kRowStreams][kQuads];
  float a[kRowStreams];
#pragma unroll
  for (int q = 0; q < kQuads; ++q) {
    const int i = threadIdx.x + q * blockDim.x;
    if (i < quads) v[q] = y4[i];
  }
#pragma unroll
  for (int s = 0; s < kRowStreams; ++s) {
    if (s >= streams) break;
    a[s] = inject[row * streams + s];
#pragma unroll
    for (int q = 0; q < kQuads; ++q) {
      const int i = threadIdx.x + q * blockDim.x;
      if (i < quads) h[s][q] = row4[s * quads + i];
    }
  }
#pragma unroll
  for (int s = 0; s < kRowStreams; ++s) {
    if (s >= streams) break;
    float sum = 0.0f;
#pragma unroll
    for (int q = 0; q < kQuads; ++q) {
      const int i = threadIdx.x + q * blockDim.x;
      if (i < quads) {
        const float4 o = h[s][q], w = v[q];
        const float4 n = make_float4(o.x + a[s] * w.x, o.y + a[s] * w.y, o.z + a[s] * w.z, o.w + a[s] * w.w);
        row4[s * quads + i] = n;
        h[s][q] = n;
        sum += n.x * n.x + n.y * n.y + n.z * n.z + n.w * n.w;
      }
    }
    sum = warp_sum(sum);
    if (lane == 0) partial[s][warp] = sum;
  }
  __syncthreads();
  streams_inv_rms(partial, streams, d, eps, inv_s);
  __syncthreads();
  float logit[kMaxInjects > 0 ? kMaxInjects : 1] = {};
#pragma unroll
  for (int s = 0; s < kRowStreams; ++s) {
    if (s >= streams) break;
    const float inv = inv_s[s];
    const size_t at = (row * width + static_cast<size_t>(s) * d) / 4;  // in quads
    const uint2* w = reinterpret_cast<const uint2*>(nw + static_cast<size_t>(s) * d);
#pragma unroll
    for (int q = 0; q < kQuads; ++q) {
      const int i = threadIdx.x + q * blockDim.x;
      if (i >= quads) break;
      norm_split_quad<kMaxInjects>(h[s][q], inv, w[i], at, i, s, d, width, inject_w, injects, hi, lo, logit);
    }
  }
  write_inject_logits<kMaxInjects>(logit, injects, partial, row, raw_inject);
}

// 8 bf16 values from 16 bytes.
__device__ __forceinline__ void load8_bf16(const uint16_t* p, float* out) {
  const uint4 packed = *reinterpret_cast<const uint4*>(p);
  const uint32_t words[4] = {packed.x, packed.y, packed.z, packed.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    out[2 * i] = bf16_bits_to_float(words[i] & 0xffffu);
    out[2 * i + 1] = bf16_bits_to_float(words[i] >> 16);
  }
}

// Per-block SM-clock stamps of thread 0 in the decode read kernels (read-down 0, up/mix 1), for
// bench/experiments/hc_read_phase_probe.cu, which compiles this file with IMP_PHASE_PROBE; no-ops otherwise.
#ifdef IMP_PHASE_PROBE
__device__ long long g_hc_phase[2][512][8];
__device__ __forceinline__ void hc_phase(int kernel, int i) {
  if (threadIdx.x == 0 && blockIdx.x < 512) g_hc_phase[kernel][blockIdx.x][i] = clock64();
}
#else
__device__ __forceinline__ void hc_phase(int, int) {}
#endif

// Decode reads stream ~13 MB of weights per layer in two launches, so both kernels are built for bytes
// in flight: every warp issues all the 16-byte weight loads of its piece before it uses any of them.
constexpr int kReadBatch = 8;  // 16-byte loads issued together per lane
constexpr int kDownRows = 3;   // rows of down_inject per read-down block: the loaded stream serves them all.
                               // 3 (108 blocks at the released shape, at most one per SM): decode +1.4% against 2
                               // (162 blocks: 30 SMs held two); 4 (81 blocks) gained less (session 19)
constexpr int kDownBatch = 5;  // weight loads per lane and row issued together: one batch at the released shape
                               // (d = 2560 in 2 parts: 160 chunks per warp)

// One warp per (group g, part p of the group's d inputs) for each of the block's kDownRows rows of down_inject:
// a = sum w * (1 + nw) * s and b = sum s^2 over the part. A block holds all S * P pieces of its rows and combines
// them: a row's value is sum_g a_g * rsqrt(b_g / d + eps), i.e. the GEMV of the normalised stream. Parts spread
// the rows over enough warps to keep most SMs busy (108 blocks of 3 rows x 4 groups x 2 parts at the released
// shape). The norm weight is staged in shared memory by cp.async before the wait; right after it, each warp loads
// the stream values of its piece, all of a batch in one round trip (read where each chunk is used, they were one
// dependent L2 round trip per chunk, five per lane at the released shape; staged in shared memory as well, the block
// took 61 KB of it instead of 20 and decode was 1.8% slower, session 33).
static_assert(kDownRows * kMaxHcStreams <= kWarp, "warp 0 finishes all of a block's rows");
__global__ void hc_read_down_kernel(const float* s, const uint16_t* nw, const uint16_t* w, int rows_out, int rank,
                                    int streams, int parts, int d, float eps, float* low, float* inv_rms) {
  hc_phase(0, 0);
  pdl_trigger();  // weights first; pdl_wait() before the stream is read (device_math.cuh)
  extern __shared__ __align__(16) uint8_t staged[];
  __shared__ float sa[kDownRows][kMaxHcStreams * 4], sb[kMaxHcStreams * 4];
  const int width = streams * d;
  uint16_t* nw_sm = reinterpret_cast<uint16_t*>(staged);  // [width]
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  const int r0 = blockIdx.x * kDownRows, g = warp / parts, part = warp % parts;
  const int chunks = d / 8, per = (chunks + parts - 1) / parts;
  const int first = part * per, last = min(chunks, first + per);
  const size_t group_at = static_cast<size_t>(g) * d;
  const uint4* rows[kDownRows];
#pragma unroll
  for (int i = 0; i < kDownRows; ++i) rows[i] = reinterpret_cast<const uint4*>(w + static_cast<size_t>(min(r0 + i, rows_out - 1)) * width + group_at);
  uint4 wv[kDownRows][kDownBatch];
  auto load_batch = [&](int c0) {
#pragma unroll
    for (int i = 0; i < kDownRows; ++i) {
#pragma unroll
      for (int b = 0; b < kDownBatch; ++b) {
        const int c = c0 + b * kWarp;
        if (c < last && r0 + i < rows_out) wv[i][b] = load_weight16(rows[i] + c);
      }
    }
  };
  load_batch(first + lane);
  for (int i = threadIdx.x; i < width / 8; i += blockDim.x) cp_async16(nw_sm + 8 * i, nw + 8 * i);
  cp_async_commit();
  const float* sg = s + group_at;
  float4 sv4[kDownBatch][2];  // the stream values of a batch's chunks, loaded in one round trip (L2: just written)
  auto load_stream = [&](int c0) {
#pragma unroll
    for (int bi = 0; bi < kDownBatch; ++bi) {
      const int c = c0 + bi * kWarp;
      if (c < last) {
        sv4[bi][0] = __ldcg(reinterpret_cast<const float4*>(sg + 8 * c));
        sv4[bi][1] = __ldcg(reinterpret_cast<const float4*>(sg + 8 * c + 4));
      }
    }
  };
  pdl_wait();
  hc_phase(0, 1);
  load_stream(first + lane);
  cp_async_wait_all();
  __syncthreads();  // the norm weight, staged by every thread
  hc_phase(0, 2);
  const uint16_t* nwg = nw_sm + group_at;
  float a[kDownRows], b = 0.0f;
#pragma unroll
  for (int i = 0; i < kDownRows; ++i) a[i] = 0.0f;
  for (int c0 = first + lane; c0 < last; c0 += kWarp * kDownBatch) {
    if (c0 != first + lane) {
      load_batch(c0);
      load_stream(c0);
    }
#pragma unroll
    for (int bi = 0; bi < kDownBatch; ++bi) {
      const int c = c0 + bi * kWarp;
      if (c >= last) break;
      float nf[8];
      load8_bf16(nwg + 8 * c, nf);
      const float4 s0 = sv4[bi][0], s1 = sv4[bi][1];
      const float sv[8] = {s0.x, s0.y, s0.z, s0.w, s1.x, s1.y, s1.z, s1.w};
      float ns[8];  // (1 + w) * s once for the block's rows (per row it was 8 more multiplies; decode +0.2%)
#pragma unroll
      for (int k = 0; k < 8; ++k) ns[k] = (1.0f + nf[k]) * sv[k];
#pragma unroll
      for (int i = 0; i < kDownRows; ++i) {
        float wf[8];
        const uint32_t words[4] = {wv[i][bi].x, wv[i][bi].y, wv[i][bi].z, wv[i][bi].w};
#pragma unroll
        for (int k = 0; k < 4; ++k) {
          wf[2 * k] = bf16_bits_to_float(words[k] & 0xffffu);
          wf[2 * k + 1] = bf16_bits_to_float(words[k] >> 16);
        }
#pragma unroll
        for (int k = 0; k < 8; ++k) a[i] += wf[k] * ns[k];
      }
#pragma unroll
      for (int k = 0; k < 8; ++k) b += sv[k] * sv[k];
    }
  }
  hc_phase(0, 3);
#pragma unroll
  for (int i = 0; i < kDownRows; ++i) a[i] = warp_sum(a[i]);
  b = warp_sum(b);
  if (lane == 0) {
#pragma unroll
    for (int i = 0; i < kDownRows; ++i) sa[i][warp] = a[i];
    sb[warp] = b;
  }
  __syncthreads();
  hc_phase(0, 4);
  // Warp 0 finishes: lane (i, gg) of the first kDownRows * streams lanes takes row r0 + i's term of group gg, all
  // at once (as one thread per row, the groups' loads, divisions and square roots were a serial chain); the row's
  // lane gg = 0 adds the terms in group order, as that thread did (the same sums, bit for bit).
  if (warp != 0) return;
  const int i = lane / streams, gg = lane % streams, r = r0 + i;
  float ga = 0.0f, inv = 0.0f;
  if (i < kDownRows) {
    float gb = 0.0f;
    for (int p = 0; p < parts; ++p) {
      ga += sa[i][gg * parts + p];
      gb += sb[gg * parts + p];
    }
    inv = rsqrtf(gb / static_cast<float>(d) + eps);
    if (r == 0) inv_rms[gg] = inv;
  }
  float value = 0.0f;
  const int row_lane = min(i, kDownRows - 1) * streams;
  for (int g = 0; g < streams; ++g) {
    value += __shfl_sync(0xffffffffu, ga, row_lane + g) * __shfl_sync(0xffffffffu, inv, row_lane + g);
  }
  if (i >= kDownRows || gg != 0 || r >= rows_out) return;
  const float v = value / static_cast<float>(streams);
  low[r] = r < rank ? v * sigmoidf(v) : 2.0f * sigmoidf(v);
  hc_phase(0, 5);
}

// One warp per output column j: the S dots up[g*d + j] . low[0..rank), each by its own segment of L lanes (L the
// largest power of two with S * L <= 32; 8 at the released S = 4: five 16-byte loads per lane, all issued up front),
// then x[j] = mean_g sigmoid(dot_g) * normed[g, j]. A lane works on one stream only, so its chunks need no
// per-chunk stream lookup (a division and a select over the S sums) and the sums reduce within segments: dots and
// sums 2.2 -> 1.8 us after the staging in the phase probe, decode +0.3% (session 19; the lanes were spread over all
// S * rank / 8 chunks). After the wait, low is staged in shared memory by cp.async while each segment's first lane
// loads its stream's value and norm scale: one round trip.
__global__ void hc_read_up_mix_kernel(const float* s, const uint16_t* nw, const float* inv_rms, const uint16_t* up,
                                      int up_stride, const float* low, int rank, int streams, int d, float* x) {
  hc_phase(1, 0);
  pdl_trigger();  // weights first; pdl_wait() before low and the stream are read
  extern __shared__ __align__(16) float low_sm[];  // [rank]
  const int lane = threadIdx.x % kWarp;
  const int j = blockIdx.x * (blockDim.x / kWarp) + threadIdx.x / kWarp;
  const bool live = j < d;  // every thread reaches the barrier below
  int seg = kWarp;
  while (seg * streams > kWarp) seg /= 2;
  const int g = lane / seg, sub = lane % seg, per_row = rank / 8;
  const bool active = live && g < streams;
  const uint4* row = reinterpret_cast<const uint4*>(up + (static_cast<size_t>(active ? g : 0) * d + (live ? j : 0)) * up_stride);
  uint4 wv[kReadBatch];
  auto load_batch = [&](int c0) {
#pragma unroll
    for (int i = 0; i < kReadBatch; ++i) {
      const int c = c0 + i * seg;
      if (active && c < per_row) wv[i] = load_weight16(row + c);
    }
  };
  load_batch(sub);
  const bool own_stream = active && sub == 0;  // the segment's first lane holds stream g's terms of the mix
  const size_t at = static_cast<size_t>(g) * d + j;
  const float norm_w = own_stream ? 1.0f + bf16_bits_to_float(nw[at]) : 0.0f;
  pdl_wait();
  hc_phase(1, 1);
  for (int i = threadIdx.x; i < rank / 4; i += blockDim.x) cp_async16(low_sm + 4 * i, low + 4 * i);
  cp_async_commit();
  const float s_own = own_stream ? s[at] : 0.0f, inv_own = own_stream ? inv_rms[g] : 0.0f;
  cp_async_wait_all();
  __syncthreads();
  hc_phase(1, 2);
  if (!live) return;
  float dot = 0.0f;
  for (int c0 = sub; active && c0 < per_row; c0 += seg * kReadBatch) {
    if (c0 != sub) load_batch(c0);
#pragma unroll
    for (int i = 0; i < kReadBatch; ++i) {
      const int c = c0 + i * seg;
      if (c >= per_row) break;
      float wf[8];
      const uint32_t words[4] = {wv[i].x, wv[i].y, wv[i].z, wv[i].w};
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        wf[2 * k] = bf16_bits_to_float(words[k] & 0xffffu);
        wf[2 * k + 1] = bf16_bits_to_float(words[k] >> 16);
      }
      const float4 l0 = *reinterpret_cast<const float4*>(low_sm + 8 * c);
      const float4 l1 = *reinterpret_cast<const float4*>(low_sm + 8 * c + 4);
      dot += wf[0] * l0.x + wf[1] * l0.y + wf[2] * l0.z + wf[3] * l0.w + wf[4] * l1.x + wf[5] * l1.y + wf[6] * l1.z +
             wf[7] * l1.w;
    }
  }
  hc_phase(1, 3);
  for (int offset = seg / 2; offset > 0; offset /= 2) dot += __shfl_xor_sync(0xffffffffu, dot, offset);
  const float term = own_stream ? sigmoidf(dot) * s_own * inv_own * norm_w : 0.0f;
  float sum = 0.0f;  // in stream order
  for (int gg = 0; gg < streams; ++gg) sum += __shfl_sync(0xffffffffu, term, gg * seg);
  if (lane == 0) x[j] = sum / static_cast<float>(streams);
  hc_phase(1, 4);
}

// hc_read_down_kernel stages 2 bytes per stream value (the norm weight); its dynamic shared-memory limit is raised
// once per process to what the device allows (in relaxed capture mode: the first decode step may be being captured).
size_t hc_read_down_shared_limit() {
  static const size_t limit = [] {
    cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    IMP_CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&mode));
    int device = 0, optin = 0;
    cudaError_t status = cudaGetDevice(&device);
    if (status == cudaSuccess) status = cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
    const int room = optin - static_cast<int>((kDownRows + 1) * kMaxHcStreams * 4 * sizeof(float));  // less the static sums
    if (status == cudaSuccess) {
      status = cudaFuncSetAttribute(hc_read_down_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, room);
    }
    IMP_CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&mode));
    IMP_CUDA_CHECK(status);
    return static_cast<size_t>(room);
  }();
  return limit;
}

}  // namespace

void launch_hc_read_down(const float* stream_row, const uint16_t* norm_weight, const uint16_t* down_inject, int32_t rows_out,
                         int32_t rank, int32_t streams, int32_t d, float eps, float* low, float* inv_rms, cudaStream_t stream) {
  if (d % 8 != 0 || streams > kMaxHcStreams || streams < 1) throw_invalid_launch("hc_read_down: d % 8 != 0 or streams outside [1, 8]");
  const int parts = std::max(1, 8 / streams);  // 8 warps per row when S divides 8 (S * parts <= 32)
  const size_t staged = static_cast<size_t>(streams) * d * sizeof(uint16_t);
  if (staged > hc_read_down_shared_limit()) {
    throw_invalid_launch("hc_read_down: streams * d too large to stage the norm weight in shared memory");
  }
  if (reinterpret_cast<uintptr_t>(stream_row) % 16 != 0 || reinterpret_cast<uintptr_t>(norm_weight) % 16 != 0) {
    throw_invalid_launch("hc_read_down: stream row and norm weight must be 16-byte aligned");
  }
  launch_kernel(hc_read_down_kernel, (rows_out + kDownRows - 1) / kDownRows, streams * parts * kWarp, staged, stream, 1,
                stream_row, norm_weight, down_inject, rows_out, rank,
                                                                       streams, parts, d, eps, low, inv_rms);
}

void launch_hc_read_up_mix(const float* stream_row, const uint16_t* norm_weight, const float* inv_rms, const uint16_t* up,
                           int32_t up_stride, const float* low, int32_t rank, int32_t streams, int32_t d, float* x,
                           cudaStream_t stream) {
  if (rank % 8 != 0 || up_stride % 8 != 0 || up_stride < rank) {
    throw_invalid_launch("hc_read_up_mix: rank or up_stride not a multiple of 8, or up_stride < rank");
  }
  if (reinterpret_cast<uintptr_t>(low) % 16 != 0) throw_invalid_launch("hc_read_up_mix: low must be 16-byte aligned");
  constexpr int kWarps = 8;
  launch_kernel(hc_read_up_mix_kernel, (d + kWarps - 1) / kWarps, kWarps * kWarp, rank * sizeof(float), stream, 1,
                stream_row, norm_weight, inv_rms, up, up_stride, low, rank, streams, d, x);
}

void launch_hc_activations(const float* raw_low, const float* raw_inject, int32_t rows, int32_t rank, int32_t injects, int32_t streams, float* low,
                           float* inject, cudaStream_t stream) {
  const int64_t count = static_cast<int64_t>(rows) * (rank + injects);
  if (count == 0) return;
  launch_kernel(hc_activations_kernel, static_cast<unsigned>((count + kThreads - 1) / kThreads), kThreads, 0, stream, 1,
                raw_low, raw_inject, rows, rank, injects, 1.0f / static_cast<float>(streams), low, inject);
}

SplitActivations launch_hc_mix(const float* mix, const SplitActivations& normed, int32_t streams, int32_t d, float* x,
                               float* x_scratch, cudaStream_t stream) {
  if (normed.k != streams * d) throw_invalid_launch("hc_mix: the normed terms are not S * d wide");
  const int32_t rows = normed.rows;
  auto* x_hi = reinterpret_cast<__nv_bfloat16*>(x_scratch);
  __nv_bfloat16* x_lo = x_hi + static_cast<size_t>(rows) * d;
  const SplitActivations terms{reinterpret_cast<const uint16_t*>(x_hi), reinterpret_cast<const uint16_t*>(x_lo), rows, d};
  if (rows == 0) return terms;
  const bool vec = d % 4 == 0 && (reinterpret_cast<uintptr_t>(mix) | reinterpret_cast<uintptr_t>(x)) % 16 == 0 &&
                   (reinterpret_cast<uintptr_t>(normed.hi) | reinterpret_cast<uintptr_t>(normed.lo) |
                    reinterpret_cast<uintptr_t>(x_hi) | reinterpret_cast<uintptr_t>(x_lo)) % 8 == 0;
  if (vec) {
    constexpr int kVecThreads = 128;  // d = 2560: five blocks of 128 four-output threads per row
    launch_kernel(hc_mix_kernel<4>, dim3((d / 4 + kVecThreads - 1) / kVecThreads, rows), kVecThreads, 0, stream, 1,
                  mix, normed.hi, normed.lo, streams, d, x, x_hi, x_lo);
  } else {
    launch_kernel(hc_mix_kernel<1>, dim3((d + kThreads - 1) / kThreads, rows), kThreads, 0, stream, 1,
                  mix, normed.hi, normed.lo, streams, d, x, x_hi, x_lo);
  }
  return terms;
}

SplitActivations launch_hc_write_norm_split(const float* y, const float* inject, int32_t rows, int32_t streams,
                                            int32_t d, float* stream_rows, const uint16_t* norm_weight, float eps,
                                            const uint16_t* inject_weight, float* raw_inject, float* split_scratch,
                                            cudaStream_t stream) {
  if (d % 4 != 0 || streams < 1 || streams > kMaxHcStreams) {
    throw_invalid_launch("hc_write_norm_split: d % 4 != 0 or streams outside [1, 8]");
  }
  auto misaligned = [](const void* p, uintptr_t to) { return reinterpret_cast<uintptr_t>(p) % to != 0; };
  if (misaligned(y, 16) || misaligned(stream_rows, 16) || misaligned(norm_weight, 8) || misaligned(split_scratch, 16) ||
      misaligned(inject_weight, 8) || (inject_weight != nullptr && raw_inject == nullptr)) {
    throw_invalid_launch("hc_write_norm_split: y, streams and scratch 16-byte aligned, norm and inject weights 8-byte, "
                         "inject logits wherever inject weights are given");
  }
  const int injects = inject_weight != nullptr ? streams : 0;
  const size_t count = static_cast<size_t>(rows) * streams * d;
  auto* hi = reinterpret_cast<__nv_bfloat16*>(split_scratch);
  __nv_bfloat16* lo = hi + count;  // count % 4 == 0: 8-byte aligned
  if (rows > 0) {
    const int wide = (d / 4 + kWarp - 1) / kWarp * kWarp;  // a stream's quads, rounded up to whole warps
    int threads = std::min(256, wide);                        // as launch_rms_norm
    const int per_thread = (d / 4 + threads - 1) / threads;   // quads per thread and stream
    using Kernel = decltype(&hc_write_norm_split_kernel<0>);
    Kernel kernel = injects == 0   ? hc_write_norm_split_kernel<0>
                    : injects <= 4 ? hc_write_norm_split_kernel<4>
                                   : hc_write_norm_split_kernel<kMaxHcStreams>;
    if (streams <= kRowStreams && per_thread <= 3) {  // the row fits in registers
      const bool logits = injects > 0;
      if (wide <= 640) {  // one quad per thread and stream (see the kernel)
        threads = wide;
        kernel = logits ? hc_write_norm_split_row_kernel<4, 1> : hc_write_norm_split_row_kernel<0, 1>;
      } else {  // 641 to 768 quads: three per thread of 256
        kernel = logits ? hc_write_norm_split_row_kernel<4, 3> : hc_write_norm_split_row_kernel<0, 3>;
      }
    }
    launch_kernel(kernel, rows, threads, 0, stream, 1, y, inject, streams, d, stream_rows, norm_weight, eps,
                  inject_weight, injects, raw_inject, hi, lo);
  }
  return {reinterpret_cast<const uint16_t*>(hi), reinterpret_cast<const uint16_t*>(lo), rows, streams * d};
}

void launch_hc_write(const float* y, const float* inject, int32_t rows, int32_t streams, int32_t d, float* stream_rows,
                     cudaStream_t stream) {
  if (streams < 1 || streams > kMaxHcStreams) throw_invalid_launch("hc_write: streams outside [1, 8]");
  launch_kernel(hc_write_kernel, dim3((d + kThreads - 1) / kThreads, rows), kThreads, 0, stream, 1,
                y, inject, streams, d, stream_rows);
}

}  // namespace imp::cuda
