#include "cuda/kernels/gated_delta_net_prefill.h"

#include "cuda/check.h"
#include "cuda/kernels/device_math.cuh"
#include "cuda/kernels/fp_codes.cuh"
#include "cuda/kernels/prefill_common.cuh"

namespace imp::cuda {
namespace {

using namespace prefill;

constexpr int kC = 64;           // chunk length
constexpr int kMaxDim = 128;     // key_dim, value_dim
constexpr int kConvTokens = 32;  // tokens per conv thread

// ---- conv ----------------------------------------------------------------------------------------------

template <int K>
__global__ void conv_prefill_kernel(const uint16_t* conv_w, const float* __restrict__ mixed, const float* __restrict__ state,
                                    int channels, int tokens, float* __restrict__ out) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  const int t0 = blockIdx.y * kConvTokens;
  if (c >= channels) return;
  float w[K], hist[K - 1];
#pragma unroll
  for (int j = 0; j < K; ++j) w[j] = bf16_bits_to_float(conv_w[static_cast<size_t>(c) * K + j]);
#pragma unroll
  for (int j = 0; j < K - 1; ++j) {
    const int t = t0 - (K - 1) + j;  // input time; negative times come from the state
    hist[j] = t >= 0 ? mixed[static_cast<size_t>(t) * channels + c] : state[static_cast<size_t>(t + K - 1) * channels + c];
  }
  const int t_end = min(t0 + kConvTokens, tokens);
  for (int t = t0; t < t_end; ++t) {
    const float xin = mixed[static_cast<size_t>(t) * channels + c];
    float sum = 0.0f;
#pragma unroll
    for (int j = 0; j < K - 1; ++j) sum += w[j] * hist[j];
    sum += w[K - 1] * xin;
    out[static_cast<size_t>(t) * channels + c] = sum * sigmoidf(sum);
#pragma unroll
    for (int j = 0; j + 1 < K - 1; ++j) hist[j] = hist[j + 1];
    hist[K - 2] = xin;
  }
}

// The state becomes the last K-1 rows of [state ++ mixed]; row r reads index tokens + r >= r, so ascending r
// in place is safe.
__global__ void conv_state_kernel(const float* __restrict__ mixed, float* state, int channels, int tokens, int K) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= channels) return;
  for (int r = 0; r < K - 1; ++r) {
    const int s = tokens + r;
    state[static_cast<size_t>(r) * channels + c] =
        s < K - 1 ? state[static_cast<size_t>(s) * channels + c] : mixed[static_cast<size_t>(s - (K - 1)) * channels + c];
  }
}

// ---- chunk preparation (state independent) -------------------------------------------------------------

// Per (head, chunk) record in the workspace, floats:
//   WT [dk][64] (W transposed), QT [dk][64] ((Q e^gamma) transposed), Kp [64][dk] (K e^(gamma_C - gamma)),
//   U [64][dv], AqkT [64][64] (((Q K^T) * Gamma) transposed, zero above the diagonal), gC (e^gamma_C), pad.
struct ChunkLayout {
  int dk, dv;
  __host__ __device__ size_t wt() const { return 0; }
  __host__ __device__ size_t qt() const { return static_cast<size_t>(dk) * kC; }
  __host__ __device__ size_t kp() const { return 2 * static_cast<size_t>(dk) * kC; }
  __host__ __device__ size_t u() const { return 3 * static_cast<size_t>(dk) * kC; }
  __host__ __device__ size_t aqk() const { return u() + static_cast<size_t>(kC) * dv; }
  __host__ __device__ size_t gc() const { return aqk() + kC * kC; }
  __host__ __device__ size_t stride() const { return gc() + 4; }  // multiple of 4 floats: 16-byte records
};

constexpr int kPrepThreads = 256;

