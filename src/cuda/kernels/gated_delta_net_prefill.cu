#include "cuda/kernels/gated_delta_net_prefill.h"

#include <cuda_fp16.h>

#include <algorithm>
#include <utility>

#include "cuda/check.h"
#include "cuda/launch.h"
#include "cuda/kernels/device_math.cuh"
#include "cuda/kernels/fp_codes.cuh"
#include "cuda/kernels/prefill_common.cuh"
#include "cuda/kernels/split_bf16_mma.cuh"
#include "cuda/kernels/wgmma_layout.cuh"
#include "cuda/kernels/wgmma_ops.cuh"

namespace imp::cuda {
namespace {

using namespace prefill;
using namespace split_bf16_mma;

constexpr int kC = 64;           // chunk length
constexpr int kMaxDim = 128;     // key_dim, value_dim

// f(i, c) for every i < rows, c < cols, over the block's kBlockThreads threads in the order of the flat index
// e = tid + k * kBlockThreads (i = e / cols, c = e % cols): the divisions once, then steps (cols is a runtime
// value, and a division per element cost more than the copies it indexes).
template <int kBlockThreads, typename F>
__device__ __forceinline__ void for_each_in_block(int rows, int cols, F f) {
  int i = threadIdx.x / cols, c = threadIdx.x % cols;
  const int di = kBlockThreads / cols, dc = kBlockThreads % cols;
  while (i < rows) {
    f(i, c);
    i += di;
    c += dc;
    if (c >= cols) {
      c -= cols;
      ++i;
    }
  }
}

// ---- workspace ---------------------------------------------------------------------------------------------

// Per (head, chunk) record, in units of floats: W and Kp (K e^(gamma_C - gamma)) as the scan's wgmma operands,
// each two bf16 images (hi, then lo: the 3xBF16 terms) in wgmma_layout.cuh's K-major layout, W with the chunk's
// rows as N and Kp with dk as N (the same 4 bytes per element as fp32); Qg (Q e^gamma) as the output kernel's A
// image (rows i, k = d); U as [slice][64][slice width] for the scan's 64-column slices (u_offset: each slice one
// bulk copy) in 64 x 64 floats per slice, which the scan overwrites with V' as the output kernel's B image per
// slice (rows: the slice's columns, k = i); Aqk ((Q K^T) * Gamma, zero above the diagonal) as an A image (rows i,
// k = j); gC (e^gamma_C), pad. After all records: the state at the start of every chunk, [head][chunk], as the
// output kernel's B image per slice (rows: the slice's columns, k = d).
constexpr int kSlice = 64;  // state columns per scan block and output slice: the m64 / n64 of their wgmmas

struct ChunkLayout {
  int dk, dv;
  __host__ __device__ size_t w() const { return 0; }
  __host__ __device__ size_t kp() const { return static_cast<size_t>(dk) * kC; }
  __host__ __device__ size_t qg() const { return 2 * static_cast<size_t>(dk) * kC; }
  __host__ __device__ size_t u() const { return 3 * static_cast<size_t>(dk) * kC; }
  __host__ __device__ size_t aqk() const { return u() + static_cast<size_t>(kC) * kSlice * slices(); }
  __host__ __device__ size_t gc() const { return aqk() + kC * kC; }
  __host__ __device__ size_t stride() const { return gc() + 4; }  // multiple of 4 floats: 16-byte records
  __host__ __device__ size_t state() const { return static_cast<size_t>(dk) * kSlice * slices(); }
  __host__ __device__ int slices() const { return (dv + kSlice - 1) / kSlice; }
};

// Offset (floats) of U[i][c] in a record's U: 64-column slices, the last one narrower when dv is not a multiple.
__host__ __device__ __forceinline__ size_t u_offset(int i, int c, int dv) {
  const int slice = c / kSlice, width = dv - slice * kSlice < kSlice ? dv - slice * kSlice : kSlice;
  return static_cast<size_t>(slice) * kC * kSlice + i * width + c % kSlice;
}

// ---- chunk preparation (state independent), one block per (chunk, head) ------------------------------------

constexpr int kThreads = 256;  // the prep kernel: 8 warps
constexpr int kLa = kC + 8;    // stride of the 64x64 matrices in shared memory (row pairs: 8 mod 32)
constexpr int kLr = 48 + 4;    // stride of R [16][48], read as column pairs (4 mod 8)

size_t prep_smem_floats(int dk, int dv) {
  const int lq = dk + 8, lv = dv + 4;
  return static_cast<size_t>(kC) * std::max(lq, lv) + static_cast<size_t>(kC) * lq + 2 * kC * kLa + 16 * kLr + 6 * kC;
}

// Per-block timestamps (SM clock) of thread 0 of each prep block after its barriers, for
// bench/experiments/gdn_scan_phase_probe.cu (IMP_PHASE_PROBE; no-ops otherwise): blocks below 4096.
#ifdef IMP_PHASE_PROBE
__device__ long long g_prep_phase[4096][8];
__device__ __forceinline__ void prep_phase(int i) {
  const int block = blockIdx.y * gridDim.x + blockIdx.x;
  if (threadIdx.x == 0 && block < 4096) g_prep_phase[block][i] = clock64();
}
#else
__device__ __forceinline__ void prep_phase(int) {}
#endif

__global__ void __launch_bounds__(kThreads, 2)
    chunk_prep_kernel(GatedDeltaNetShape shape, GatedDeltaNetWeightsDevice w, const float* __restrict__ conv_out,
                      const float* __restrict__ b, const float* __restrict__ a, int tokens, int chunks,
                      float* __restrict__ ws) {
  extern __shared__ __align__(16) float sm[];
  const int dk = shape.key_dim, dv = shape.value_dim, hv = shape.value_heads;
  const int lq = dk + 8, lv = dv + 4;  // Q, K read as row pairs, V as column pairs
  float* QV = sm;                                // Qs [64][lq], later beta V [64][lv]
  float* Ks = QV + kC * max(lq, lv);             // [64][lq]
  float* Akk = Ks + kC * lq;                     // [64][kLa], strictly lower
  float* Tm = Akk + kC * kLa;                    // [64][kLa], L^-1 (unit lower)
  float* R = Tm + kC * kLa;                      // [16][kLr]
  float* beta = R + 16 * kLr;                    // [64] each
  float* gam = beta + kC;
  float* eg = gam + kC;   // e^gamma
  float* ekp = eg + kC;   // e^(gamma_C - gamma)
  float* bek = ekp + kC;  // beta e^gamma

  const int chunk = blockIdx.x, h = blockIdx.y;
  const int c0 = chunk * kC, n = min(kC, tokens - c0);
  const int kh = h / (hv / shape.key_heads);
  const int channels = shape.conv_channels(), key_total = shape.key_heads * dk;
  const int tid = threadIdx.x, lane = tid % kWarp, warp = tid / kWarp;
  const ChunkLayout lay{dk, dv};
  float* rec = ws + (static_cast<size_t>(h) * chunks + chunk) * lay.stride();
  prep_phase(0);

  // The chunk's q and k rows by cp.async, every copy in flight at once (padding rows zero-filled): a warp per
  // row loading as it normalised waited for eight dependent round trips.
  for_each_in_block<kThreads>(kC, dk / 4, [&](int i, int c4) {
    const float* row = conv_out + static_cast<size_t>(c0 + (i < n ? i : 0)) * channels + kh * dk + 4 * c4;
    cp_async16(QV + i * lq + 4 * c4, row, i < n);
    cp_async16(Ks + i * lq + 4 * c4, row + key_total, i < n);
  });
  cp_async_commit();
  if (tid < kC) {
    float bt = 0.0f, g = 0.0f;
    if (tid < n) {
      const size_t i = static_cast<size_t>(c0 + tid) * hv + h;
      bt = sigmoidf(b[i]);
      const float x = a[i] + bf16_bits_to_float(w.dt_bias[h]);
      const float softplus = x > 20.0f ? x : log1pf(expf(x));
      g = -expf(bf16_bits_to_float(w.a_log[h])) * softplus;
    }
    beta[tid] = bt;
    gam[tid] = g;
  }
  for (int e = tid; e < kC * kLa; e += kThreads) Tm[e] = 0.0f;
  cp_async_wait<0>();
  __syncthreads();
  prep_phase(1);
  if (tid == 0) {  // inclusive cumsum in order, as the reference (padding adds g = 0); all loads first
    float4 g4[kC / 4];
#pragma unroll
    for (int j = 0; j < kC / 4; ++j) g4[j] = reinterpret_cast<const float4*>(gam)[j];
    float running = 0.0f;
#pragma unroll
    for (int j = 0; j < kC / 4; ++j) {
      g4[j].x = running += g4[j].x;
      g4[j].y = running += g4[j].y;
      g4[j].z = running += g4[j].z;
      g4[j].w = running += g4[j].w;
      reinterpret_cast<float4*>(gam)[j] = g4[j];
    }
  }
  // q, k (L2-normalised), one warp per row, two rows at a time (each lane's loads of both first); padding rows
  // are zero.
  const float q_scale = rsqrtf(static_cast<float>(dk));
  for (int i0 = warp; i0 < kC; i0 += 2 * (kThreads / kWarp)) {
    float v[2][2][kMaxDim / kWarp];  // [row][q, k][d / 32]
    float ss[2][2] = {};
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int i = i0 + r * (kThreads / kWarp);
#pragma unroll
      for (int m = 0; m < kMaxDim / kWarp; ++m) {
        const int d = lane + m * kWarp;
        v[r][0][m] = d < dk ? QV[i * lq + d] : 0.0f;
        v[r][1][m] = d < dk ? Ks[i * lq + d] : 0.0f;
      }
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
#pragma unroll
      for (int m = 0; m < kMaxDim / kWarp; ++m) {
        ss[r][0] += v[r][0][m] * v[r][0][m];
        ss[r][1] += v[r][1][m] * v[r][1][m];
      }
    }
#pragma unroll
    for (int o = kWarp / 2; o > 0; o /= 2) {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        ss[r][0] += __shfl_xor_sync(0xffffffffu, ss[r][0], o);
        ss[r][1] += __shfl_xor_sync(0xffffffffu, ss[r][1], o);
      }
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int i = i0 + r * (kThreads / kWarp);
      const float qi = rsqrtf(ss[r][0] + 1e-6f) * q_scale, ki = rsqrtf(ss[r][1] + 1e-6f);
#pragma unroll
      for (int m = 0; m < kMaxDim / kWarp; ++m) {
        const int d = lane + m * kWarp;
        if (d < dk) {
          QV[i * lq + d] = v[r][0][m] * qi;
          Ks[i * lq + d] = v[r][1][m] * ki;
        }
      }
    }
  }
  __syncthreads();  // gam, beta, Qs, Ks ready
  prep_phase(2);
  if (tid < kC) {
    eg[tid] = expf(gam[tid]);
    ekp[tid] = expf(gam[kC - 1] - gam[tid]);
    bek[tid] = beta[tid] * eg[tid];
  }
  // K K^T and Q K^T over the 20 tiles (16 x 8) on or below the diagonal, 2 or 3 per warp: warp w takes m-tile
  // mt(w) and n-tiles nb(w) .. nb(w) + cnt(w) - 1 (the tables below, one hex digit per warp). The Aqk image's 12
  // tiles above the diagonal are written as zeros by the writer warps further down.
  uint8_t* aqk_image = reinterpret_cast<uint8_t*>(rec + lay.aqk());
  {
    const int mt = (0x33322110 >> (4 * warp)) & 15, nb = (0x63030200 >> (4 * warp)) & 15;
    const int cnt = (0x23333222 >> (4 * warp)) & 15;
    Acc kk[3], qk[3];
#pragma unroll
    for (int j = 0; j < 3; ++j) {
      acc_zero(kk[j]);
      acc_zero(qk[j]);
    }
    for (int k0 = 0; k0 < dk; k0 += 16) {
      const FragA ak = load_a([&](int r, int c) { return row_pair(Ks + (16 * mt + r) * lq + k0 + c); });
      const FragA aq = load_a([&](int r, int c) { return row_pair(QV + (16 * mt + r) * lq + k0 + c); });
#pragma unroll
      for (int j = 0; j < 3; ++j) {
        const int n0 = 8 * (nb + j);
        if (j < cnt) {
          const FragB bk = load_b([&](int kx, int nx) { return row_pair(Ks + (n0 + nx) * lq + k0 + kx); });
          mma3(kk[j], ak, bk);
          mma3(qk[j], aq, bk);
        }
      }
    }
#pragma unroll
    for (int j = 0; j < 3; ++j) {
      if (j >= cnt) break;
#pragma unroll
      for (int e = 0; e < 4; e += 2) {
        const int i = 16 * mt + acc_row(e), j0 = 8 * (nb + j) + acc_col(e);
        float akk[2], aq[2];
#pragma unroll
        for (int x = 0; x < 2; ++x) {
          const int jj = j0 + x;
          const float decay = jj <= i ? expf(gam[i] - gam[jj]) : 0.0f;
          akk[x] = jj < i ? beta[i] * (kk[j].m[e + x] + kk[j].c[e + x]) * decay : 0.0f;
          aq[x] = jj <= i ? (qk[j].m[e + x] + qk[j].c[e + x]) * decay : 0.0f;
        }
        *reinterpret_cast<float2*>(Akk + i * kLa + j0) = make_float2(akk[0], akk[1]);
        uint32_t hi, lo;
        split_bf16(make_float2(aq[0], aq[1]), hi, lo);
        *reinterpret_cast<uint32_t*>(aqk_image + kmajor_offset(i, j0, kC)) = hi;
        *reinterpret_cast<uint32_t*>(aqk_image + kC * kC * 2 + kmajor_offset(i, j0, kC)) = lo;
      }
    }
  }
  __syncthreads();  // Akk ready; the products' reads of Qs are done
  prep_phase(3);
  // The chunk's v rows, loaded now (every load of a thread before any use) and stored, times beta, once Qs is
  // free: their round trip overlaps the record writes and the diagonal blocks below.
  constexpr int kVLoads = kC * kMaxDim / 4 / kThreads;
  float4 vin[kVLoads];
#pragma unroll
  for (int u = 0; u < kVLoads; ++u) {
    const int e = tid + u * kThreads, i = e / (dv / 4), c = (e % (dv / 4)) * 4;
    vin[u] = e < kC * dv / 4 && i < n ? *reinterpret_cast<const float4*>(conv_out + static_cast<size_t>(c0 + i) * channels +
                                                                         2 * key_total + h * dv + c)
                                      : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  }
  // The 16x16 diagonal blocks of L^-1 by forward substitution, one column per thread of warps 0-1, while warps
  // 2-7 write the Qg and Kp images to the record word by word in image order (a warp's store: one 128-byte run,
  // 8 rows x 4 pairs along k; Qg: rows i, k = d; Kp: rows d, k = i).
  constexpr int kWriterWarps = (kThreads - kC) / kWarp;
  if (tid >= kC) {
    const int wwarp = warp - kC / kWarp;
    if (wwarp == 0 && lane == 0) rec[lay.gc()] = expf(gam[kC - 1]);
    uint32_t* qg_words = reinterpret_cast<uint32_t*>(rec + lay.qg());
    for (int run = wwarp; run < dk; run += kWriterWarps) {  // 16 runs per k16 step of 64 rows
      const int i = 8 * ((run >> 1) & 7) + lane / 4, d = 16 * (run >> 4) + 8 * (run & 1) + 2 * (lane % 4);
      uint32_t hi, lo;
      split_bf16(make_float2(QV[i * lq + d] * eg[i], QV[i * lq + d + 1] * eg[i]), hi, lo);
      qg_words[32 * run + lane] = hi;
      qg_words[dk * 32 + 32 * run + lane] = lo;
    }
    // Aqk's tiles above the diagonal (m-tile 0: n-tiles 2..7, 1: 4..7, 2: 6, 7): zeros, a word per (row, pair).
    for (int e = tid - kC; e < 12 * 64; e += kWriterWarps * kWarp) {
      const int tile = e / 64, mt = tile < 6 ? 0 : tile < 10 ? 1 : 2, nt = tile - (mt == 0 ? 0 : mt == 1 ? 6 : 10) + 2 * mt + 2;
      const uint32_t at = kmajor_offset(16 * mt + (e % 64) / 4, 8 * nt + 2 * (e % 4), kC);
      *reinterpret_cast<uint32_t*>(aqk_image + at) = 0u;
      *reinterpret_cast<uint32_t*>(aqk_image + kC * kC * 2 + at) = 0u;
    }
    uint32_t* kp_words = reinterpret_cast<uint32_t*>(rec + lay.kp());
    const int runs_per_step = dk / 4;  // dk rows x 32 bytes per k16 step
    for (int run = wwarp; run < dk; run += kWriterWarps) {
      const int step = run / runs_per_step, m8 = (run % runs_per_step) >> 1;
      const int d = 8 * m8 + lane / 4, i = 16 * step + 8 * (run & 1) + 2 * (lane % 4);
      uint32_t hi, lo;
      split_bf16(make_float2(Ks[i * lq + d] * ekp[i], Ks[(i + 1) * lq + d] * ekp[i + 1]), hi, lo);
      kp_words[32 * run + lane] = hi;
      kp_words[dk * 32 + 32 * run + lane] = lo;
    }
  } else {
    // Column c of diagonal block `base`, x[r] = T[base + r][base + c], in registers (zero above c: the sums add
    // exact zeros before k = c, so they match the substitution from k = c).
    const int base = 16 * (tid >> 4), c = tid & 15;
    const float* Ab = Akk + base * kLa + base;
    float x[16];
#pragma unroll
    for (int r = 0; r < 16; ++r) {
      float s = 0.0f;
#pragma unroll
      for (int k = 0; k < r; ++k) s += Ab[r * kLa + k] * x[k];
      x[r] = r < c ? 0.0f : r == c ? 1.0f : -s;
    }
    float* Tb = Tm + base * kLa + base;
#pragma unroll
    for (int r = 0; r < 16; ++r) {
      if (r >= c) Tb[r * kLa + c] = x[r];
    }
  }
  __syncthreads();  // Qs free; diagonal blocks ready
  prep_phase(4);
#pragma unroll
  for (int u = 0; u < kVLoads; ++u) {
    const int e = tid + u * kThreads, i = e / (dv / 4), c = (e % (dv / 4)) * 4;
    if (e < kC * dv / 4) {
      const float bt = beta[i];  // 0 on padding rows, whose v is 0
      *reinterpret_cast<float4*>(QV + i * lv + c) = make_float4(bt * vin[u].x, bt * vin[u].y, bt * vin[u].z, bt * vin[u].w);
    }
  }
  // Block rows 1..3 of L^-1: T[r, :w] = -D_r (A[r, :w] T[:w, :w]) with w = 16 r (L T = I by block rows), on the
  // tensor cores (3xBF16, as every product here), a warp per 8-column tile: its tile of R = A[r, :w] T[:w, :w]
  // (T is lower triangular: k from the tile's own 16-row step) goes through shared memory to become the B
  // operand of its tile of -D_r R, which only that warp reads.
  for (int br = 1; br < 4; ++br) {
    const int wd = 16 * br;
    if (warp < wd / 8) {
      const int n0 = 8 * warp;
      Acc r;
      acc_zero(r);
      for (int k0 = 16 * (warp / 2); k0 < wd; k0 += 16) {
        const FragA af = load_a([&](int rr, int c) { return row_pair(Akk + (wd + rr) * kLa + k0 + c); });
        const FragB bf = load_b([&](int kx, int nx) { return column_pair(Tm + (k0 + kx) * kLa + n0 + nx, kLa); });
        mma3(r, af, bf);
      }
#pragma unroll
      for (int e = 0; e < 4; ++e) R[acc_row(e) * kLr + n0 + acc_col(e)] = r.m[e] + r.c[e];
      __syncwarp();
      Acc t;
      acc_zero(t);
      const FragA df = load_a([&](int rr, int c) { return row_pair(Tm + (wd + rr) * kLa + wd + c); });
      const FragB rf = load_b([&](int kx, int nx) { return column_pair(R + kx * kLr + n0 + nx, kLr); });
      mma3(t, df, rf);
#pragma unroll
      for (int e = 0; e < 4; ++e) Tm[(wd + acc_row(e)) * kLa + n0 + acc_col(e)] = -(t.m[e] + t.c[e]);
    }
    __syncthreads();
  }
  prep_phase(5);
  // [W | U] = L^-1 [beta e^gamma K | beta V]: warp -> 16-column pairs of n-tiles, all four m-tiles (the
  // k-steps above the diagonal of L^-1 skipped).
  const int pairs = (dk + dv) / 16;
  for (int p = warp; p < pairs; p += kThreads / kWarp) {
    const int col = 16 * p;
    const bool is_w = col < dk;
    Acc acc[4][2];
#pragma unroll
    for (int mt = 0; mt < 4; ++mt) {
      acc_zero(acc[mt][0]);
      acc_zero(acc[mt][1]);
    }
#pragma unroll 1
    for (int k0 = 0; k0 < kC; k0 += 16) {
      FragB bf[2];
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const int n0 = col + 8 * j;
        bf[j] = is_w ? load_b([&](int kx, int nx) {
                  const float2 k = column_pair(Ks + (k0 + kx) * lq + n0 + nx, lq);
                  return make_float2(bek[k0 + kx] * k.x, bek[k0 + kx + 1] * k.y);
                })
                     : load_b([&](int kx, int nx) { return column_pair(QV + (k0 + kx) * lv + n0 - dk + nx, lv); });
      }
#pragma unroll
      for (int mt = 0; mt < 4; ++mt) {
        if (16 * mt + 15 >= k0) {
          const FragA af = load_a([&](int r, int c) { return row_pair(Tm + (16 * mt + r) * kLa + k0 + c); });
          mma3(acc[mt][0], af, bf[0]);
          mma3(acc[mt][1], af, bf[1]);
        }
      }
    }
    // W as its two images (a word pairs the inputs d, d + 1: W's k), U as fp32 rows.
    uint8_t* w_image = reinterpret_cast<uint8_t*>(rec + lay.w());
    float* u = rec + lay.u();
    const int c_off = is_w ? col : col - dk;
#pragma unroll
    for (int mt = 0; mt < 4; ++mt) {
#pragma unroll
      for (int j = 0; j < 2; ++j) {
#pragma unroll
        for (int e = 0; e < 4; e += 2) {
          const int i = 16 * mt + acc_row(e), c = c_off + 8 * j + acc_col(e);
          const float2 v = make_float2(acc[mt][j].m[e] + acc[mt][j].c[e], acc[mt][j].m[e + 1] + acc[mt][j].c[e + 1]);
          if (is_w) {
            uint32_t hi, lo;
            split_bf16(v, hi, lo);
            const uint32_t at = kmajor_offset(i, c, kC);
            *reinterpret_cast<uint32_t*>(w_image + at) = hi;
            *reinterpret_cast<uint32_t*>(w_image + dk * 128 + at) = lo;
          } else {
            *reinterpret_cast<float2*>(u + u_offset(i, c, dv)) = v;  // c, c + 1 in one slice
          }
        }
      }
    }
  }
