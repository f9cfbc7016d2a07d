// The split-activation prefill GEMM against cpu::linear on UNROUNDED fp32 activations: hi + lo bf16 terms carry
// about 16 significant bits, so the result must be as close to the fp32 reference as the fp32-activation GEMV
// (1e-4 of the output scale; plain bf16 activations miss this by an order of magnitude, ~2e-3).
#include <gtest/gtest.h>

#include <tuple>
#include <vector>

#include "cpu/ops.h"
#include "cuda/blas.h"
#include "cuda/kernels/gemm_bf16_split.h"
#include "cuda/memory/device_buffer.h"
#include "gpu_test_util.h"

namespace imp::cuda {
namespace {

using namespace testing_support;

TEST(GpuGemmBf16Split, MatchesFp32CpuLinear) {
  for (auto [rows, n, k] : {std::tuple{300, 2560, 10240}, {37, 250, 72}, {1, 48, 2560}, {130, 129, 136}}) {
    Bf16Weight w({n, k}, 0.05f);
    const std::vector<float> x = random_floats(static_cast<size_t>(rows) * k);
    std::vector<float> want(static_cast<size_t>(rows) * n);
    cpu::linear(&w.info, x.data(), rows, want.data());
    DeviceBuffer<float> dx(x), dy(want.size()), scratch(x.size());
    launch_gemm_bf16_split(dx.data(), w.device.data(), rows, n, k, dy.data(), scratch.data(), nullptr);
    IMP_CUDA_CHECK(cudaDeviceSynchronize());
    EXPECT_LE(max_rel_diff(dy.download(), want), 1e-4) << rows << " x " << n << " x " << k;
  }
}

// The side-by-side terms hold the same bits as launch_split_bf16's, and one GEMM of them against repeated weight
// rows ([W | W], as the hyper-connection up projection is stored) meets the same fp32 bar.
TEST(GpuGemmBf16Split, SideBySideTermsAgainstRepeatedRows) {
  for (auto [rows, n, k] : {std::tuple{300, 2560, 320}, {37, 250, 70}}) {  // quads, then scalars (k % 4 != 0)
    Bf16Weight w({n, k}, 0.05f);
    std::vector<uint16_t> repeated;
    for (int r = 0; r < n; ++r) {
      for (int half = 0; half < 2; ++half) {
        repeated.insert(repeated.end(), w.bits.begin() + static_cast<ptrdiff_t>(r) * k, w.bits.begin() + static_cast<ptrdiff_t>(r + 1) * k);
      }
    }
    const std::vector<float> x = random_floats(static_cast<size_t>(rows) * k);
    std::vector<float> want(static_cast<size_t>(rows) * n);
    cpu::linear(&w.info, x.data(), rows, want.data());
    DeviceBuffer<float> dx(x), dy(want.size()), scratch(x.size()), side_scratch(x.size());
    DeviceBuffer<uint16_t> dw(repeated);
    const SplitActivations split = launch_split_bf16(dx.data(), rows, k, scratch.data(), nullptr);
    const uint16_t* side = launch_split_bf16_rows(dx.data(), rows, k, side_scratch.data(), nullptr);
    gemm_bf16_rows(side, dw.data(), rows, n, 2 * k, dy.data(), false, nullptr);
    IMP_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<uint16_t> hi(static_cast<size_t>(rows) * k), lo(hi.size()), both(2 * hi.size());
    IMP_CUDA_CHECK(cudaMemcpy(hi.data(), split.hi, hi.size() * 2, cudaMemcpyDeviceToHost));
    IMP_CUDA_CHECK(cudaMemcpy(lo.data(), split.lo, lo.size() * 2, cudaMemcpyDeviceToHost));
    IMP_CUDA_CHECK(cudaMemcpy(both.data(), side, both.size() * 2, cudaMemcpyDeviceToHost));
    for (int t = 0; t < rows; ++t) {
      for (int c = 0; c < k; ++c) {
        ASSERT_EQ(both[static_cast<size_t>(t) * 2 * k + c], hi[static_cast<size_t>(t) * k + c]) << "hi " << t << ", " << c;
        ASSERT_EQ(both[static_cast<size_t>(t) * 2 * k + k + c], lo[static_cast<size_t>(t) * k + c]) << "lo " << t << ", " << c;
      }
    }
    EXPECT_LE(max_rel_diff(dy.download(), want), 1e-4) << rows << " x " << n << " x " << k;
  }
}

}  // namespace
}  // namespace imp::cuda
