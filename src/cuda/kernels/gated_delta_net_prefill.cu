#include "cuda/kernels/gated_delta_net_prefill.h"

#include <algorithm>

#include "cuda/check.h"
#include "cuda/kernels/device_math.cuh"
#include "cuda/kernels/fp_codes.cuh"
#include "cuda/kernels/prefill_common.cuh"
#include "cuda/kernels/split_bf16_mma.cuh"

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

// Per (head, chunk) record, floats, all row-major: W [64][dk], Kp [64][dk] (K e^(gamma_C - gamma)),
// Qg [64][dk] (Q e^gamma), U [64][dv] (overwritten with V' by the scan), Aqk [64][64] ((Q K^T) * Gamma, zero
// above the diagonal), gC (e^gamma_C), pad. After all records: the state at the start of every chunk,
// [head][chunk][dk][dv].
struct ChunkLayout {
  int dk, dv;
  __host__ __device__ size_t w() const { return 0; }
  __host__ __device__ size_t kp() const { return static_cast<size_t>(dk) * kC; }
  __host__ __device__ size_t qg() const { return 2 * static_cast<size_t>(dk) * kC; }
  __host__ __device__ size_t u() const { return 3 * static_cast<size_t>(dk) * kC; }
  __host__ __device__ size_t aqk() const { return u() + static_cast<size_t>(kC) * dv; }
  __host__ __device__ size_t gc() const { return aqk() + kC * kC; }
  __host__ __device__ size_t stride() const { return gc() + 4; }  // multiple of 4 floats: 16-byte records
  __host__ __device__ size_t state() const { return static_cast<size_t>(dk) * dv; }
};

// ---- chunk preparation (state independent), one block per (chunk, head) ------------------------------------

constexpr int kThreads = 256;  // prep and output kernels: 8 warps
constexpr int kLa = kC + 8;    // stride of the 64x64 matrices in shared memory (row pairs: 8 mod 32)

size_t prep_smem_floats(int dk, int dv) {
  const int lq = dk + 8, lv = dv + 4;
  return static_cast<size_t>(kC) * std::max(lq, lv) + static_cast<size_t>(kC) * lq + 2 * kC * kLa + 16 * 48 + 6 * kC;
}

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
  float* R = Tm + kC * kLa;                      // [16][48]
  float* beta = R + 16 * 48;                     // [64] each
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
  if (tid == 0) {  // inclusive cumsum in order, as the reference; padding adds g = 0
    float running = 0.0f;
    for (int i = 0; i < kC; ++i) gam[i] = running += gam[i];
  }
  // q, k (L2-normalised), one warp per row; padding rows are zero.
  const float q_scale = rsqrtf(static_cast<float>(dk));
  for (int i = warp; i < kC; i += kThreads / kWarp) {
    float qq = 0.0f, kk = 0.0f;
    for (int d = lane; d < dk; d += kWarp) {
      const float qv = QV[i * lq + d], kv = Ks[i * lq + d];
      qq += qv * qv;
      kk += kv * kv;
    }
    qq = warp_sum(qq);
    kk = warp_sum(kk);
    const float qi = rsqrtf(qq + 1e-6f) * q_scale, ki = rsqrtf(kk + 1e-6f);
    for (int d = lane; d < dk; d += kWarp) {
      QV[i * lq + d] *= qi;
      Ks[i * lq + d] *= ki;
    }
  }
  __syncthreads();  // gam, beta, Qs, Ks ready
  if (tid < kC) {
    eg[tid] = expf(gam[tid]);
    ekp[tid] = expf(gam[kC - 1] - gam[tid]);
    bek[tid] = beta[tid] * eg[tid];
  }
  // K K^T and Q K^T: warp -> m-tile warp / 2, n-tiles 4 (warp % 2) .. + 3; tiles above the diagonal skipped.
  float* aqk = rec + lay.aqk();
  {
    const int mt = warp >> 1, nb = (warp & 1) * 4;
    Acc kk[4], qk[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      acc_zero(kk[j]);
      acc_zero(qk[j]);
    }
    for (int k0 = 0; k0 < dk; k0 += 16) {
      const FragA ak = load_a([&](int r, int c) { return row_pair(Ks + (16 * mt + r) * lq + k0 + c); });
      const FragA aq = load_a([&](int r, int c) { return row_pair(QV + (16 * mt + r) * lq + k0 + c); });
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int n0 = 8 * (nb + j);
        if (n0 <= 16 * mt + 15) {
          const FragB bk = load_b([&](int kx, int nx) { return row_pair(Ks + (n0 + nx) * lq + k0 + kx); });
          mma3(kk[j], ak, bk);
          mma3(qk[j], aq, bk);
        }
      }
    }