#ifdef IMP_PHASE_PROBE
  __syncthreads();
  prep_phase(6);
#endif
}

// ---- sequential pass over chunks on wgmma, per (head, 64-column slice of the state) --------------------------
//
// One warpgroup per block holds the slice's state transposed, S^T [64 columns][dk], in wgmma accumulators (fp32)
// and runs per chunk
//   V'^T = U^T - S^T W^T        (M = the columns, N = the chunk's 64 rows, K = dk)
//   S^T <- gC S^T + V'^T Kp     (M = the columns, N = dk, K = the chunk's rows)
// with A from registers: an m64 accumulator's layout is the A fragment's (rows g, g + 8, pairs along N), so S^T is
// the A operand of the first product and V'^T of the second without a pass through shared memory. Each product
// is 3xBF16 as split_bf16_mma.cuh describes (the correction terms in their own accumulator). The chunk's W and
// Kp images and its U slice come by three bulk copies into a ring of two stages, chunk c + 2 issued once chunk c's
// products are done. The mma.sync form (16 warps per block, every operand split again at each fragment load,
// four block barriers per chunk) took 6.9-7.7 us per chunk (gdn_scan_phase_probe.cu, session 19).
//
// Per-chunk timestamps (SM clock) of thread 0 of each scan block, for bench/experiments/gdn_scan_phase_probe.cu,
// which compiles this file with IMP_PHASE_PROBE; no-ops otherwise. scan_phase(chunk, i): chunks below 128, blocks
// below 256.
#ifdef IMP_PHASE_PROBE
__device__ long long g_scan_phase[256][128][6];
__device__ __forceinline__ void scan_phase(int chunk, int i) {
  if (threadIdx.x != 0 || chunk >= 128) return;
  g_scan_phase[blockIdx.y * gridDim.x + blockIdx.x][chunk][i] = clock64();
}
#else
__device__ __forceinline__ void scan_phase(int, int) {}
#endif

