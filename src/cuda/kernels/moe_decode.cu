#include "cuda/kernels/moe_decode.h"

#include <mutex>

#include "cuda/check.h"
#include "cuda/launch.h"
#include "cuda/kernels/device_math.cuh"
#include "cuda/kernels/fp_codes.cuh"
#include "cuda/kernels/gemv_row.cuh"
#include "cuda/kernels/moe_router.cuh"
#include "cuda/kernels/nvfp4_strip.cuh"

namespace imp::cuda {
namespace {

using namespace moe;

// Fused decode (one row): the router, then the gate/up block of the block's choice. Grid (strips, k + 1): row
// j < k computes choice j's strips; in row k, block 0 routes with the softmax and writes top_experts and
// top_weights (the other blocks of that row exit at once), so the k * strips working blocks route without it. The
// next kernel (down) may launch only once every block has routed (the trigger comes after the routing barrier),
// and the weights block makes top_experts visible before its trigger: down then finds them in place and fetches
// its weights before its own wait (down_strip_speculative, which still checks them after the wait); it reads
// top_weights after its wait.
template <int kPer>
__global__ void __launch_bounds__(kGateUpWarps * kWarp, 4)
    moe_decode_gate_up_kernel(const uint8_t* pool, const model::SlotScales* scales, model::ExpertSlotLayout layout,
                              const float* x, const float* logits, int experts, int k, bool renormalize, uint16_t* act,
                              int32_t* top_experts, float* top_weights) {
  const int j = blockIdx.y;
  const bool weights_block = j == k;
  if (weights_block && blockIdx.x != 0) return;
  phase(0, 0);
  pdl_wait();  // the logits come from the previous kernel; nothing to load before them
  phase(0, 1);
  extern __shared__ __align__(16) uint8_t stage[];  // [warps][kWarpStageBytes]
  __shared__ int chosen;
  // One warp routes (every warp would cost ~8 us of issue slots per layer). It borrows the block's weight stage
  // as scratch: gate_up_strip uses it only after the barrier.
  static_assert(kRouterScratchBytes<kPer> <= kGateUpWarps * kWarpStageBytes, "router scratch fits the stage");
  uint64_t* const scratch = reinterpret_cast<uint64_t*>(stage);
  int expert = 0;
  float weight = 0.0f;
  if (weights_block) {
    if (threadIdx.x < kWarp) {
      warp_router<kPer, true>(logits, experts, k, renormalize, scratch, expert, weight);
      if (static_cast<int>(threadIdx.x) < k) {
        top_experts[threadIdx.x] = expert;
        top_weights[threadIdx.x] = weight;
        __threadfence();  // visible before this block's trigger
      }
    }
    __syncthreads();
    pdl_trigger();
    return;
  }
  if (threadIdx.x < kWarp) {
    warp_router<kPer, false>(logits, experts, k, renormalize, scratch, expert, weight);
    if (static_cast<int>(threadIdx.x) == j) chosen = expert;  // everything resident: slot = expert id
  }
  __syncthreads();
  pdl_trigger();  // after the wait: moe_decode_down_hc_write_kernel reads older kernels' outputs before its own
  phase(0, 2);
  const int slot = chosen;
  gate_up_strip(pool, scales, layout, x, slot, blockIdx.x, stage,
                act + static_cast<size_t>(j) * layout.padded_intermediate);
  phase(0, 5);
}

// down_strip for the fused decode kernel, with the weights fetched before the PDL wait on top_experts as they are
// then: gate/up triggers this kernel's launch only after its block (0, 0) has written and fenced them, so they
// are this layer's choice in practice; the memory model does not promise it before the wait, so the choice is
// read again after the wait and on a miss the strip is fetched again. The result is always the chosen expert's,
// bit for bit down_strip's. One batch only (I <= 64 * kDownChunk).
__device__ __forceinline__ void down_strip_speculative(const uint8_t* pool, const model::SlotScales* scales,
                                                       const model::ExpertSlotLayout& layout, const uint16_t* act_row,
                                                       const int32_t* slots, const float* weights, int num_slots, int j,
                                                       int strip, uint8_t* stage, float* partial) {
  const int lane = threadIdx.x % kWarp, supertiles = layout.down.supertiles();
  const size_t strip_offset = static_cast<size_t>(strip) * supertiles;
  auto issue = [&](int slot) {
    const uint8_t* base = pool + static_cast<size_t>(slot) * layout.slot_bytes;
    const uint8_t* const codes[1] = {base + layout.down.codes + strip_offset * kUnitCodeBytes};
    const uint8_t* const unit_scales[1] = {base + layout.down.scales + strip_offset * kUnitScaleBytes};
    issue_units<1, kDownChunk>(codes, unit_scales, 0, supertiles, stage);
  };
  const int guess = __ldcg(slots + j);  // racing gate/up's write: old or new, never torn
  const bool issued = guess >= 0 && guess < num_slots;
  float sd = 0.0f;
  if (issued) {
    issue(guess);
    sd = scales[guess].down;  // weights: no earlier kernel writes them
  }
  pdl_wait();
  phase(1, 1);
  // The choice, its weight and the act row in one round trip; only a miss waits on the choice.
  const int slot = __ldcg(slots + j);
  const float route_weight = __ldcg(weights + j);
  uint32_t xw[kDownChunk][2];
  load_input_words<kDownChunk>(reinterpret_cast<const uint32_t*>(act_row), 0, supertiles, xw);
  if (!issued || slot != guess) {
    if (issued) {  // the guessed strip must land before its stage is overwritten
      cp_async_wait_all();
      __syncwarp();
    }
    issue(slot);
    sd = scales[slot].down;
  }
  float acc[1][2] = {{0.0f, 0.0f}};
  compute_units<1, kDownChunk>(xw, supertiles, stage, acc);
  const float r0 = quad_sum(acc[0][0]), r1 = quad_sum(acc[0][1]);
  if (lane % 4 == 0) {
    partial[lane / 4] = r0 * route_weight * sd * kStripFold;
    partial[lane / 4 + 8] = r1 * route_weight * sd * kStripFold;
  }
}

constexpr int kStripRows = 16;   // output rows per down block
constexpr int kSharedWarps = 8;  // shared-expert warps per down block, kSharedRows rows each
constexpr int kSharedRows = kStripRows / kSharedWarps;
constexpr int kSharedBatch = 2;  // 16-byte loads per lane and row in flight (I_s = 640: 80 chunks in two batches)

// Rows [n0, n0 + kSharedRows) (those < d) of the shared expert's down projection (bf16 [d, inter]) times
// silu(gate) * up, by one warp, without a PDL wait: `proj` is final before the kernel starts (see
// moe_decode_down_hc_write_kernel). The SwiGLU input is computed once per chunk for all rows. Per lane the order
// and expression of bf16_row_dots with SwigluX, so each row's dot is the same number.
__device__ __forceinline__ void shared_down_rows(const uint16_t* w, int inter, int n0, int d, const float* proj,
                                                 float (&dots)[kSharedRows]) {
  const int lane = threadIdx.x % kWarp, chunks = inter / 8;
  uint4 wv[kSharedRows][kSharedBatch];
  auto load_batch = [&](int c0) {
#pragma unroll
    for (int r = 0; r < kSharedRows; ++r) {
#pragma unroll
      for (int b = 0; b < kSharedBatch; ++b) {
        const int c = c0 + b * kWarp;
        wv[r][b] = c < chunks && n0 + r < d ? load_weight16(reinterpret_cast<const uint4*>(w + static_cast<size_t>(n0 + r) * inter) + c)
                                            : make_uint4(0, 0, 0, 0);
      }
    }
  };
#pragma unroll
  for (int r = 0; r < kSharedRows; ++r) dots[r] = 0.0f;
  load_batch(lane);
  const SwigluX input{proj, proj + inter};
  for (int c0 = lane; c0 < chunks; c0 += kWarp * kSharedBatch) {
    if (c0 != lane) load_batch(c0);
#pragma unroll
    for (int b = 0; b < kSharedBatch; ++b) {
      const int c = c0 + b * kWarp;
      if (c >= chunks) break;
      float xv[8];
      input(0, 8 * c, xv);
#pragma unroll
      for (int r = 0; r < kSharedRows; ++r) {
        const uint32_t words[4] = {wv[r][b].x, wv[r][b].y, wv[r][b].z, wv[r][b].w};
        float wf[8];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          wf[2 * i] = bf16_bits_to_float(words[i] & 0xffffu);
          wf[2 * i + 1] = bf16_bits_to_float(words[i] >> 16);
        }
        dots[r] += wf[0] * xv[0] + wf[1] * xv[1] + wf[2] * xv[2] + wf[3] * xv[3] + wf[4] * xv[4] + wf[5] * xv[5] +
                   wf[6] * xv[6] + wf[7] * xv[7];
      }
    }
  }
#pragma unroll
  for (int r = 0; r < kSharedRows; ++r) dots[r] = warp_sum(dots[r]);
}

// Fused decode tail (one row): block = one strip of 16 output rows. Warps 0..k-1 compute the routed choices'
// down projections (as expert_down_kernel), warps
// k..k+7 two shared-expert rows each, and the block writes
// v = sum_j routed_j + sigmoid(gate logit) * shared into the hyper-connection streams:
// stream_row[s * d + n] += inject[s] * v (cpu::moe_block then cpu::hyper_connection_write). Blocks are small
// enough for two per SM: 160 strips on 132 SMs then run in one wave.
// Only the routed warps wait. The previous kernel (moe_decode_gate_up_kernel) lets this one launch only after its
// own wait, so every kernel before it has completed when these blocks start: the shared expert's input (the MoE
// input GEMV), the inject weights (the read-down) and the stream row (the previous write) are final, and the
// shared-expert warps compute their rows and load the stream values before the routed experts' act exists
// (after the wait the shared rows were two more HBM round trips and the stream loads one L2 round trip).
__global__ void __maxnreg__(56)  // two blocks of k = 10 per SM (576 threads)
    moe_decode_down_hc_write_kernel(const uint8_t* pool, const model::SlotScales* scales, model::ExpertSlotLayout layout,
                                    const uint16_t* act, const int32_t* slots, const float* weights, int k,
                                    int num_slots, const uint16_t* shared_down, const float* shared_proj,
                                    int shared_inter, const float* inject, int streams, float* stream_row) {
  phase(1, 0);
  pdl_trigger();  // weights first; the routed warps wait before they read act
  extern __shared__ __align__(16) uint8_t stage[];  // [k][kWarpStageBytes]
  __shared__ float partial[kMaxTopK][kStripRows];
  __shared__ float shared_out[kStripRows];
  const int strip = blockIdx.x, warp = threadIdx.x / kWarp, d = layout.hidden;
  // The writers: the first lanes of the first shared-expert warp (which never waits).
  const int n = kStripRows * strip + static_cast<int>(threadIdx.x % kWarp);
  const bool writer = warp == k && threadIdx.x % kWarp < kStripRows && n < d;  // padded rows are dropped
  HcWriteLoads loads;
  if (warp < k) {
    const uint16_t* act_row = act + static_cast<size_t>(warp) * layout.padded_intermediate;
    if (layout.down.supertiles() <= kDownChunk) {
      down_strip_speculative(pool, scales, layout, act_row, slots, weights, num_slots, warp, strip,
                             stage + warp * kWarpStageBytes, partial[warp]);
    } else {
      pdl_wait();
      phase(1, 1);
      down_strip(pool, scales, layout, act_row, slots[warp], weights[warp], strip, stage + warp * kWarpStageBytes,
                 partial[warp]);
    }
    phase(1, 2);
  } else {
    const int r0 = (warp - k) * kSharedRows;
    float dots[kSharedRows];
    shared_down_rows(shared_down, shared_inter, kStripRows * strip + r0, d, shared_proj, dots);
    // Loaded after the dots (not held across them: registers) and long before the routed warps are done.
    if (writer) loads.load(stream_row, static_cast<size_t>(d), static_cast<size_t>(n), inject, streams);
    if (threadIdx.x % kWarp == 0) {
      const float gate = sigmoidf(shared_proj[2 * shared_inter]);
#pragma unroll
      for (int r = 0; r < kSharedRows; ++r) shared_out[r0 + r] = gate * dots[r];
    }
  }
  __syncthreads();  // the writers' stores come after it, so after the routed warps' wait
  phase(1, 3);
  if (writer) {
    const int r = threadIdx.x % kWarp;
    float routed = 0.0f;
    for (int c = 0; c < k; ++c) routed += partial[c][r];
    const float v = routed + shared_out[r];
    loads.add(stream_row, static_cast<size_t>(d), static_cast<size_t>(n), streams, v);
  }
  phase(1, 4);
}

}  // namespace

