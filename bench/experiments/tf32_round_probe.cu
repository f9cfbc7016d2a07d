// Checks that (bits + 0x1000) & 0xffffe000 equals cvt.rna.tf32.f32 for every finite fp32 bit pattern.
#include <cstdio>
#include <cstdint>
__global__ void check(unsigned long long* mismatches, unsigned long long* checked) {
  unsigned long long bad = 0, n = 0;
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < (1ull << 32); i += (uint64_t)gridDim.x * blockDim.x) {
    const uint32_t b = static_cast<uint32_t>(i);
    if ((b & 0x7f800000u) == 0x7f800000u) continue;  // inf / NaN
    uint32_t r;
    asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(__uint_as_float(b)));
    bad += r != ((b + 0x1000u) & 0xffffe000u);
    ++n;
  }
  atomicAdd(mismatches, bad);
  atomicAdd(checked, n);
}
int main() {
  unsigned long long *d, h[2];
  cudaMalloc(&d, 16); cudaMemset(d, 0, 16);
  check<<<1320, 256>>>(d, d + 1);
  cudaMemcpy(h, d, 16, cudaMemcpyDeviceToHost);
  printf("finite fp32 patterns checked %llu, mismatches %llu\n", h[1], h[0]);
  return h[0] != 0;
}
