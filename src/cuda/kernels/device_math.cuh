// Small device helpers shared by the kernels.
#pragma once

#include <cuda_bf16.h>

#include <cstddef>
#include <cstdint>

namespace imp::cuda {

constexpr int kWarp = 32;
constexpr unsigned kFull = 0xffffffffu;  // every lane of a warp

// D += A B on the tensor cores, bf16 inputs, fp32 accumulate. Fragments (g = lane / 4, c = lane % 4):
//   A (16x16, row-major): a0 = (row g, k 2c..2c+1), a1 = (row g+8, k 2c..), a2 = (row g, k 2c+8..), a3 = (row g+8, k 2c+8..)
//   B (16x8, "col"):       b0 = (k 2c..2c+1, col g), b1 = (k 2c+8..2c+9, col g)
//   C/D (16x8, fp32):      d0, d1 = (row g, cols 2c, 2c+1), d2, d3 = (row g+8, cols 2c, 2c+1)
__device__ __forceinline__ void mma_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// a (bf16x2) times s (bf16x2), element-wise: exact when the true product is representable (an E2M1 code
// times an E4M3 scale always is; so is a power of two within range).
__device__ __forceinline__ uint32_t bf16x2_mul(uint32_t a, uint32_t s) {
  const __nv_bfloat162 r = __hmul2(*reinterpret_cast<const __nv_bfloat162*>(&a), *reinterpret_cast<const __nv_bfloat162*>(&s));
  return *reinterpret_cast<const uint32_t*>(&r);
}

// lo in the low half, hi in the high half, each rounded to nearest even.
__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

// First statement of every kernel launched through launch_kernel (launch.h): wait for the previous grid in
// the stream (complete, memory visible), then let the next grid start launching. No-ops without PDL.
__device__ __forceinline__ void pdl_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
__device__ __forceinline__ void pdl_trigger() { asm volatile("griddepcontrol.launch_dependents;" ::: "memory"); }
__device__ __forceinline__ void pdl_begin() {
  pdl_wait();
  pdl_trigger();
}
// Kernels that stream weights (which no earlier kernel writes) instead start with pdl_trigger(), issue their
// first weight loads, and call pdl_wait() before they read anything an earlier kernel produced and before they
// write anything: the weight stream then overlaps the previous kernel's tail. Every thread that reads or writes
// activations waits first, so completion still orders the kernels along the stream.

// A 16-byte weight load meant to be in flight before pdl_wait(). Not __ldg: ptxas moves ld.global.nc (which it
// need not order with anything) below griddepcontrol.wait, and did so in the GEMV, hyper-connection down and
// shared-expert kernels, so none of them loaded a weight before its wait (their SASS, session 10); coherent
// loads stay where they are written. No L1 allocation: streamed weights are read once.
__device__ __forceinline__ uint4 load_weight16(const void* p) {
  uint4 v;
  asm volatile("ld.global.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

// 16 bytes global -> shared without registers (L2 only), committed and awaited by the issuing thread.
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {
  const uint32_t address = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(address), "l"(gmem) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_group 0;\n" ::: "memory"); }

// Bulk (TMA) copies global -> shared completing on an mbarrier: a few instructions move kilobytes, and the copy
// engine keeps more bytes in flight per SM than per-thread cp.async does.
__device__ __forceinline__ uint32_t shared_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void mbarrier_init(uint64_t* bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(shared_address(bar)), "r"(count) : "memory");
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
// The calling thread's arrival, announcing `bytes` of copies that will complete on the barrier.
__device__ __forceinline__ void mbarrier_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(shared_address(bar)), "r"(bytes)
               : "memory");
}
// A plain arrival (no copies announced) of the calling thread where `arrive` holds: predicated, not a branch, so
// that ptxas keeps wgmmas in flight across it (a branch between wgmmas made it serialize them, C7512).
__device__ __forceinline__ void mbarrier_arrive_if(bool arrive, uint64_t* bar) {
  asm volatile(
      "{\n .reg .pred p;\n setp.ne.b32 p, %0, 0;\n @p mbarrier.arrive.shared::cta.b64 _, [%1];\n}\n" ::"r"(
          static_cast<uint32_t>(arrive)),
      "r"(shared_address(bar))
      : "memory");
}
// A warpgroup's registers per thread, lowered or raised (sm_90a; all of its warps, converged; multiples of 8).
// The registers move through the block's pool: warpgroups raised above the launch bounds' cap may take only what
// the lowered ones give back (asking more, they wait for it forever: a hang, session 25), which
// setmaxnreg_balances checks at compile time.
constexpr int launch_register_cap(int threads, int blocks_per_sm) { return 65536 / (threads * blocks_per_sm) / 8 * 8; }
constexpr bool setmaxnreg_balances(int cap, int raised_warpgroups, int raised, int lowered_warpgroups, int lowered) {
  return raised_warpgroups * (raised - cap) <= lowered_warpgroups * (cap - lowered);
}
template <int kRegs>
__device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}
template <int kRegs>
__device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}
__device__ __forceinline__ void mbarrier_wait(uint64_t* bar, uint32_t parity) {
  asm volatile(
      "{\n .reg .pred done;\n wait_%=:\n mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      " @!done bra wait_%=;\n}\n" ::"r"(shared_address(bar)),
      "r"(parity)
      : "memory");
}
// bytes and both addresses multiples of 16. Shared memory the generic proxy wrote before needs
// fence_proxy_async() between those writes and the copy.
__device__ __forceinline__ void bulk_copy_to_shared(void* dst, const void* src, uint32_t bytes, uint64_t* bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
                   shared_address(dst)),
               "l"(src), "r"(bytes), "r"(shared_address(bar))
               : "memory");
}
// A box of a tensor map (tensor_map.h; `map` the address of a __grid_constant__ kernel parameter) at the
// coordinates c0..c3 (elements, innermost first); dst 128-byte aligned. Completes `box bytes` on the barrier,
// elements outside the tensor included (read as zeros).
__device__ __forceinline__ void tensor_copy_4d(void* dst, const void* map, int c0, int c1, int c2, int c3, uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5}], [%6];\n" ::"r"(
          shared_address(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(shared_address(bar))
      : "memory");
}
// The same for a 2D map.
__device__ __forceinline__ void tensor_copy_2d(void* dst, const void* map, int c0, int c1, uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n" ::"r"(
          shared_address(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(shared_address(bar))
      : "memory");
}
// The same box brought into L2 only (no shared memory, no barrier): data a later plain load will read.
__device__ __forceinline__ void tensor_prefetch_2d(const void* map, int c0, int c1) {
  asm volatile("cp.async.bulk.prefetch.tensor.2d.L2.global.tile [%0, {%1, %2}];\n" ::"l"(reinterpret_cast<uint64_t>(map)),
               "r"(c0), "r"(c1)
               : "memory");
}
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
// Shared -> global by the bulk copy engine, in the issuing thread's bulk group (bulk_commit_group): bytes and both
// addresses multiples of 16, the source written by the generic proxy before a fence_proxy_async() in each writer
// and a barrier. The source may be rewritten once bulk_wait_read<0>() returns in the issuing thread.
__device__ __forceinline__ void bulk_copy_to_global(void* dst, const void* src, uint32_t bytes) {
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;\n" ::"l"(dst), "r"(shared_address(src)),
               "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void bulk_commit_group() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
template <int kPending>
__device__ __forceinline__ void bulk_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(kPending) : "memory");
}
template <int kPending>
__device__ __forceinline__ void bulk_wait() {  // the copies' writes done too
  asm volatile("cp.async.bulk.wait_group %0;\n" ::"n"(kPending) : "memory");
}