__global__ void __launch_bounds__(kPrepThreads)
    chunk_prep_kernel(GatedDeltaNetShape shape, GatedDeltaNetWeightsDevice w, const float* __restrict__ conv_out,
                      const float* __restrict__ b, const float* __restrict__ a, int tokens, int chunks,
                      float* __restrict__ ws) {
  extern __shared__ __align__(16) float sm[];
  const int dk = shape.key_dim, dv = shape.value_dim, hv = shape.value_heads;
  const int ks = dk + 1, xs = dv + dk + 1;  // padded strides (conflict-free column reads)
  float* Ks = sm;                       // [64][dk+1]
  float* Qs = Ks + kC * ks;             // [64][dk+1]
  float* X = Qs + kC * ks;              // [64][dv+dk]: beta V | beta e^gamma K, solved in place into U | W
  float* Akk = X + kC * xs;             // [64][65]
  float* beta = Akk + kC * 65;          // [64]
  float* gam = beta + kC;               // [64]

  const int chunk = blockIdx.x, h = blockIdx.y;
  const int c0 = chunk * kC, n = min(kC, tokens - c0);
  const int kh = h / (hv / shape.key_heads);
  const int channels = shape.conv_channels(), key_total = shape.key_heads * dk;
  const int tid = threadIdx.x, lane = tid % kWarp, warp = tid / kWarp;
  const ChunkLayout lay{dk, dv};
  float* rec = ws + (static_cast<size_t>(h) * chunks + chunk) * lay.stride();

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
  __syncthreads();
  if (tid == 0) {  // inclusive cumsum in order, as the reference; padding adds g = 0
    float running = 0.0f;
    for (int i = 0; i < kC; ++i) gam[i] = running += gam[i];
  }
  // q, k (L2-normalised), one warp per row.
  const float q_scale = rsqrtf(static_cast<float>(dk));
  for (int i = warp; i < kC; i += kPrepThreads / kWarp) {
    const float* row = conv_out + static_cast<size_t>(c0 + i) * channels;
    float qq = 0.0f, kk = 0.0f;
    for (int d = lane; d < dk; d += kWarp) {
      const float qv = i < n ? row[kh * dk + d] : 0.0f, kv = i < n ? row[key_total + kh * dk + d] : 0.0f;
      Qs[i * ks + d] = qv;
      Ks[i * ks + d] = kv;
      qq += qv * qv;
      kk += kv * kv;
    }
    qq = warp_sum(qq);
    kk = warp_sum(kk);
    const float qi = rsqrtf(qq + 1e-6f) * q_scale, ki = rsqrtf(kk + 1e-6f);
    for (int d = lane; d < dk; d += kWarp) {
      Qs[i * ks + d] *= qi;
      Ks[i * ks + d] *= ki;
    }
  }
  __syncthreads();  // gam, beta, Qs, Ks ready
  const int xcols = dv + dk;
  for (int e = tid; e < kC * xcols; e += kPrepThreads) {
    const int i = e / xcols, col = e % xcols;
    float v;
    if (col < dv) {
      v = i < n ? beta[i] * conv_out[static_cast<size_t>(c0 + i) * channels + 2 * key_total + h * dv + col] : 0.0f;
    } else {
      v = beta[i] * expf(gam[i]) * Ks[i * ks + col - dv];
    }
    X[i * xs + col] = v;
  }
  // Akk (strictly lower) and AqkT (lower with the diagonal), straight to the workspace. Warp w: rows
  // w + 16p and w + 16p + 8; lane: keys lane and lane + 32 (eight independent dot products).
  float* aqkT = rec + lay.aqk();
  for (int p = 0; p < kC / 16; ++p) {
    const int i0 = warp + 16 * p, i1 = i0 + 8, j0 = lane, j1 = lane + 32;
    float kk[2][2] = {{0.0f, 0.0f}, {0.0f, 0.0f}}, qk[2][2] = {{0.0f, 0.0f}, {0.0f, 0.0f}};
    for (int d = 0; d < dk; ++d) {
      const float kj0 = Ks[j0 * ks + d], kj1 = Ks[j1 * ks + d];
      const float ki0 = Ks[i0 * ks + d], ki1 = Ks[i1 * ks + d], qi0 = Qs[i0 * ks + d], qi1 = Qs[i1 * ks + d];
      kk[0][0] += ki0 * kj0;
      kk[0][1] += ki0 * kj1;
      kk[1][0] += ki1 * kj0;
      kk[1][1] += ki1 * kj1;
      qk[0][0] += qi0 * kj0;
      qk[0][1] += qi0 * kj1;
      qk[1][0] += qi1 * kj0;
      qk[1][1] += qi1 * kj1;
    }
#pragma unroll
    for (int a = 0; a < 2; ++a) {
#pragma unroll
      for (int bb = 0; bb < 2; ++bb) {
        const int i = a ? i1 : i0, j = bb ? j1 : j0;
        const float decay = j <= i ? expf(gam[i] - gam[j]) : 0.0f;
        Akk[i * 65 + j] = j < i ? beta[i] * kk[a][bb] * decay : 0.0f;
        aqkT[j * kC + i] = j <= i ? qk[a][bb] * decay : 0.0f;
      }
    }
  }
  __syncthreads();
  // Forward substitution, one column per thread: X[i] -= sum_{j<i} Akk[i][j] X[j].
  // Four partial sums per row for instruction-level parallelism.
  for (int col = tid; col < xcols; col += kPrepThreads) {
    for (int i = 1; i < kC; ++i) {
      float p0 = 0.0f, p1 = 0.0f, p2 = 0.0f, p3 = 0.0f;
      int j = 0;
      for (; j + 4 <= i; j += 4) {
        p0 += Akk[i * 65 + j] * X[j * xs + col];
        p1 += Akk[i * 65 + j + 1] * X[(j + 1) * xs + col];
        p2 += Akk[i * 65 + j + 2] * X[(j + 2) * xs + col];
        p3 += Akk[i * 65 + j + 3] * X[(j + 3) * xs + col];
      }
      for (; j < i; ++j) p0 += Akk[i * 65 + j] * X[j * xs + col];
      X[i * xs + col] -= (p0 + p1) + (p2 + p3);
    }
  }
  __syncthreads();
  const float gC = gam[kC - 1];
  for (int e = tid; e < kC * dv; e += kPrepThreads) rec[lay.u() + e] = X[(e / dv) * xs + e % dv];
  for (int e = tid; e < dk * kC; e += kPrepThreads) {
    const int r = e / kC, i = e % kC;
    rec[lay.wt() + e] = X[i * xs + dv + r];
    rec[lay.qt() + e] = Qs[i * ks + r] * expf(gam[i]);
  }
  for (int e = tid; e < kC * dk; e += kPrepThreads) {
    const int i = e / dk, r = e % dk;
    rec[lay.kp() + e] = Ks[i * ks + r] * expf(gC - gam[i]);
  }
  if (tid == 0) rec[lay.gc()] = expf(gC);
}