constexpr int kScanThreads = 128;  // one warpgroup
__host__ __device__ constexpr uint32_t scan_stage_bytes(int dk) { return 512u * dk + kC * kSlice * 4; }
// Two stages and the parked state.
constexpr size_t scan_smem_bytes(int dk) { return 2 * scan_stage_bytes(dk) + static_cast<size_t>(kScanThreads) * dk / 2 * 4; }

// The A fragment of k16 step kk (registers hi, lo) from an m64 accumulator d (pairs of N), times `sign`.
template <int N>
__device__ __forceinline__ void accumulator_fragments(const float (&d)[N / 2], float sign, uint32_t (&hi)[N / 16][4],
                                                      uint32_t (&lo)[N / 16][4]) {
#pragma unroll
  for (int kk = 0; kk < N / 16; ++kk) {
#pragma unroll
    for (int q = 0; q < 4; ++q) split_bf16(make_float2(sign * d[8 * kk + 2 * q], sign * d[8 * kk + 2 * q + 1]), hi[kk][q], lo[kk][q]);
  }
}

// An m64 accumulator (rows: the thread's state columns row0, row0 + 8 of the slice; N index 8 j + 2 t + e % 2 for
// element 4 j + e) into an fp32 array [N][ld] whose column 0 is the slice's first (dst), columns past the slice
// skipped: a running pointer, not N / 2 offsets kept in registers.
template <int N>
__device__ __forceinline__ void store_accumulator_rows(float* dst, const float (&v)[N / 2], int ld, int row0, bool lo_ok,
                                                       bool hi_ok) {
  float* p = dst + static_cast<size_t>(2 * (threadIdx.x & 3)) * ld + row0;
#pragma unroll
  for (int j = 0; j < N / 8; ++j, p += 8 * static_cast<size_t>(ld)) {
    if (lo_ok) p[0] = v[4 * j], p[ld] = v[4 * j + 1];
    if (hi_ok) p[8] = v[4 * j + 2], p[ld + 8] = v[4 * j + 3];
  }
}