#pragma unroll
    for (int j = 0; j < 4; ++j) {
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
        *reinterpret_cast<float2*>(aqk + i * kC + j0) = make_float2(aq[0], aq[1]);
      }
    }
  }
  __syncthreads();  // Akk ready; the products' reads of Qs are done
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
  // Qg, Kp to the record; the 16x16 diagonal blocks of L^-1 by forward substitution, one column per thread.
  for (int e = tid; e < kC * dk; e += kThreads) {
    const int i = e / dk, d = e % dk;
    rec[lay.qg() + e] = QV[i * lq + d] * eg[i];
    rec[lay.kp() + e] = Ks[i * lq + d] * ekp[i];
  }
  if (tid == 0) rec[lay.gc()] = expf(gam[kC - 1]);
  if (tid < kC) {
    const int base = 16 * (tid >> 4), c = tid & 15;
    float* Tb = Tm + base * kLa + base;
    const float* Ab = Akk + base * kLa + base;
    Tb[c * kLa + c] = 1.0f;
    for (int r = c + 1; r < 16; ++r) {
      float s = 0.0f;
      for (int k = c; k < r; ++k) s += Ab[r * kLa + k] * Tb[k * kLa + c];
      Tb[r * kLa + c] = -s;
    }
  }
  __syncthreads();  // Qs free; diagonal blocks ready
#pragma unroll
  for (int u = 0; u < kVLoads; ++u) {
    const int e = tid + u * kThreads, i = e / (dv / 4), c = (e % (dv / 4)) * 4;
    if (e < kC * dv / 4) {
      const float bt = beta[i];  // 0 on padding rows, whose v is 0
      *reinterpret_cast<float4*>(QV + i * lv + c) = make_float4(bt * vin[u].x, bt * vin[u].y, bt * vin[u].z, bt * vin[u].w);
    }
  }
  // Block rows 1..3 of L^-1: T[r, :w] = -D_r (A[r, :w] T[:w, :w]) with w = 16 r (L T = I by block rows).
  for (int br = 1; br < 4; ++br) {
    const int wd = 16 * br;
    for (int e = tid; e < 16 * wd; e += kThreads) {
      const int r = e / wd, c = e % wd;
      float s = 0.0f;
      for (int k = c; k < wd; ++k) s += Akk[(wd + r) * kLa + k] * Tm[k * kLa + c];
      R[r * 48 + c] = s;
    }
    __syncthreads();
    for (int e = tid; e < 16 * wd; e += kThreads) {
      const int r = e / wd, c = e % wd;
      float s = 0.0f;
      for (int m = 0; m <= r; ++m) s += Tm[(wd + r) * kLa + wd + m] * R[m * 48 + c];
      Tm[(wd + r) * kLa + c] = -s;
    }
    __syncthreads();
  }
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
    float* dst = is_w ? rec + lay.w() : rec + lay.u();
    const int ld = is_w ? dk : dv, c_off = is_w ? col : col - dk;
#pragma unroll
    for (int mt = 0; mt < 4; ++mt) {
#pragma unroll
      for (int j = 0; j < 2; ++j) {
#pragma unroll
        for (int e = 0; e < 4; e += 2) {
          const int i = 16 * mt + acc_row(e), c = c_off + 8 * j + acc_col(e);
          *reinterpret_cast<float2*>(dst + static_cast<size_t>(i) * ld + c) =
              make_float2(acc[mt][j].m[e] + acc[mt][j].c[e], acc[mt][j].m[e + 1] + acc[mt][j].c[e + 1]);
        }
      }
    }
  }
}