size_t prep_smem_bytes(int dk, int dv) {
  return (2 * static_cast<size_t>(kC) * (dk + 1) + static_cast<size_t>(kC) * (dv + dk + 1) + kC * 65 + 2 * kC) * sizeof(float);
}

// ---- sequential pass over chunks, per (head, column slice of the state) --------------------------------

template <int CB>
struct ScanSmem {
  static size_t floats(int dk) {
    return 3 * static_cast<size_t>(dk) * kC + kC * CB + kC * kC + static_cast<size_t>(dk) * CB + kC * CB;
  }
};

template <int CB>
__global__ void __launch_bounds__(16 * CB / 2)
    chunk_scan_kernel(GatedDeltaNetShape shape, const float* __restrict__ ws, int tokens, int chunks,
                      float* __restrict__ recurrent, float* __restrict__ out) {
  constexpr int kThreads = 16 * CB / 2;
  constexpr int kHalf = CB / 2;
  extern __shared__ __align__(16) float sm[];
  const int dk = shape.key_dim, dv = shape.value_dim, hv = shape.value_heads;
  float* WT = sm;                // [dk][64]
  float* QT = WT + dk * kC;      // [dk][64]
  float* Kp = QT + dk * kC;      // [64][dk]
  float* Ub = Kp + kC * dk;      // [64][CB]
  float* AqkT = Ub + kC * CB;    // [64][64]
  float* S = AqkT + kC * kC;     // [dk][CB]
  float* Vn = S + dk * CB;       // [64][CB]
  const int h = blockIdx.x, col0 = blockIdx.y * CB;
  const int tid = threadIdx.x, tr = tid / kHalf, tc = tid % kHalf;
  const ChunkLayout lay{dk, dv};
  float* Sg = recurrent + static_cast<size_t>(h) * dk * dv;
  for (int e = tid; e < dk * CB; e += kThreads) S[e] = Sg[static_cast<size_t>(e / CB) * dv + col0 + e % CB];

  for (int chunk = 0; chunk < chunks; ++chunk) {
    const float* rec = ws + (static_cast<size_t>(h) * chunks + chunk) * lay.stride();
    // WT, QT, Kp are contiguous in the record; U is a column slice; AqkT contiguous.
    for (int e = tid; e < 3 * dk * kC / 4; e += kThreads) cp_async16(WT + 4 * e, rec + 4 * e, true);
    for (int e = tid; e < kC * CB / 4; e += kThreads) {
      const int i = e / (CB / 4), c4 = (e % (CB / 4)) * 4;
      cp_async16(Ub + i * CB + c4, rec + lay.u() + static_cast<size_t>(i) * dv + col0 + c4, true);
    }
    for (int e = tid; e < kC * kC / 4; e += kThreads) cp_async16(AqkT + 4 * e, rec + lay.aqk() + 4 * e, true);
    cp_async_commit();
    const float gC = rec[lay.gc()];
    cp_async_wait<0>();
    __syncthreads();

    // V' = U - W S: rows tr + 16m, columns 2tc, 2tc+1 (r outer: eight independent accumulators).
    constexpr int kM = kC / 16;
    float acc[kM][2];
#pragma unroll
    for (int m = 0; m < kM; ++m) {
      acc[m][0] = Ub[(tr + 16 * m) * CB + 2 * tc];
      acc[m][1] = Ub[(tr + 16 * m) * CB + 2 * tc + 1];
    }
    for (int r = 0; r < dk; ++r) {
      const float2 sv = *reinterpret_cast<const float2*>(S + r * CB + 2 * tc);
#pragma unroll
      for (int m = 0; m < kM; ++m) {
        const float wv = WT[r * kC + tr + 16 * m];
        acc[m][0] -= wv * sv.x;
        acc[m][1] -= wv * sv.y;
      }
    }
#pragma unroll
    for (int m = 0; m < kM; ++m) *reinterpret_cast<float2*>(Vn + (tr + 16 * m) * CB + 2 * tc) = make_float2(acc[m][0], acc[m][1]);
    __syncthreads();
    // O = (Q e^gamma) S + AqkT^T V' (AqkT is zero above the diagonal).
#pragma unroll
    for (int m = 0; m < kM; ++m) acc[m][0] = acc[m][1] = 0.0f;
    for (int r = 0; r < dk; ++r) {
      const float2 sv = *reinterpret_cast<const float2*>(S + r * CB + 2 * tc);
#pragma unroll
      for (int m = 0; m < kM; ++m) {
        const float qv = QT[r * kC + tr + 16 * m];
        acc[m][0] += qv * sv.x;
        acc[m][1] += qv * sv.y;
      }
    }
    for (int j = 0; j < kC; ++j) {
      const float2 v = *reinterpret_cast<const float2*>(Vn + j * CB + 2 * tc);
#pragma unroll
      for (int m = 0; m < kM; ++m) {
        const float av = AqkT[j * kC + tr + 16 * m];
        acc[m][0] += av * v.x;
        acc[m][1] += av * v.y;
      }
    }
#pragma unroll
    for (int m = 0; m < kM; ++m) {
      const int t = chunk * kC + tr + 16 * m;
      if (t < tokens) {
        *reinterpret_cast<float2*>(out + (static_cast<size_t>(t) * hv + h) * dv + col0 + 2 * tc) = make_float2(acc[m][0], acc[m][1]);
      }
    }
    // S <- e^gamma_C S + Kp^T V' (new values in registers until everyone has read the old S).
    float s_new[kMaxDim / 16][2];
#pragma unroll
    for (int m = 0; m < kMaxDim / 16; ++m) {
      const int r = min(tr + 16 * m, dk - 1);  // rows >= dk are computed on a duplicate and never stored
      s_new[m][0] = gC * S[r * CB + 2 * tc];
      s_new[m][1] = gC * S[r * CB + 2 * tc + 1];
    }
    for (int i = 0; i < kC; ++i) {
      const float2 v = *reinterpret_cast<const float2*>(Vn + i * CB + 2 * tc);
#pragma unroll
      for (int m = 0; m < kMaxDim / 16; ++m) {
        const float kv = Kp[i * dk + min(tr + 16 * m, dk - 1)];
        s_new[m][0] += kv * v.x;
        s_new[m][1] += kv * v.y;
      }
    }
    __syncthreads();
#pragma unroll
    for (int m = 0; m < kMaxDim / 16; ++m) {
      const int r = tr + 16 * m;
      if (r < dk) *reinterpret_cast<float2*>(S + r * CB + 2 * tc) = make_float2(s_new[m][0], s_new[m][1]);
    }
    // The next chunk's copies overwrite WT..AqkT, read only before the barrier above; S is next read after
    // the next chunk's barrier.
  }
  __syncthreads();
  for (int e = tid; e < dk * CB; e += kThreads) Sg[static_cast<size_t>(e / CB) * dv + col0 + e % CB] = S[e];
}