// Two pairs of an m64 accumulator (rows row0, row0 + 8; N indices k, k + 1) into a B image of 64 rows and K
// inputs (hi, then lo at + K * 128 bytes).
template <int K>
__device__ __forceinline__ void store_b_pairs(uint8_t* image, float2 lo_row, float2 hi_row, int row0, int k) {
  uint32_t h, l;
  split_bf16(lo_row, h, l);
  *reinterpret_cast<uint32_t*>(image + kmajor_offset(row0, k, kSlice)) = h;
  *reinterpret_cast<uint32_t*>(image + K * 128 + kmajor_offset(row0, k, kSlice)) = l;
  split_bf16(hi_row, h, l);
  *reinterpret_cast<uint32_t*>(image + kmajor_offset(row0 + 8, k, kSlice)) = h;
  *reinterpret_cast<uint32_t*>(image + K * 128 + kmajor_offset(row0 + 8, k, kSlice)) = l;
}
template <int N>
__device__ __forceinline__ void store_b_image(uint8_t* image, const float (&v)[N / 2], int row0) {
#pragma unroll
  for (int j = 0; j < N / 8; ++j) {
    store_b_pairs<N>(image, make_float2(v[4 * j], v[4 * j + 1]), make_float2(v[4 * j + 2], v[4 * j + 3]), row0,
                     8 * j + 2 * (threadIdx.x & 3));
  }
}

