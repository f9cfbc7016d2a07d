#include "cuda/kernels/gated_delta_net.h"

#include <algorithm>

#include <cooperative_groups.h>

#include "cuda/check.h"
#include "cuda/launch.h"
#include "cuda/kernels/device_math.cuh"
#include "cuda/kernels/fp_codes.cuh"
#include "cuda/kernels/gemv_row.cuh"

namespace imp::cuda {
namespace {

constexpr int kMaxDim = 1024;  // key and value head dims of the recurrent step (its slices of key rows, its columns)
constexpr int kStepThreads = 1024;  // recurrent step: value columns x key slices
constexpr int kCacheRows = 16;  // state rows per thread kept in registers between read and write
constexpr int kMaxClusterParts = 8;  // blocks per head in the recurrent step (the portable cluster limit)

namespace cg = cooperative_groups;

// One channel's conv step: current is the projection's output; returns silu of the conv and shifts the state.
__device__ __forceinline__ float conv_step_channel(const uint16_t* conv_w, int K, float* st, int channels, int c,
                                                   float current) {
  float sum = bf16_bits_to_float(conv_w[c * K + K - 1]) * current;
  for (int j = 0; j < K - 1; ++j) sum += bf16_bits_to_float(conv_w[c * K + j]) * st[j * channels + c];
  for (int j = 0; j + 1 < K - 1; ++j) st[j * channels + c] = st[(j + 1) * channels + c];
  st[(K - 2) * channels + c] = current;
  return sum * sigmoidf(sum);
}

__global__ void gdn_conv_step_kernel(GatedDeltaNetShape shape, const uint16_t* conv_w, float* mixed, float* state,
                                     int channels) {
  pdl_begin();
  const int row = blockIdx.y;
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= channels) return;
  const int K = shape.conv_kernel;
  float* x = mixed + static_cast<size_t>(row) * channels;
  x[c] = conv_step_channel(conv_w, K, state + static_cast<size_t>(row) * (K - 1) * channels, channels, c, x[c]);
}

// Decode: in_proj's GEMV (split-K, gemv_row.cuh) with the conv step applied to the first `channels` outputs
// by the thread that completes each (one per output row, so every channel's state is touched once). That thread
// loads its channel's taps and conv state before the wait (weights, and state only this kernel writes, one decode
// step ago): after the dots they were one more L2 round trip at the end of every block.
// The z rows [channels, channels + z_rows) are left to gdn_gate_act_kernel; n counts the rows computed here.
__global__ void gdn_in_proj_conv_kernel(const uint16_t* weight, const float* x, int n, int k, int split,
                                        const uint16_t* conv_w, int K, float* conv_state, int channels, int z_rows,
                                        float* y) {
  pdl_trigger();  // weights first: the dots wait before they read x
  const SkipRows rows{channels, z_rows};
  // Four taps and three states as scalars (arrays here ended up in local memory).
  float w0 = 0.0f, w1 = 0.0f, w2 = 0.0f, w3 = 0.0f, s0 = 0.0f, s1 = 0.0f, s2 = 0.0f;
  const int mine = gemv_finisher_row(n, split, rows);
  if (mine >= 0 && mine < channels) {
    const uint16_t* wc = conv_w + static_cast<size_t>(mine) * K;
    w0 = bf16_bits_to_float(wc[0]);
    w1 = bf16_bits_to_float(wc[1]);
    if (K > 2) w2 = bf16_bits_to_float(wc[2]);
    if (K > 3) w3 = bf16_bits_to_float(wc[3]);
    s0 = conv_state[mine];
    if (K > 2) s1 = conv_state[channels + mine];
    if (K > 3) s2 = conv_state[2 * channels + mine];
  }
  gemv_rows<1>(weight, n, k, split, PlainX{x, k}, [&](int row, const float (&acc)[1]) {
    if (row >= channels) {
      y[row] = acc[0];
      return;
    }
    // conv_step_channel's arithmetic (the last tap on the current value, then the older ones in order), from the
    // registers; the state shifts by one.
    const float current = acc[0];
    float sum = (K == 2 ? w1 : K == 3 ? w2 : w3) * current;
    sum += w0 * s0;
    if (K > 2) sum += w1 * s1;
    if (K > 3) sum += w2 * s2;
    if (K > 2) conv_state[row] = s1;
    if (K > 3) conv_state[channels + row] = s2;
    conv_state[(K - 2) * channels + row] = current;
    y[row] = sum * sigmoidf(sum);
  }, rows);
}

__device__ __forceinline__ float gate_act(bool sigmoid_gate, float z) {
  return sigmoid_gate ? sigmoidf(z) : z * sigmoidf(z);
}

// act(z) for the z rows of in_proj (launch_gdn_gate_act).
__global__ void gdn_gate_act_kernel(const uint16_t* weight, const float* x, int n, int k, int split, bool sigmoid_gate,
                                    float* gate) {
  pdl_trigger();  // weights first: the dots wait before they read x
  gemv_rows<1>(weight, n, k, split, PlainX{x, k},
               [&](int row, const float (&acc)[1]) { gate[row] = gate_act(sigmoid_gate, acc[0]); });
}

// A cluster of `parts` blocks per (value head h, row): block p owns the value columns [p * cols, (p + 1) * cols)
// with cols x slices threads; thread (s, j) owns value column j for the key rows [s * rows_per, (s + 1) *
// rows_per) of the head's state (the first kCacheRows of them held in registers between the read and the
// write, so the state is read once and written once); its warp holds those rows of q and k. q and k are
// L2-normalised through their totals: S^T k, S^T q and k . q are summed from the raw values and scaled once, so one
// block barrier brings the slices' partial sums (and q . q, k . k, k . q) together; every thread of a column then
// applies the same delta. Columns are independent in the delta rule; only the gated RMSNorm over the head's outputs needs the
// whole head: each block sends its sum of squares to every block of the cluster, and one cluster barrier later
// every block adds them in rank order. Splitting a head over a cluster puts 4x more SMs on the state than one
// block per head (measured 14.5 us per layer with 48 blocks of 1024 threads at the released shape).
__global__ void __launch_bounds__(kStepThreads) gdn_recurrent_step_kernel(GatedDeltaNetShape shape,
                                                                         GatedDeltaNetWeightsDevice w,
                                                                         const float* mixed, const float* z,
                                                                         const float* b, const float* a,
                                                                         float* recurrent, float* out, int cols,
                                                                         int slices) {
  pdl_trigger();  // the state first: only this kernel writes it, one decode step (an earlier graph replay) ago
  __shared__ float part_kv[kStepThreads], part_sq[kStepThreads];
  __shared__ float slice_dots[3][kStepThreads / kWarp];  // per slice: q . q, k . k, k . q over its rows
  __shared__ float warp_sq[kStepThreads / kWarp];
  __shared__ float norm_parts[kMaxClusterParts];  // written by every block of the cluster
  cg::cluster_group cluster = cg::this_cluster();
  // Every block has started (its shared memory exists for the others' writes) by the wait before those writes.
  cluster.barrier_arrive();
  const int parts = static_cast<int>(cluster.num_blocks()), part = static_cast<int>(cluster.block_rank());
  const int h = blockIdx.x / parts, row = blockIdx.y, tid = threadIdx.x, lane = tid % kWarp, warp = tid / kWarp;
  const int jl = tid % cols, slice = tid / cols, j = part * cols + jl;
  const int dk = shape.key_dim, dv = shape.value_dim, hv = shape.value_heads;
  const bool active = j < dv;
  float* S = recurrent + (static_cast<size_t>(row) * hv + h) * dk * dv;
  const int rows_per = (dk + slices - 1) / slices;
  const int i0 = slice * rows_per, i1 = min(dk, i0 + rows_per);
  float cached[kCacheRows];
  if (active) {
#pragma unroll
    for (int r = 0; r < kCacheRows; ++r) {
      if (i0 + r < i1) cached[r] = S[(i0 + r) * dv + j];
    }
  }
  // The head's weights go out with the state: loaded where they are used, they were two more round trips, one
  // after the q/k norms and one after the last cluster barrier.
  const float dt_bias = bf16_bits_to_float(w.dt_bias[h]), a_log = bf16_bits_to_float(w.a_log[h]);
  const float norm_w = active && slice == 0 ? bf16_bits_to_float(w.norm[j]) : 0.0f;  // slice 0 writes the output
  pdl_wait();  // q, k, v, z, b and a come from the input projection
  const int kh = h / (hv / shape.key_heads);
  const int channels = shape.conv_channels(), key_total = shape.key_heads * dk;
  const float* x = mixed + static_cast<size_t>(row) * channels;
  const float* xq = x + kh * dk;
  const float* xk = x + key_total + kh * dk;
  // Every activation this thread needs, loaded together (one round trip instead of one per use).
  const float b_raw = b[row * hv + h], a_raw = a[row * hv + h];
  const float v = active ? x[2 * key_total + h * dv + j] : 0.0f;
  const float gate = active && slice == 0 && z ? z[(static_cast<size_t>(row) * hv + h) * dv + j] : 0.0f;
  // Lane r of each warp (a warp lies in one slice) loads the slice's row i0 + r of q and k for r < kCacheRows; the
  // warp reads them by shuffle (held by every thread they cost 32 registers, and spills at 64).
  const float q_lane = lane < kCacheRows && i0 + lane < i1 ? xq[i0 + lane] : 0.0f;
  const float k_lane = lane < kCacheRows && i0 + lane < i1 ? xk[i0 + lane] : 0.0f;

  const float beta = sigmoidf(b_raw);
  const float a_in = a_raw + dt_bias;
  const float softplus = a_in > 20.0f ? a_in : log1pf(expf(a_in));
  const float decay = expf(-expf(a_log) * softplus);

  // Pass 1: this slice's share of the decayed state's S^T k and S^T q with the raw q and k (coalesced: a warp reads
  // 32 consecutive columns of one state row; the first kCacheRows were loaded before the wait), and of q . q,
  // k . k and k . q (the same in every thread of the slice; its first thread hands them on).
  float kv = 0.0f, sq = 0.0f, qq = 0.0f, kk = 0.0f, kq = 0.0f;
#pragma unroll
  for (int r = 0; r < kCacheRows; ++r) {
    if (i0 + r < i1) {  // uniform in the warp
      const float qi = __shfl_sync(0xffffffffu, q_lane, r), ki = __shfl_sync(0xffffffffu, k_lane, r);
      if (active) {
        const float sv = cached[r] * decay;
        kv += sv * ki;
        sq += sv * qi;
      }
      qq += qi * qi;
      kk += ki * ki;
      kq += ki * qi;
    }
  }
  for (int i = i0 + kCacheRows; i < i1; ++i) {
    const float qi = xq[i], ki = xk[i];
    if (active) {
      const float sv = S[i * dv + j] * decay;
      kv += sv * ki;
      sq += sv * qi;
    }
    qq += qi * qi;
    kk += ki * ki;
    kq += ki * qi;
  }
  part_kv[tid] = kv;
  part_sq[tid] = sq;
  if (jl == 0) {
    slice_dots[0][slice] = qq;
    slice_dots[1][slice] = kk;
    slice_dots[2][slice] = kq;
  }
  __syncthreads();
  float kv_total = 0.0f, sq_total = 0.0f, qq_total = 0.0f, kk_total = 0.0f, kq_total = 0.0f;
  for (int t = 0; t < slices; ++t) {
    kv_total += part_kv[t * cols + jl];
    sq_total += part_sq[t * cols + jl];
    qq_total += slice_dots[0][t];
    kk_total += slice_dots[1][t];
    kq_total += slice_dots[2][t];
  }
  // q and k L2-normalised (eps on the sum, as the reference), q also by 1/sqrt(dk).
  const float q_scale = rsqrtf(qq_total + 1e-6f) * rsqrtf(static_cast<float>(dk));
  const float k_scale = rsqrtf(kk_total + 1e-6f);

  // Pass 2: S' = e^g S + k delta^T on this slice's rows; o = S'^T q = S^T q + delta (k . q).
  const float delta = beta * (v - kv_total * k_scale);
  const float k_delta = k_scale * delta;
#pragma unroll
  for (int r = 0; r < kCacheRows; ++r) {
    if (i0 + r < i1) {  // uniform in the warp; the shuffle outside `active`, which may split it
      const float ki = __shfl_sync(0xffffffffu, k_lane, r);
      if (active) S[(i0 + r) * dv + j] = cached[r] * decay + ki * k_delta;
    }
  }
  float o = 0.0f;
  if (active) {
    for (int i = i0 + kCacheRows; i < i1; ++i) S[i * dv + j] = S[i * dv + j] * decay + xk[i] * k_delta;
    o = sq_total * q_scale + delta * (kq_total * q_scale * k_scale);
  }

  // Gated RMSNorm over the head's value_dim outputs (slice 0 holds them, cols / 32 warps): the block's sum of
  // squares in warp order, sent to every block of the cluster; after the barrier each block adds them in rank
  // order (the same total in every block).
  const int slice_warps = cols / kWarp;
  if (slice == 0) {
    const float warp_total = warp_sum(o * o);
    if (lane == 0) warp_sq[warp] = warp_total;
  }
  if (slice_warps > 1) __syncthreads();
  cluster.barrier_wait();
  if (tid == 0) {
    float block_sq = 0.0f;
    for (int w2 = 0; w2 < slice_warps; ++w2) block_sq += warp_sq[w2];
    for (int r = 0; r < parts; ++r) *cluster.map_shared_rank(&norm_parts[part], r) = block_sq;
  }
  cluster.sync();  // every block's part is in place; nothing reads another block's memory after it
  float total_sq = 0.0f;
  for (int r = 0; r < parts; ++r) total_sq += norm_parts[r];
  const float mean_sq = total_sq / static_cast<float>(dv);
  if (!active || slice != 0) return;
  const float normed = norm_w * (o * rsqrtf(mean_sq + shape.eps));
  // Without z the gate is applied by the output projection (GatedX), to this same product.
  out[(static_cast<size_t>(row) * hv + h) * dv + j] = z ? normed * gate_act(shape.sigmoid_gate, gate) : normed;
}

}  // namespace