// ---- sequential pass over chunks, per (head, NC-column slice of the state) ---------------------------------
//
// NC / 4 warps. The state slice [dk][NC] lives in registers (fp32, the accumulators of S <- gC S + Kp^T V'),
// mirrored in shared memory as the B operand of V' = U - W S. Per chunk: wait W, U; V'; prefetch the next W, U
// (overlapping the state update); wait Kp; S update; prefetch the next Kp (overlapping the next V').
// Warp w: V' rows 16 (w % 4) .., state rows 16 (w % 4 + 4 q) .., columns 16 (w / 4) .. + 15 of the slice.

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

template <int NC>
struct ScanSmem {
  static size_t floats(int dk) {
    return static_cast<size_t>(kC) * (dk + 4) + static_cast<size_t>(kC) * (dk + 8) + kC * NC +
           static_cast<size_t>(dk) * (NC + 4) + kC * (NC + 4);
  }
};

template <int NC>
__global__ void __launch_bounds__(NC * 8, NC <= 32 ? 256 / (NC * 8) * 2 : 1)
    chunk_scan_kernel(GatedDeltaNetShape shape, float* __restrict__ ws, int chunks, float* __restrict__ recurrent) {
  constexpr int kScanThreads = NC * 8;
  constexpr int ls = NC + 4;  // S and V' read as column pairs
  extern __shared__ __align__(16) float sm[];
  const int dk = shape.key_dim, dv = shape.value_dim, hv = shape.value_heads;
  const int lw = dk + 8, lk = dk + 4;  // W read as row pairs, Kp as column pairs
  float* Ws = sm;                // [64][lw]
  float* Kps = Ws + kC * lw;     // [64][lk]
  float* Us = Kps + kC * lk;     // [64][NC]
  float* Ss = Us + kC * NC;      // [dk][ls]
  float* Vs = Ss + dk * ls;      // [64][ls]
  const int h = blockIdx.x, col0 = blockIdx.y * NC;
  const int tid = threadIdx.x, warp = tid / kWarp;
  const int mv = warp & 3, nc0 = 16 * (warp >> 2);
  const ChunkLayout lay{dk, dv};
  float* recs = ws + static_cast<size_t>(h) * chunks * lay.stride();
  float* states = ws + static_cast<size_t>(hv) * chunks * lay.stride() + static_cast<size_t>(h) * chunks * lay.state();
  float* Sg = recurrent + static_cast<size_t>(h) * dk * dv;

  float s[2][2][4];
#pragma unroll
  for (int q = 0; q < 2; ++q) {
    const int r0 = 16 * (mv + 4 * q);
#pragma unroll
    for (int j = 0; j < 2; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = r0 + acc_row(e), c = nc0 + 8 * j + acc_col(e);
        s[q][j][e] = r0 < dk ? Sg[static_cast<size_t>(r) * dv + col0 + c] : 0.0f;
        if (r0 < dk) Ss[r * ls + c] = s[q][j][e];
      }
    }
  }
  auto store_state = [&](float* dst) {
#pragma unroll
    for (int q = 0; q < 2; ++q) {
      const int r0 = 16 * (mv + 4 * q);
      if (r0 >= dk) continue;
#pragma unroll
      for (int j = 0; j < 2; ++j) {
#pragma unroll
        for (int e = 0; e < 4; e += 2) {
          const int r = r0 + acc_row(e), c = nc0 + 8 * j + acc_col(e);
          *reinterpret_cast<float2*>(dst + static_cast<size_t>(r) * dv + col0 + c) = make_float2(s[q][j][e], s[q][j][e + 1]);
        }
      }
    }
  };
  auto issue_wu = [&](int chunk) {
    const float* rec = recs + static_cast<size_t>(chunk) * lay.stride();
    for_each_in_block<kScanThreads>(kC, dk / 4, [&](int i, int c4) {
      cp_async16(Ws + i * lw + 4 * c4, rec + lay.w() + static_cast<size_t>(i) * dk + 4 * c4, true);
    });
    for (int e = tid; e < kC * NC / 4; e += kScanThreads) {
      const int i = e / (NC / 4), c = (e % (NC / 4)) * 4;
      cp_async16(Us + i * NC + c, rec + lay.u() + static_cast<size_t>(i) * dv + col0 + c, true);
    }
  };
  auto issue_kp = [&](int chunk) {
    const float* rec = recs + static_cast<size_t>(chunk) * lay.stride();
    for_each_in_block<kScanThreads>(kC, dk / 4, [&](int i, int c4) {
      cp_async16(Kps + i * lk + 4 * c4, rec + lay.kp() + static_cast<size_t>(i) * dk + 4 * c4, true);
    });
  };
  issue_wu(0);
  cp_async_commit();
  issue_kp(0);
  cp_async_commit();

  for (int chunk = 0; chunk < chunks; ++chunk) {
    float* rec = recs + static_cast<size_t>(chunk) * lay.stride();
    scan_phase(chunk, 0);
    const float gC = rec[lay.gc()];
    store_state(states + static_cast<size_t>(chunk) * lay.state());  // the state this chunk starts from
    cp_async_wait<1>();  // W, U of this chunk (the newest group, Kp, may still fly)
    __syncthreads();
    scan_phase(chunk, 1);
    // V' = U - W S (A = -W), to shared memory and over U in the record.
    {
      Acc v[2];
#pragma unroll
      for (int j = 0; j < 2; ++j) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          v[j].m[e] = Us[(16 * mv + acc_row(e)) * NC + nc0 + 8 * j + acc_col(e)];
          v[j].c[e] = 0.0f;
        }
      }
      for (int k0 = 0; k0 < dk; k0 += 16) {
        const FragA af = load_a([&](int r, int c) {
          const float2 w = row_pair(Ws + (16 * mv + r) * lw + k0 + c);
          return make_float2(-w.x, -w.y);
        });
#pragma unroll
        for (int j = 0; j < 2; ++j) {
          const FragB bf = load_b([&](int kx, int nx) { return column_pair(Ss + (k0 + kx) * ls + nc0 + 8 * j + nx, ls); });
          mma3(v[j], af, bf);
        }
      }