void launch_moe_decode_gate_up(const uint8_t* pool, const model::SlotScales* scales, const model::ExpertSlotLayout& layout,
                               const float* x, const float* logits, int32_t experts, int32_t k, bool renormalize,
                               uint16_t* act, int32_t* top_experts, float* top_weights,
                               cudaStream_t stream) {
  if (layout.format != model::SlotFormat::kNvfp4) throw_invalid_launch("moe decode gate/up: NVFP4 slots only");
  if (experts > kMaxExperts || k < 1 || k > kMaxTopK || k > experts) {
    throw_invalid_launch("moe decode gate/up: more than 4096 experts, or top-k outside [1, 16] or above the experts");
  }
  const size_t shared = static_cast<size_t>(kGateUpWarps) * kWarpStageBytes;  // 45 KB: within the default 48 KB
  const dim3 grid(layout.padded_intermediate / 16, k + 1);  // row k: the weights block
  const unsigned threads = kGateUpWarps * kWarp;
  if (experts <= 4 * kWarp) {
    launch_kernel(moe_decode_gate_up_kernel<4>, grid, threads, shared, stream, 1, pool, scales, layout, x, logits, experts,
                  k, renormalize, act, top_experts, top_weights);
  } else if (experts <= 16 * kWarp) {
    launch_kernel(moe_decode_gate_up_kernel<16>, grid, threads, shared, stream, 1, pool, scales, layout, x, logits, experts,
                  k, renormalize, act, top_experts, top_weights);
  } else {  // up to 4096 experts: the logits spill to local memory, still correct
    launch_kernel(moe_decode_gate_up_kernel<kMaxExperts / kWarp>, grid, threads, shared, stream, 1, pool, scales, layout,
                  x, logits, experts, k, renormalize, act, top_experts, top_weights);
  }
}