__device__ __forceinline__ float warp_sum(float v) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

__device__ __forceinline__ float sigmoidf(float x) { return 1.0f / (1.0f + expf(-x)); }
// The same with exp and the division in their fast forms (~2^-21 relative): for kernels where sigmoids are a large
// part of the work (the fused hyper-connection up/mix: the IEEE forms cost ~5% of a 4096-token prefill chunk).
__device__ __forceinline__ float fast_sigmoidf(float x) { return __fdividef(1.0f, 1.0f + __expf(-x)); }

// The hyper-connection write of one value v at column i: stream[s * stride + i] += inject[s] * v, s < streams.
// Every load goes out before any store: the compiler must assume the stores may alias the inject loads, and a
// plain loop paid one dependent L2 round trip per stream. Fused kernels load (HcWriteLoads::load) as soon as they
// have waited and store (add) once v is known, so the round trip overlaps their reduction.
constexpr int kMaxHcStreams = 8;
struct HcWriteLoads {
  float inj[kMaxHcStreams], cur[kMaxHcStreams];
  __device__ __forceinline__ void load(const float* stream, size_t stride, size_t i, const float* inject, int streams) {
#pragma unroll
    for (int s = 0; s < kMaxHcStreams; ++s) {
      if (s < streams) {
        inj[s] = inject[s];
        cur[s] = stream[s * stride + i];
      }
    }
  }
  __device__ __forceinline__ void add(float* stream, size_t stride, size_t i, int streams, float v) const {
#pragma unroll
    for (int s = 0; s < kMaxHcStreams; ++s) {
      if (s < streams) stream[s * stride + i] = cur[s] + inj[s] * v;
    }
  }
};
__device__ __forceinline__ void hc_write_value(float* stream, size_t stride, size_t i, const float* inject, int streams,
                                               float v) {
  HcWriteLoads w;
  w.load(stream, stride, i, inject, streams);
  w.add(stream, stride, i, streams, v);
}

// Partial NeoX RoPE of one head in memory, by one warp: dims [0, rotary_dim) rotate in pairs
// (i, i + rotary_dim/2) by position * inv_freq[i], precise sin/cos as the CPU reference.
__device__ __forceinline__ void rope_rotate_warp(float* head, int rotary_dim, float position, const float* inv_freq,
                                                 int lane) {
  const int half = rotary_dim / 2;
  for (int i = lane; i < half; i += kWarp) {
    const float angle = position * inv_freq[i];
    const float c = cosf(angle), s = sinf(angle);
    const float x0 = head[i], x1 = head[i + half];
    head[i] = x0 * c - x1 * s;
    head[i + half] = x1 * c + x0 * s;
  }
}

}  // namespace imp::cuda