template <int DK>
__global__ void __launch_bounds__(kScanThreads, 1)
    chunk_scan_kernel(GatedDeltaNetShape shape, float* __restrict__ ws, int chunks, float* __restrict__ recurrent) {
  extern __shared__ __align__(128) uint8_t stages[];  // [2][W image | Kp image | U slice [64][ncols] fp32]
  __shared__ uint64_t full[2];
  const int dv = shape.value_dim, hv = shape.value_heads;
  constexpr uint32_t kImageBytes = 256u * DK;  // hi + lo of one operand
  const int h = blockIdx.x, col0 = blockIdx.y * kSlice, ncols = min(kSlice, dv - col0);
  const int tid = threadIdx.x, lane = tid % kWarp, warp = tid / kWarp, t = lane & 3;
  const int row0 = 16 * warp + (lane >> 2);  // this thread's accumulator rows: columns col0 + row0, + 8
  const ChunkLayout lay{DK, dv};
  float* recs = ws + static_cast<size_t>(h) * chunks * lay.stride();
  float* states = ws + static_cast<size_t>(hv) * chunks * lay.stride() + static_cast<size_t>(h) * chunks * lay.state();
  float* Sg = recurrent + static_cast<size_t>(h) * DK * dv;

  const size_t u_slice = lay.u() + u_offset(0, col0, dv);  // this block's slice of U in a record
  // Chunk `chunk` into `stage` by thread 0: the two images and the U slice, three copies completing on the stage's
  // barrier (a copy per 256-byte U row took ~2.8 us per chunk to issue).
  auto issue = [&](int chunk, int stage) {
    const float* rec = recs + static_cast<size_t>(chunk) * lay.stride();
    uint8_t* st = stages + stage * scan_stage_bytes(DK);
    mbarrier_arrive_expect_tx(&full[stage], 2 * kImageBytes + kC * ncols * 4);
    bulk_copy_to_shared(st, rec + lay.w(), kImageBytes, &full[stage]);
    bulk_copy_to_shared(st + kImageBytes, rec + lay.kp(), kImageBytes, &full[stage]);
    bulk_copy_to_shared(st + 2 * kImageBytes, rec + u_slice, kC * ncols * 4, &full[stage]);
  };
  const bool lo_ok = row0 < ncols, hi_ok = row0 + 8 < ncols;
  float s[DK / 2];  // S^T
  {
    const float* p = Sg + static_cast<size_t>(2 * t) * dv + col0 + row0;
#pragma unroll
    for (int j = 0; j < DK / 8; ++j, p += 8 * static_cast<size_t>(dv)) {
      s[4 * j] = lo_ok ? p[0] : 0.0f;
      s[4 * j + 1] = lo_ok ? p[dv] : 0.0f;
      s[4 * j + 2] = hi_ok ? p[8] : 0.0f;
      s[4 * j + 3] = hi_ok ? p[dv + 8] : 0.0f;
    }
  }
  // S^T waits here (each thread its own words) while the V' product holds its fragments and accumulators: in
  // registers throughout, ptxas spilled.
  float4* park = reinterpret_cast<float4*>(stages + 2 * scan_stage_bytes(DK)) + tid;
  if (tid == 0) {
    mbarrier_init(&full[0], 1);
    mbarrier_init(&full[1], 1);
  }
  __syncthreads();
  if (tid == 0) {
    issue(0, 0);
    if (chunks > 1) issue(1, 1);
  }

  for (int chunk = 0; chunk < chunks; ++chunk) {
    const int stage = chunk & 1;
    float* rec = recs + static_cast<size_t>(chunk) * lay.stride();
    scan_phase(chunk, 0);
    const float gC = rec[lay.gc()];
    // V'^T = U^T - S^T W^T.
    float vm[kC / 2], vc[kC / 2];
    {
      uint32_t ah[DK / 16][4], al[DK / 16][4];
      accumulator_fragments<DK>(s, -1.0f, ah, al);
#pragma unroll
      for (int i = 0; i < DK / 8; ++i) park[i * kScanThreads] = make_float4(s[4 * i], s[4 * i + 1], s[4 * i + 2], s[4 * i + 3]);
      mbarrier_wait(&full[stage], (chunk >> 1) & 1);
      scan_phase(chunk, 1);
      const uint8_t* st = stages + stage * scan_stage_bytes(DK);
      const float* us = reinterpret_cast<const float*>(st + 2 * kImageBytes);
      const float* u = us + 2 * t * ncols + row0;  // U[i][column]
#pragma unroll
      for (int j = 0; j < kC / 8; ++j, u += 8 * ncols) {
        vm[4 * j] = lo_ok ? u[0] : 0.0f;
        vm[4 * j + 1] = lo_ok ? u[ncols] : 0.0f;
        vm[4 * j + 2] = hi_ok ? u[8] : 0.0f;
        vm[4 * j + 3] = hi_ok ? u[ncols + 8] : 0.0f;
      }
#pragma unroll
      for (int i = 0; i < kC / 2; ++i) vc[i] = 0.0f;
      const uint32_t w_hi = smem_addr(st), w_lo = w_hi + kImageBytes / 2;
      wgmma::wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < DK / 16; ++kk) {
        wgmma::wgmma_rs<kC>(vm, ah[kk], kmajor_descriptor(w_hi + kk * 32 * kC));
        wgmma::wgmma_rs<kC>(vc, ah[kk], kmajor_descriptor(w_lo + kk * 32 * kC));
        wgmma::wgmma_rs<kC>(vc, al[kk], kmajor_descriptor(w_hi + kk * 32 * kC));
      }
      wgmma::wgmma_commit();
      wgmma::wgmma_wait<0>();
    }
    scan_phase(chunk, 2);
    // S^T <- gC S^T + V'^T Kp; while those products run, V' goes over U in the record (the output kernel's
    // input) and the parked state to this chunk's snapshot.
#pragma unroll
    for (int i = 0; i < kC / 2; ++i) vm[i] += vc[i];
    {
      uint32_t bh[kC / 16][4], bl[kC / 16][4];
      accumulator_fragments<kC>(vm, 1.0f, bh, bl);
      float sc[DK / 2];
#pragma unroll
      for (int i = 0; i < DK / 8; ++i) {
        const float4 v = park[i * kScanThreads];
        s[4 * i] = gC * v.x, s[4 * i + 1] = gC * v.y, s[4 * i + 2] = gC * v.z, s[4 * i + 3] = gC * v.w;
      }
#pragma unroll
      for (int i = 0; i < DK / 2; ++i) sc[i] = 0.0f;
      scan_phase(chunk, 3);
      const uint32_t kp_hi = smem_addr(stages + stage * scan_stage_bytes(DK)) + kImageBytes, kp_lo = kp_hi + kImageBytes / 2;
      wgmma::wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < kC / 16; ++kk) {
        wgmma::wgmma_rs<DK>(s, bh[kk], kmajor_descriptor(kp_hi + kk * 32 * DK));
        wgmma::wgmma_rs<DK>(sc, bh[kk], kmajor_descriptor(kp_lo + kk * 32 * DK));
        wgmma::wgmma_rs<DK>(sc, bl[kk], kmajor_descriptor(kp_hi + kk * 32 * DK));
      }
      wgmma::wgmma_commit();
      // V' over the slice's U and the parked state as this chunk's snapshot, both as the output kernel's B images
      // (rows: the slice's columns; a word pairs two N indices of the accumulator, the images' k).
      store_b_image<kC>(reinterpret_cast<uint8_t*>(rec + u_slice), vm, row0);
      {
        uint8_t* image = reinterpret_cast<uint8_t*>(states + static_cast<size_t>(chunk) * lay.state() +
                                                    static_cast<size_t>(blockIdx.y) * DK * kSlice);
#pragma unroll
        for (int j = 0; j < DK / 8; ++j) {
          const float4 v = park[j * kScanThreads];
          store_b_pairs<DK>(image, make_float2(v.x, v.y), make_float2(v.z, v.w), row0, 8 * j + 2 * t);
        }
      }
      wgmma::wgmma_wait<0>();
#pragma unroll
      for (int i = 0; i < DK / 2; ++i) s[i] += sc[i];
    }
    scan_phase(chunk, 4);
    __syncthreads();  // every warp's products of this stage are done: it may be refilled
    if (tid == 0 && chunk + 2 < chunks) issue(chunk + 2, stage);
    scan_phase(chunk, 5);
  }
  store_accumulator_rows<DK>(Sg + col0, s, dv, row0, lo_ok, hi_ok);
}