#pragma unroll
      for (int j = 0; j < 2; ++j) {
#pragma unroll
        for (int e = 0; e < 4; e += 2) {
          const int r = 16 * mv + acc_row(e), c = nc0 + 8 * j + acc_col(e);
          const float2 val = make_float2(v[j].m[e] + v[j].c[e], v[j].m[e + 1] + v[j].c[e + 1]);
          *reinterpret_cast<float2*>(Vs + r * ls + c) = val;
          *reinterpret_cast<float2*>(rec + lay.u() + static_cast<size_t>(r) * dv + col0 + c) = val;
        }
      }
    }
    scan_phase(chunk, 2);
    __syncthreads();  // V' ready; W, U buffers free
    if (chunk + 1 < chunks) issue_wu(chunk + 1);
    cp_async_commit();
    cp_async_wait<1>();  // Kp of this chunk
    __syncthreads();
    scan_phase(chunk, 3);
    // S <- gC S + Kp^T V' (A = Kp^T, read column-major from Kp).
    {
      Acc acc[2][2];
#pragma unroll
      for (int q = 0; q < 2; ++q) {
#pragma unroll
        for (int j = 0; j < 2; ++j) {
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            acc[q][j].m[e] = gC * s[q][j][e];
            acc[q][j].c[e] = 0.0f;
          }
        }
      }