// Gated RMSNorm per (token, head), one warp each; in place allowed.
__global__ void gated_norm_kernel(GatedDeltaNetShape shape, const uint16_t* norm_w, const float* o, const float* z,
                                  int items, float* out) {
  const int item = blockIdx.x * (blockDim.x / kWarp) + threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  if (item >= items) return;
  const int dv = shape.value_dim;
  const float* orow = o + static_cast<size_t>(item) * dv;
  float vals[kMaxDim / kWarp];
  float ss = 0.0f;
#pragma unroll
  for (int m = 0; m < kMaxDim / kWarp; ++m) {
    const int j = lane + m * kWarp;
    vals[m] = j < dv ? orow[j] : 0.0f;
    ss += vals[m] * vals[m];
  }
  const float inv = rsqrtf(warp_sum(ss) / static_cast<float>(dv) + shape.eps);
#pragma unroll
  for (int m = 0; m < kMaxDim / kWarp; ++m) {
    const int j = lane + m * kWarp;
    if (j < dv) {
      const float gate = z[static_cast<size_t>(item) * dv + j];
      const float act = shape.sigmoid_gate ? sigmoidf(gate) : gate * sigmoidf(gate);
      out[static_cast<size_t>(item) * dv + j] = bf16_bits_to_float(norm_w[j]) * (vals[m] * inv) * act;
    }
  }
}