// ---- outputs on wgmma, one warpgroup per (64-column slice, chunk, head): O = Qg S_chunk + Aqk V', then the
// gated RMSNorm -------------------------------------------------------------------------------------------------
//
// A block's slice of O: 3 dk / 16 + 12 wgmmas m64n64k16 from shared-memory images (prep's Qg and Aqk as A, the
// scan's snapshot and V' of the slice as B), 3xBF16 with the correction terms in their own accumulators. The
// operands come by four bulk copies (96 KB at dk = 128: two blocks per SM, one's copies under the other's
// products); the gate values by plain loads issued while the wgmmas run. The slices of a (chunk, head) are one
// cluster: a row's sum of squares meets through distributed shared memory, added in rank order by every block.
// The mma.sync form (8 warps per (chunk, head), every operand split again at each fragment load) took 320 us per
// layer at 4096 tokens, all slices in one block (182 KB, one block per SM) 306 us, this form 247 us (session 29).
constexpr int kOutThreads = 128;
__host__ __device__ constexpr size_t out_smem_bytes(int dk) {
  return 256u * dk + kC * kC * 4u + 256u * dk + kC * kSlice * 4u;  // Qg, Aqk, the slice's state and V' images
}

__device__ __forceinline__ void cluster_arrive() { asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void cluster_wait() { asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory"); }
__device__ __forceinline__ float load_cluster_float(const float* local, int rank) {
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(smem_addr(local)), "r"(rank));
  float v;
  asm volatile("ld.shared::cluster.f32 %0, [%1];\n" : "=f"(v) : "r"(remote) : "memory");
  return v;
}

// m += A B and c += the correction terms (3xBF16) over kSteps k16 steps of a 64-row A image and a 64-row B image
// (hi and lo halves at the given shared-memory addresses), issued without waiting.
template <int kSteps>
__device__ __forceinline__ void product3_ss(float (&m)[kSlice / 2], float (&c)[kSlice / 2], uint32_t a_hi,
                                            uint32_t a_lo, uint32_t b_hi, uint32_t b_lo) {
#pragma unroll
  for (int kk = 0; kk < kSteps; ++kk) {
    const uint32_t a = kk * 32 * kC, b = kk * 32 * kSlice;
    wgmma::wgmma_ss<kSlice>(m, kmajor_descriptor(a_hi + a), kmajor_descriptor(b_hi + b));
    wgmma::wgmma_ss<kSlice>(c, kmajor_descriptor(a_hi + a), kmajor_descriptor(b_lo + b));
    wgmma::wgmma_ss<kSlice>(c, kmajor_descriptor(a_lo + a), kmajor_descriptor(b_hi + b));
  }
}

template <int DK>
__global__ void __launch_bounds__(kOutThreads, 2)
    chunk_out_kernel(GatedDeltaNetShape shape, const uint16_t* __restrict__ norm_w, const float* __restrict__ z,
                     const float* __restrict__ ws, int tokens, int chunks, __nv_bfloat16* __restrict__ out_hi,
                     __nv_bfloat16* __restrict__ out_lo, __half* __restrict__ out16, float out16_scale) {
  extern __shared__ __align__(128) uint8_t out_images[];
  __shared__ uint64_t full;
  __shared__ float row_ss[kC];  // this slice's sum of squares per row
  pdl_begin();
  const int dv = shape.value_dim, hv = shape.value_heads;
  const int sl = blockIdx.x, slices = gridDim.x, chunk = blockIdx.y, h = blockIdx.z;
  const int tid = threadIdx.x, lane = tid % kWarp, warp = tid / kWarp, g = lane >> 2, t = lane & 3;
  const int col0 = kSlice * sl, width = min(kSlice, dv - col0);
  const ChunkLayout lay{DK, dv};
  const float* rec = ws + (static_cast<size_t>(h) * chunks + chunk) * lay.stride();
  const float* state =
      ws + static_cast<size_t>(hv) * chunks * lay.stride() + (static_cast<size_t>(h) * chunks + chunk) * lay.state();
  constexpr uint32_t kQgBytes = 256u * DK, kAqkBytes = kC * kC * 4u, kSBytes = 256u * DK, kVBytes = kC * kSlice * 4u;
  uint8_t* qg = out_images;
  uint8_t* aqk = qg + kQgBytes;
  uint8_t* s_image = aqk + kAqkBytes;
  uint8_t* v_image = s_image + kSBytes;

  if (tid == 0) {
    mbarrier_init(&full, 1);
    mbarrier_arrive_expect_tx(&full, kQgBytes + kAqkBytes + kSBytes + kVBytes);
    bulk_copy_to_shared(qg, rec + lay.qg(), kQgBytes, &full);
    bulk_copy_to_shared(aqk, rec + lay.aqk(), kAqkBytes, &full);
    bulk_copy_to_shared(s_image, state + static_cast<size_t>(sl) * DK * kSlice, kSBytes, &full);
    bulk_copy_to_shared(v_image, rec + lay.u() + static_cast<size_t>(sl) * kC * kSlice, kVBytes, &full);
  }
  __syncthreads();  // the barrier's initialisation
  mbarrier_wait(&full, 0);

  // Accumulator element 4 j + e: row 16 warp + g + 8 (e / 2), column 8 j + 2 t + e % 2 of the slice.
  float m[kSlice / 2], c[kSlice / 2];
#pragma unroll
  for (int i = 0; i < kSlice / 2; ++i) m[i] = c[i] = 0.0f;
  {
    const uint32_t qg_hi = smem_addr(qg), qg_lo = qg_hi + kQgBytes / 2, aqk_hi = smem_addr(aqk), aqk_lo = aqk_hi + kAqkBytes / 2;
    const uint32_t s_hi = smem_addr(s_image), s_lo = s_hi + kSBytes / 2, v_hi = smem_addr(v_image), v_lo = v_hi + kVBytes / 2;
    wgmma::wgmma_fence();
    product3_ss<DK / 16>(m, c, qg_hi, qg_lo, s_hi, s_lo);
    product3_ss<kC / 16>(m, c, aqk_hi, aqk_lo, v_hi, v_lo);
    wgmma::wgmma_commit();
  }
  // The gate values and norm weights of the thread's elements, loaded while the products run.
  float2 gate[2][kSlice / 8];
  uint32_t nw[kSlice / 8];
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int tok = min(chunk * kC + 16 * warp + g + 8 * half, tokens - 1);
    const float* zrow = z + (static_cast<size_t>(tok) * hv + h) * dv + col0 + 2 * t;
#pragma unroll
    for (int j = 0; j < kSlice / 8; ++j) {
      gate[half][j] = 8 * j + 2 * t < width ? *reinterpret_cast<const float2*>(zrow + 8 * j) : make_float2(0.0f, 0.0f);
    }
  }
#pragma unroll
  for (int j = 0; j < kSlice / 8; ++j) {
    nw[j] = 8 * j + 2 * t < width ? *reinterpret_cast<const uint32_t*>(norm_w + col0 + 8 * j + 2 * t) : 0u;
  }
  wgmma::wgmma_wait<0>();
#pragma unroll
  for (int i = 0; i < kSlice / 2; ++i) m[i] += c[i];

  // Each row's sum of squares: over the quad of lanes sharing g, then over the cluster's slices.
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    float ss = 0.0f;
#pragma unroll
    for (int j = 0; j < kSlice / 8; ++j) {
      const float a = m[4 * j + 2 * half], b = m[4 * j + 2 * half + 1];
      if (8 * j + 2 * t < width) ss += a * a + b * b;  // columns past a narrower last slice hold no values
    }
    ss += __shfl_xor_sync(0xffffffffu, ss, 1);
    ss += __shfl_xor_sync(0xffffffffu, ss, 2);
    if (t == 0) row_ss[16 * warp + g + 8 * half] = ss;
  }
  cluster_arrive();
  cluster_wait();  // every slice's row sums are written
  float inv[2];
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const float* mine = row_ss + 16 * warp + g + 8 * half;
    float total = 0.0f;
    for (int r = 0; r < slices; ++r) total += load_cluster_float(mine, r);
    inv[half] = rsqrtf(total / static_cast<float>(dv) + shape.eps);
  }
  cluster_arrive();  // this block's reads of the others' row sums are done (waited for before exit)

