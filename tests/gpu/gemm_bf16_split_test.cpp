// The split-activation prefill GEMM against cpu::linear on UNROUNDED fp32 activations: hi + lo bf16 terms carry
// about 16 significant bits, so the result must be as close to the fp32 reference as the fp32-activation GEMV
// (1e-4 of the output scale; plain bf16 activations miss this by an order of magnitude, ~2e-3).
#include <gtest/gtest.h>

#include <tuple>
#include <vector>

#include "cpu/ops.h"
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

}  // namespace
}  // namespace imp::cuda