void launch_gdn_conv_step(const GatedDeltaNetShape& shape, const GatedDeltaNetWeightsDevice& w, float* mixed,
                          float* conv_state, int32_t rows, cudaStream_t stream) {
  if (shape.conv_kernel < 2) throw_invalid_launch("gdn conv: kernel must be >= 2");
  const int channels = shape.conv_channels();
  const dim3 grid((channels + 255) / 256, rows);
  launch_kernel(gdn_conv_step_kernel, grid, 256, 0, stream, 1, shape, w.conv1d, mixed, conv_state, channels);
}

void launch_gdn_in_proj_conv(const GatedDeltaNetShape& shape, const GatedDeltaNetWeightsDevice& w,
                             const uint16_t* in_proj, const float* x, int32_t n, int32_t k, float* conv_state, float* y,
                             cudaStream_t stream) {
  if (shape.conv_kernel < 2 || shape.conv_kernel > kGdnMaxConvTaps || k % 8 != 0 ||
      n < shape.conv_channels() + shape.value_heads * shape.value_dim) {
    throw_invalid_launch("gdn in_proj + conv: conv kernel outside [2, 4], K % 8 != 0 or fewer outputs than conv channels + z");
  }
  const int z_rows = shape.value_heads * shape.value_dim, computed = n - z_rows;
  const int split = gemv_split(computed, k);
  launch_kernel(gdn_in_proj_conv_kernel, gemv_split_blocks(computed, split), kGemvThreads, 0, stream, 1, in_proj, x,
                computed, k, split, w.conv1d, shape.conv_kernel, conv_state, shape.conv_channels(), z_rows, y);
}