#pragma unroll 2
      for (int k0 = 0; k0 < kC; k0 += 16) {
        FragB bf[2];
#pragma unroll
        for (int j = 0; j < 2; ++j) {
          bf[j] = load_b([&](int kx, int nx) { return column_pair(Vs + (k0 + kx) * ls + nc0 + 8 * j + nx, ls); });
        }
#pragma unroll
        for (int q = 0; q < 2; ++q) {
          const int r0 = 16 * (mv + 4 * q);
          if (r0 < dk) {
            const FragA af = load_a([&](int r, int kx) { return column_pair(Kps + (k0 + kx) * lk + r0 + r, lk); });
            mma3(acc[q][0], af, bf[0]);
            mma3(acc[q][1], af, bf[1]);
          }
        }
      }
#pragma unroll
      for (int q = 0; q < 2; ++q) {
        const int r0 = 16 * (mv + 4 * q);
#pragma unroll
        for (int j = 0; j < 2; ++j) {
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            s[q][j][e] = acc[q][j].m[e] + acc[q][j].c[e];
            if (r0 < dk) Ss[(r0 + acc_row(e)) * ls + nc0 + 8 * j + acc_col(e)] = s[q][j][e];
          }
        }
      }
    }
    scan_phase(chunk, 4);
    __syncthreads();  // Kp buffer free; Ss updated
    if (chunk + 1 < chunks) issue_kp(chunk + 1);
    cp_async_commit();
    scan_phase(chunk, 5);
  }
  cp_async_wait<0>();
  store_state(Sg);
}

// ---- outputs, one block per (chunk, head): O = Qg S_chunk + Aqk V', then the gated RMSNorm ------------------

size_t out_smem_floats(int dk, int dv) {
  return static_cast<size_t>(kC) * std::max({dk + 8, kLa, dv + 4}) + static_cast<size_t>(std::max(dk, kC)) * (dv + 4);
}