void launch_moe_decode_down_hc_write(const uint8_t* pool, int32_t slots, const model::SlotScales* scales,
                                     const model::ExpertSlotLayout& layout, const uint16_t* act, const int32_t* top_experts,
                                     const float* top_weights, int32_t k, const uint16_t* shared_down,
                                     const float* shared_proj, int32_t shared_inter, const float* inject, int32_t streams,
                                     float* stream_row, cudaStream_t stream) {
  if (layout.format != model::SlotFormat::kNvfp4) throw_invalid_launch("moe decode down: NVFP4 slots only");
  if (k < 1 || k > kMaxTopK || shared_inter % 8 != 0 || streams < 1 || streams > kMaxHcStreams) {
    throw_invalid_launch("moe decode down: top-k outside [1, 16], shared intermediate size % 8 != 0 or streams outside [1, 8]");
  }
  static std::once_flag once;  // the opt-in, for the largest stage (k = 16)
  std::call_once(once, [] {
    raise_shared_limit_outside_capture(moe_decode_down_hc_write_kernel, kMaxTopK * kWarpStageBytes);
  });
  launch_kernel(moe_decode_down_hc_write_kernel, layout.padded_hidden / kStripRows, (k + kSharedWarps) * kWarp,
                static_cast<size_t>(k) * kWarpStageBytes, stream, 1, pool, scales, layout, act, top_experts, top_weights, k,
                slots, shared_down, shared_proj, shared_inter, inject, streams, stream_row);
}

}  // namespace imp::cuda
