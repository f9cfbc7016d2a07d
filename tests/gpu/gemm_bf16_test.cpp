// The tensor-core prefill GEMM against cpu::linear on fresh random inputs, at the model's dense shapes with
// row counts and output counts that are not multiples of the 128 x 128 tile.
#include <gtest/gtest.h>

#include <algorithm>
#include <tuple>
#include <vector>

#include "core/dtype.h"
#include "cpu/ops.h"
#include "cuda/kernels/gemm_bf16.h"
#include "cuda/memory/device_buffer.h"
#include "gpu_test_util.h"

namespace imp::cuda {
namespace {

using namespace testing_support;

void check_gemm(int rows, int n, int k) {
  Bf16Weight w({n, k}, 0.05f);
  auto x = random_floats(static_cast<size_t>(rows) * k);
  // The kernel rounds x to bf16 as it loads it; the twin gets the rounded values, so only the order of the
  // fp32 sums differs.
  std::vector<float> x_rounded(x.size());
  std::transform(x.begin(), x.end(), x_rounded.begin(), round_to_bf16);
  std::vector<float> want(static_cast<size_t>(rows) * n);
  cpu::linear(&w.info, x_rounded.data(), rows, want.data());

  DeviceBuffer<float> dx(x), dy(want.size());
  launch_gemm_bf16(dx.data(), w.device.data(), rows, n, k, dy.data(), nullptr);
  IMP_CUDA_CHECK(cudaDeviceSynchronize());
  // Exact products, fp32 sums in another order (tensor-core accumulation): 1e-4 of the output scale.
  EXPECT_LE(max_rel_diff(dy.download(), want), 1e-4) << rows << " x " << n << " x " << k;
}

TEST(GpuGemmBf16, MatchesCpuLinearAtModelShapes) {
  for (auto [rows, n, k] : {std::tuple{300, 10240, 2560}, {300, 2560, 10240}, {300, 320, 10240}, {257, 10240, 320},
                            {129, 2560, 6144}}) {
    check_gemm(rows, n, k);
  }
}

TEST(GpuGemmBf16, HandlesTailsAndTinyShapes) {
  for (auto [rows, n, k] : {std::tuple{1, 48, 2560}, {37, 250, 72}, {7, 1, 8}, {130, 129, 136}, {64, 4, 10240}}) {
    check_gemm(rows, n, k);
  }
}

}  // namespace
}  // namespace imp::cuda