#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int tok = chunk * kC + 16 * warp + g + 8 * half;
    if (tok >= tokens) continue;
    const size_t at = (static_cast<size_t>(tok) * hv + h) * dv + col0 + 2 * t;
#pragma unroll
    for (int j = 0; j < kSlice / 8; ++j) {
      if (8 * j + 2 * t >= width) continue;
      float r[2];
#pragma unroll
      for (int x = 0; x < 2; ++x) {
        const float gx = x ? gate[half][j].y : gate[half][j].x;
        // 25M gates per layer at 4096 tokens: the fast sigmoid (~2^-21 relative) instead of IEEE exp and division.
        const float act = shape.sigmoid_gate ? fast_sigmoidf(gx) : gx * fast_sigmoidf(gx);
        r[x] = bf16_bits_to_float(x ? nw[j] >> 16 : nw[j] & 0xffffu) * (m[4 * j + 2 * half + x] * inv[half]) * act;
      }
      uint32_t hi, lo;
      split_bf16(make_float2(r[0], r[1]), hi, lo);
      if (out16 != nullptr) {  // from the terms, as launch_f16_terms
        *reinterpret_cast<__half2*>(out16 + at + 8 * j) = f16x2_from_terms(hi, lo, out16_scale);
        continue;
      }
      *reinterpret_cast<uint32_t*>(out_hi + at + 8 * j) = hi;
      *reinterpret_cast<uint32_t*>(out_lo + at + 8 * j) = lo;
    }
  }
  cluster_wait();  // no block leaves while another may still read its row sums
}