void launch_gdn_gate_act(const GatedDeltaNetShape& shape, const uint16_t* in_proj, const float* x, int32_t k,
                         float* gate, cudaStream_t stream) {
  if (k % 8 != 0) throw_invalid_launch("gdn gate act: K % 8 != 0");
  const int n = shape.value_heads * shape.value_dim, split = gemv_split(n, k);
  const uint16_t* z_rows = in_proj + static_cast<size_t>(shape.conv_channels()) * k;
  launch_kernel(gdn_gate_act_kernel, gemv_split_blocks(n, split), kGemvThreads, 0, stream, 1, z_rows, x, n, k, split,
                shape.sigmoid_gate, gate);
}

void launch_gdn_recurrent_step(const GatedDeltaNetShape& shape, const GatedDeltaNetWeightsDevice& w,
                               const float* mixed, const float* z, const float* b, const float* a, float* recurrent,
                               float* out, int32_t rows, cudaStream_t stream) {
  if (shape.value_dim > kMaxDim || shape.key_dim > kMaxDim || shape.value_heads % shape.key_heads != 0) {
    throw_invalid_launch("gdn recurrent step: head dims above 1024, or value heads not a multiple of key heads");
  }
  // A cluster of up to 8 blocks per head, each a warp's worth of value columns (more for wide heads), times
  // key slices of up to kCacheRows rows, within 1024 threads.
  const int warps_of_columns = (shape.value_dim + kWarp - 1) / kWarp;
  const int parts = std::min(kMaxClusterParts, warps_of_columns);
  const int cols = (warps_of_columns + parts - 1) / parts * kWarp;
  const int wanted = (shape.key_dim + kCacheRows - 1) / kCacheRows;
  const int slices = std::max(1, std::min(kStepThreads / cols, wanted));
  launch_kernel(gdn_recurrent_step_kernel, dim3(static_cast<unsigned>(shape.value_heads * parts), static_cast<unsigned>(rows)),
                dim3(static_cast<unsigned>(cols * slices)), 0, stream, static_cast<unsigned>(parts), shape, w, mixed, z, b, a,
                recurrent, out, cols, slices);
}

}  // namespace imp::cuda