template <typename Kernel>
void set_smem(Kernel kernel, size_t bytes) {
  IMP_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
}

}  // namespace

void launch_gdn_conv_prefill(const GatedDeltaNetShape& shape, const GatedDeltaNetWeightsDevice& w, const float* mixed,
                             float* conv_state, int32_t tokens, float* out, cudaStream_t stream) {
  if (tokens <= 0) return;
  const int channels = shape.conv_channels();
  const dim3 grid((channels + 127) / 128, (tokens + kConvTokens - 1) / kConvTokens);
  switch (shape.conv_kernel) {
#define IMP_CONV_CASE(K) \
  case K: conv_prefill_kernel<K><<<grid, 128, 0, stream>>>(w.conv1d, mixed, conv_state, channels, tokens, out); break;
    IMP_CONV_CASE(2) IMP_CONV_CASE(3) IMP_CONV_CASE(4) IMP_CONV_CASE(5) IMP_CONV_CASE(6) IMP_CONV_CASE(7) IMP_CONV_CASE(8)
#undef IMP_CONV_CASE
    default:
      throw_invalid_launch("gdn conv prefill: kernel size must be 2..8");
  }
  IMP_CUDA_CHECK_LAUNCH();
  conv_state_kernel<<<(channels + 255) / 256, 256, 0, stream>>>(mixed, conv_state, channels, tokens, shape.conv_kernel);
  IMP_CUDA_CHECK_LAUNCH();
}