template <typename Kernel>
void set_smem(Kernel kernel, size_t bytes) {
  IMP_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
}

// The scan instantiated per key_dim (its wgmma widths are constants): 96 blocks at the released shape.
template <int... kSteps>
void set_scan_smem(std::integer_sequence<int, kSteps...>) {
  (set_smem(chunk_scan_kernel<16 * (kSteps + 1)>, scan_smem_bytes(16 * (kSteps + 1))), ...);
}
template <int... kSteps>
void set_out_smem(std::integer_sequence<int, kSteps...>) {
  (set_smem(chunk_out_kernel<16 * (kSteps + 1)>, out_smem_bytes(16 * (kSteps + 1))), ...);
}
template <int... kSteps>
void launch_out(std::integer_sequence<int, kSteps...>, const GatedDeltaNetShape& shape, const uint16_t* norm_w,
                const float* z, const float* ws, int tokens, int chunks, __nv_bfloat16* out_hi, __nv_bfloat16* out_lo,
                __half* out16, float out16_scale, cudaStream_t stream) {
  const unsigned slices = static_cast<unsigned>((shape.value_dim + kSlice - 1) / kSlice);
  const dim3 grid(slices, chunks, shape.value_heads);
  ((shape.key_dim == 16 * (kSteps + 1)
        ? (launch_kernel(chunk_out_kernel<16 * (kSteps + 1)>, grid, dim3(kOutThreads), out_smem_bytes(16 * (kSteps + 1)),
                         stream, slices, shape, norm_w, z, ws, tokens, chunks, out_hi, out_lo, out16, out16_scale),
           0)
        : 0),
   ...);
}
template <int... kSteps>
void launch_scan(std::integer_sequence<int, kSteps...>, const GatedDeltaNetShape& shape, float* ws, int chunks,
                 float* recurrent, cudaStream_t stream) {
  const dim3 grid(shape.value_heads, (shape.value_dim + kSlice - 1) / kSlice);
  ((shape.key_dim == 16 * (kSteps + 1)
        ? (chunk_scan_kernel<16 * (kSteps + 1)><<<grid, kScanThreads, scan_smem_bytes(16 * (kSteps + 1)), stream>>>(
               shape, ws, chunks, recurrent),
           0)
        : 0),
   ...);
}

}  // namespace

size_t gdn_prefill_workspace_bytes(const GatedDeltaNetShape& shape, int32_t tokens) {
  const size_t chunks = (static_cast<size_t>(tokens) + kC - 1) / kC;
  const ChunkLayout lay{shape.key_dim, shape.value_dim};
  return chunks * shape.value_heads * (lay.stride() + lay.state()) * sizeof(float);
}

void launch_gdn_chunked_prefill(const GatedDeltaNetShape& shape, const GatedDeltaNetWeightsDevice& w,
                                const float* conv_out, const float* z, const float* b, const float* a,
                                float* recurrent, int32_t tokens, void* workspace, size_t workspace_bytes,
                                uint16_t* out_hi, uint16_t* out_lo, cudaStream_t stream, uint16_t* out16,
                                float out16_scale) {
  const int dk = shape.key_dim, dv = shape.value_dim;
  if (dk % 16 != 0 || dv % 16 != 0 || dk <= 0 || dv <= 0 || dk > kMaxDim || dv > kMaxDim ||
      shape.value_heads % shape.key_heads != 0) {
    throw_invalid_launch("gdn chunked prefill: head dims must be multiples of 16 up to 128, value heads a multiple of key heads");
  }
  if (tokens <= 0) return;
  if (workspace_bytes < gdn_prefill_workspace_bytes(shape, tokens) || reinterpret_cast<uintptr_t>(workspace) % 16 != 0 ||
      (out16 == nullptr && (out_hi == nullptr || out_lo == nullptr)) || reinterpret_cast<uintptr_t>(conv_out) % 16 != 0 ||
      reinterpret_cast<uintptr_t>(z) % 16 != 0) {
    throw_invalid_launch("gdn chunked prefill: workspace too small or misaligned, inputs not 16-byte aligned, or no output");
  }
  const int chunks = (tokens + kC - 1) / kC;
  float* ws = static_cast<float*>(workspace);

  static const bool ready = [] {
    set_smem(chunk_prep_kernel, prep_smem_floats(kMaxDim, kMaxDim) * sizeof(float));
    set_scan_smem(std::make_integer_sequence<int, kMaxDim / 16>());
    set_out_smem(std::make_integer_sequence<int, kMaxDim / 16>());
    return true;
  }();
  (void)ready;

  chunk_prep_kernel<<<dim3(chunks, shape.value_heads), kThreads, prep_smem_floats(dk, dv) * sizeof(float), stream>>>(
      shape, w, conv_out, b, a, tokens, chunks, ws);
  IMP_CUDA_CHECK_LAUNCH();
  launch_scan(std::make_integer_sequence<int, kMaxDim / 16>(), shape, ws, chunks, recurrent, stream);
  IMP_CUDA_CHECK_LAUNCH();
  launch_out(std::make_integer_sequence<int, kMaxDim / 16>(), shape, w.norm, z, ws, tokens, chunks,
             reinterpret_cast<__nv_bfloat16*>(out_hi), reinterpret_cast<__nv_bfloat16*>(out_lo),
             reinterpret_cast<__half*>(out16), out16_scale, stream);
  IMP_CUDA_CHECK_LAUNCH();
}

}  // namespace imp::cuda