__global__ void __launch_bounds__(kThreads, 2)
    chunk_out_kernel(GatedDeltaNetShape shape, const uint16_t* __restrict__ norm_w, const float* __restrict__ z,
                     const float* __restrict__ ws, int tokens, int chunks, __nv_bfloat16* __restrict__ out_hi,
                     __nv_bfloat16* __restrict__ out_lo) {
  extern __shared__ __align__(16) float sm[];
  const int dk = shape.key_dim, dv = shape.value_dim, hv = shape.value_heads;
  const int lb = dv + 4;  // S and V' read as column pairs
  float* As = sm;                                // Qg [64][dk+8], then Aqk [64][kLa], then z [64][lb]
  float* Bs = As + kC * max(max(dk + 8, kLa), lb);  // S [dk][lb], then V' [64][lb], then O [64][lb]
  const int chunk = blockIdx.x, h = blockIdx.y;
  const int tid = threadIdx.x, lane = tid % kWarp, warp = tid / kWarp;
  const ChunkLayout lay{dk, dv};
  const float* rec = ws + (static_cast<size_t>(h) * chunks + chunk) * lay.stride();
  const float* state =
      ws + static_cast<size_t>(hv) * chunks * lay.stride() + (static_cast<size_t>(h) * chunks + chunk) * lay.state();
  const int mt = warp & 3, nb = warp >> 2, ntiles = dv / 8;  // warp: m-tile mt, n-tiles nb, nb + 2, ...

  // Phase 1: Qg S.
  {
    const int la = dk + 8;  // Qg read as row pairs
    for_each_in_block<kThreads>(kC, dk / 4, [&](int i, int c4) {
      cp_async16(As + i * la + 4 * c4, rec + lay.qg() + static_cast<size_t>(i) * dk + 4 * c4, true);
    });
    for_each_in_block<kThreads>(dk, dv / 4, [&](int r, int c4) {
      cp_async16(Bs + r * lb + 4 * c4, state + static_cast<size_t>(r) * dv + 4 * c4, true);
    });
    cp_async_commit();
  }
  Acc acc[kMaxDim / 16];
#pragma unroll
  for (int j = 0; j < kMaxDim / 16; ++j) acc_zero(acc[j]);
  cp_async_wait<0>();
  __syncthreads();
  {
    const int la = dk + 8;  // Qg read as row pairs
    for (int k0 = 0; k0 < dk; k0 += 16) {
      const FragA af = load_a([&](int r, int c) { return row_pair(As + (16 * mt + r) * la + k0 + c); });
#pragma unroll
      for (int j = 0; j < kMaxDim / 16; ++j) {
        const int n0 = 8 * (nb + 2 * j);
        if (nb + 2 * j < ntiles) {
          const FragB bf = load_b([&](int kx, int nx) { return column_pair(Bs + (k0 + kx) * lb + n0 + nx, lb); });
          mma3(acc[j], af, bf);
        }
      }
    }
  }
  __syncthreads();
  // Phase 2: + Aqk V' (Aqk is zero above the diagonal: k-steps past the m-tile skipped).
  {
    for (int e = tid; e < kC * kC / 4; e += kThreads) {
      const int i = e / (kC / 4), c = (e % (kC / 4)) * 4;
      cp_async16(As + i * kLa + c, rec + lay.aqk() + i * kC + c, true);
    }
    for_each_in_block<kThreads>(kC, dv / 4, [&](int r, int c4) {
      cp_async16(Bs + r * lb + 4 * c4, rec + lay.u() + static_cast<size_t>(r) * dv + 4 * c4, true);
    });
    cp_async_commit();
    cp_async_wait<0>();
    __syncthreads();
    for (int k0 = 0; k0 < 16 * mt + 16; k0 += 16) {
      const FragA af = load_a([&](int r, int c) { return row_pair(As + (16 * mt + r) * kLa + k0 + c); });
#pragma unroll
      for (int j = 0; j < kMaxDim / 16; ++j) {
        const int n0 = 8 * (nb + 2 * j);
        if (nb + 2 * j < ntiles) {
          const FragB bf = load_b([&](int kx, int nx) { return column_pair(Bs + (k0 + kx) * lb + n0 + nx, lb); });
          mma3(acc[j], af, bf);
        }
      }
    }
  }
  __syncthreads();
  // The gate rows of the chunk into As (free now), in flight while O goes to shared memory: the norm loop's
  // loads of z, a row per warp, were eight dependent round trips.
  float* Zs = As;  // [64][lb]
  for_each_in_block<kThreads>(kC, dv / 4, [&](int i, int c4) {
    const int t = chunk * kC + i;
    cp_async16(Zs + i * lb + 4 * c4, z + (static_cast<size_t>(t < tokens ? t : 0) * hv + h) * dv + 4 * c4, t < tokens);
  });
  cp_async_commit();
  float* Os = Bs;  // [64][lb]
#pragma unroll
  for (int j = 0; j < kMaxDim / 16; ++j) {
    const int n0 = 8 * (nb + 2 * j);
    if (nb + 2 * j < ntiles) {
#pragma unroll
      for (int e = 0; e < 4; ++e) Os[(16 * mt + acc_row(e)) * lb + n0 + acc_col(e)] = acc[j].m[e] + acc[j].c[e];
    }
  }
  cp_async_wait<0>();
  __syncthreads();
  // Gated RMSNorm per token row, one warp per row (as the decode step's).
  for (int i = warp; i < kC; i += kThreads / kWarp) {
    const int t = chunk * kC + i;
    if (t >= tokens) break;
    const size_t item = static_cast<size_t>(t) * hv + h;
    float vals[kMaxDim / kWarp];
    float ss = 0.0f;
#pragma unroll
    for (int m = 0; m < kMaxDim / kWarp; ++m) {
      const int j = lane + m * kWarp;
      vals[m] = j < dv ? Os[i * lb + j] : 0.0f;
      ss += vals[m] * vals[m];
    }
    const float inv = rsqrtf(warp_sum(ss) / static_cast<float>(dv) + shape.eps);
#pragma unroll
    for (int m = 0; m < kMaxDim / kWarp; ++m) {
      const int j = lane + m * kWarp;
      if (j < dv) {
        const float gate = Zs[i * lb + j];
        const float act = shape.sigmoid_gate ? sigmoidf(gate) : gate * sigmoidf(gate);
        const float o = bf16_bits_to_float(norm_w[j]) * (vals[m] * inv) * act;
        const __nv_bfloat16 hi = __float2bfloat16_rn(o);
        out_hi[item * dv + j] = hi;
        out_lo[item * dv + j] = __float2bfloat16_rn(o - __bfloat162float(hi));
      }
    }
  }
}