size_t gdn_prefill_workspace_bytes(const GatedDeltaNetShape& shape, int32_t tokens) {
  const size_t chunks = (static_cast<size_t>(tokens) + kC - 1) / kC;
  return chunks * shape.value_heads * ChunkLayout{shape.key_dim, shape.value_dim}.stride() * sizeof(float);
}

void launch_gdn_chunked_prefill(const GatedDeltaNetShape& shape, const GatedDeltaNetWeightsDevice& w,
                                const float* conv_out, const float* z, const float* b, const float* a,
                                float* recurrent, int32_t tokens, void* workspace, size_t workspace_bytes, float* out,
                                cudaStream_t stream) {
  const int dk = shape.key_dim, dv = shape.value_dim;
  if (dk % 16 != 0 || dv % 16 != 0 || dk <= 0 || dv <= 0 || dk > kMaxDim || dv > kMaxDim ||
      shape.value_heads % shape.key_heads != 0) {
    throw_invalid_launch("gdn chunked prefill: head dims must be multiples of 16 up to 128, value heads a multiple of key heads");
  }
  if (tokens <= 0) return;
  if (workspace_bytes < gdn_prefill_workspace_bytes(shape, tokens) || reinterpret_cast<uintptr_t>(workspace) % 16 != 0 ||
      reinterpret_cast<uintptr_t>(out) % 8 != 0) {
    throw_invalid_launch("gdn chunked prefill: workspace too small or misaligned, or out not 8-byte aligned");
  }
  const int chunks = (tokens + kC - 1) / kC;
  float* ws = static_cast<float*>(workspace);

  const size_t prep_bytes = prep_smem_bytes(dk, dv);
  static const bool prep_ready = [] {
    set_smem(chunk_prep_kernel, prep_smem_bytes(kMaxDim, kMaxDim));
    return true;
  }();
  (void)prep_ready;
  chunk_prep_kernel<<<dim3(chunks, shape.value_heads), kPrepThreads, prep_bytes, stream>>>(shape, w, conv_out, b, a,
                                                                                            tokens, chunks, ws);
  IMP_CUDA_CHECK_LAUNCH();

  if (dv % 32 == 0) {
    static const bool ready = [] {
      set_smem(chunk_scan_kernel<32>, ScanSmem<32>::floats(kMaxDim) * sizeof(float));
      return true;
    }();
    (void)ready;
    chunk_scan_kernel<32><<<dim3(shape.value_heads, dv / 32), 16 * 16, ScanSmem<32>::floats(dk) * sizeof(float), stream>>>(
        shape, ws, tokens, chunks, recurrent, out);
  } else {
    static const bool ready = [] {
      set_smem(chunk_scan_kernel<16>, ScanSmem<16>::floats(kMaxDim) * sizeof(float));
      return true;
    }();
    (void)ready;
    chunk_scan_kernel<16><<<dim3(shape.value_heads, dv / 16), 16 * 8, ScanSmem<16>::floats(dk) * sizeof(float), stream>>>(
        shape, ws, tokens, chunks, recurrent, out);
  }
  IMP_CUDA_CHECK_LAUNCH();

  const int items = tokens * shape.value_heads;
  gated_norm_kernel<<<(items + 7) / 8, 256, 0, stream>>>(shape, w.norm, out, z, items, out);
  IMP_CUDA_CHECK_LAUNCH();
}

}  // namespace imp::cuda