template <typename Kernel>
void set_smem(Kernel kernel, size_t bytes) {
  IMP_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
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
                                uint16_t* out_hi, uint16_t* out_lo, cudaStream_t stream) {
  const int dk = shape.key_dim, dv = shape.value_dim;
  if (dk % 16 != 0 || dv % 16 != 0 || dk <= 0 || dv <= 0 || dk > kMaxDim || dv > kMaxDim ||
      shape.value_heads % shape.key_heads != 0) {
    throw_invalid_launch("gdn chunked prefill: head dims must be multiples of 16 up to 128, value heads a multiple of key heads");
  }
  if (tokens <= 0) return;
  if (workspace_bytes < gdn_prefill_workspace_bytes(shape, tokens) || reinterpret_cast<uintptr_t>(workspace) % 16 != 0 ||
      out_hi == nullptr || out_lo == nullptr || reinterpret_cast<uintptr_t>(conv_out) % 16 != 0 ||
      reinterpret_cast<uintptr_t>(z) % 16 != 0) {
    throw_invalid_launch("gdn chunked prefill: workspace too small or misaligned, inputs not 16-byte aligned, or no output");
  }
  const int chunks = (tokens + kC - 1) / kC;
  float* ws = static_cast<float*>(workspace);

  static const bool ready = [] {
    set_smem(chunk_prep_kernel, prep_smem_floats(kMaxDim, kMaxDim) * sizeof(float));
    set_smem(chunk_scan_kernel<64>, ScanSmem<64>::floats(kMaxDim) * sizeof(float));
    set_smem(chunk_scan_kernel<32>, ScanSmem<32>::floats(kMaxDim) * sizeof(float));
    set_smem(chunk_scan_kernel<16>, ScanSmem<16>::floats(kMaxDim) * sizeof(float));
    set_smem(chunk_out_kernel, out_smem_floats(kMaxDim, kMaxDim) * sizeof(float));
    return true;
  }();
  (void)ready;

  chunk_prep_kernel<<<dim3(chunks, shape.value_heads), kThreads, prep_smem_floats(dk, dv) * sizeof(float), stream>>>(
      shape, w, conv_out, b, a, tokens, chunks, ws);
  IMP_CUDA_CHECK_LAUNCH();
  // The widest slice that divides dv: at 64 columns one 512-thread block per SM (96 blocks at the released shape)
  // shares each chunk's W and Kp loads over twice the columns of the 32-column slices, of which two blocks shared
  // an SM on 60 SMs (4096-token chunk: 511 -> 488 us per layer, session 18).
  if (dv % 64 == 0) {
    chunk_scan_kernel<64><<<dim3(shape.value_heads, dv / 64), 64 * 8, ScanSmem<64>::floats(dk) * sizeof(float), stream>>>(
        shape, ws, chunks, recurrent);
  } else if (dv % 32 == 0) {
    chunk_scan_kernel<32><<<dim3(shape.value_heads, dv / 32), 32 * 8, ScanSmem<32>::floats(dk) * sizeof(float), stream>>>(
        shape, ws, chunks, recurrent);
  } else {
    chunk_scan_kernel<16><<<dim3(shape.value_heads, dv / 16), 16 * 8, ScanSmem<16>::floats(dk) * sizeof(float), stream>>>(
        shape, ws, chunks, recurrent);
  }
  IMP_CUDA_CHECK_LAUNCH();
  chunk_out_kernel<<<dim3(chunks, shape.value_heads), kThreads, out_smem_floats(dk, dv) * sizeof(float), stream>>>(
      shape, w.norm, z, ws, tokens, chunks, reinterpret_cast<__nv_bfloat16*>(out_hi),
      reinterpret_cast<__nv_bfloat16*>(out_lo));
  IMP_CUDA_CHECK_LAUNCH();
}

}  // namespace imp::cuda
