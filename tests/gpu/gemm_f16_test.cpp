// Prefill's fp16 term (DeviceModel::build_low_term_weights): the conversions bit for bit against the host's
// fp16 rounding, and the GEMM against a double product of the unrounded inputs within fp16's rounding of x.
#include <cuda_fp16.h>
#include <gtest/gtest.h>

#include <cmath>
#include <tuple>
#include <vector>

#include "core/dtype.h"
#include "cuda/kernels/gemm_bf16_split.h"
#include "cuda/memory/device_buffer.h"
#include "gpu_test_util.h"

namespace imp::cuda {
namespace {

using namespace testing_support;

uint16_t host_f16_bits(float v) {
  const __half h = __float2half_rn(v);
  return *reinterpret_cast<const uint16_t*>(&h);
}

TEST(GpuGemmF16, RowsAndAbsMaxMatchTheHost) {
  for (size_t count : {size_t{1}, size_t{1000}, size_t{1} << 20}) {
    Bf16Weight w({static_cast<int64_t>(count)}, 0.05f);
    const float scale = 1024.0f;
    DeviceBuffer<uint16_t> out(count);
    launch_f16_rows(w.device.data(), count, scale, out.data(), nullptr);
    DeviceBuffer<float> amax(1);
    launch_bf16_abs_max(w.device.data(), count, 1.0f, amax.data(), nullptr);
    IMP_CUDA_CHECK(cudaDeviceSynchronize());
    const std::vector<uint16_t> got = download_bits(out.data(), count);
    float want_max = 0.0f;
    size_t mismatches = 0;
    for (size_t i = 0; i < count; ++i) {
      mismatches += got[i] != host_f16_bits(bf16_to_f32(w.bits[i]) * scale);
      want_max = std::max(want_max, std::fabs(bf16_to_f32(w.bits[i]) + 1.0f));
    }
    EXPECT_EQ(mismatches, 0u) << count;
    EXPECT_EQ(amax.download()[0], want_max) << count;
  }
}

// x16 = fp16_rn((hi + lo) * scale) and fp16_rn(x * scale), quads (count % 4 == 0) and scalars.
TEST(GpuGemmF16, TermsMatchTheHost) {
  for (auto [rows, k] : {std::tuple{33, 2560}, {7, 13}}) {
    const std::vector<float> x = random_floats(static_cast<size_t>(rows) * k, 3.0f);
    DeviceBuffer<float> dx(x), scratch(x.size());
    const SplitActivations terms = launch_split_bf16(dx.data(), rows, k, scratch.data(), nullptr);
    DeviceBuffer<uint16_t> out(x.size());
    const float scale = 256.0f;
    const SplitActivations with16 = launch_f16_terms(terms, scale, out.data(), nullptr);
    IMP_CUDA_CHECK(cudaDeviceSynchronize());
    ASSERT_EQ(with16.x16, out.data());
    EXPECT_EQ(with16.x16_scale, scale);
    const std::vector<uint16_t> hi = download_bits(terms.hi, x.size()), lo = download_bits(terms.lo, x.size());
    const std::vector<uint16_t> got = download_bits(out.data(), x.size());
    size_t mismatches = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      mismatches += got[i] != host_f16_bits((bf16_to_f32(hi[i]) + bf16_to_f32(lo[i])) * scale);
    }
    EXPECT_EQ(mismatches, 0u) << rows << " x " << k;
    // Straight from the fp32 values: fp16_rn(x * scale).
    const SplitActivations values = launch_f16_values(dx.data(), rows, k, scale, out.data(), nullptr);
    IMP_CUDA_CHECK(cudaDeviceSynchronize());
    EXPECT_EQ(values.hi, nullptr);
    EXPECT_EQ(values.x16, out.data());
    EXPECT_EQ(values.x16_scale, scale);
    const std::vector<uint16_t> direct = download_bits(out.data(), x.size());
    mismatches = 0;
    for (size_t i = 0; i < x.size(); ++i) mismatches += direct[i] != host_f16_bits(x[i] * scale);
    EXPECT_EQ(mismatches, 0u) << rows << " x " << k << ": from the values";
  }
}

// The fp16 GEMM (with the fp16 copy taken instead of the split terms) against a double product of the unrounded
// x: each x value is rounded once to fp16 (relative 2^-11 after scaling into the normal range), W exactly, fp32
// accumulation, so every output is within 2^-10 sum_i |w_i x_i| of the exact one. Written into rows ldy apart,
// leaving the columns beside them untouched.
TEST(GpuGemmF16, GemmWithinFp16RoundingOfX) {
  for (auto [rows, n, k, ldy] : {std::tuple{300, 2560, 2560, 2560}, {37, 250, 72, 300}, {130, 129, 136, 129}}) {
    Bf16Weight w({n, k}, 0.05f);
    const std::vector<float> x = random_floats(static_cast<size_t>(rows) * k);
    DeviceBuffer<float> dx(x), scratch(x.size());
    const float x_scale = 4096.0f, w_scale = 65536.0f;  // |x| < 8 and |w| < 0.5 in practice: no overflow
    DeviceBuffer<uint16_t> x16(x.size()), w16(w.bits.size());
    launch_f16_rows(w.device.data(), w.bits.size(), w_scale, w16.data(), nullptr);
    const SplitActivations terms = launch_f16_terms(launch_split_bf16(dx.data(), rows, k, scratch.data(), nullptr),
                                                    x_scale, x16.data(), nullptr);
    const float sentinel = -12345.0f;
    DeviceBuffer<float> dy(std::vector<float>(static_cast<size_t>(rows) * ldy, sentinel));
    launch_gemm_bf16_split(terms, w.device.data(), n, dy.data(), nullptr, false, {}, F16Rows{w16.data(), w_scale}, ldy);
    IMP_CUDA_CHECK(cudaDeviceSynchronize());
    const std::vector<float> got = dy.download();
    double worst = 0.0;
    size_t untouched = 0;
    for (int t = 0; t < rows; ++t) {
      for (int o = 0; o < ldy; ++o) {
        const float value = got[static_cast<size_t>(t) * ldy + o];
        if (o >= n) {
          untouched += value == sentinel;
          continue;
        }
        double exact = 0.0, magnitude = 0.0;
        for (int i = 0; i < k; ++i) {
          const double p = static_cast<double>(x[static_cast<size_t>(t) * k + i]) * bf16_to_f32(w.bits[static_cast<size_t>(o) * k + i]);
          exact += p;
          magnitude += std::fabs(p);
        }
        worst = std::max(worst, std::fabs(value - exact) / (magnitude * std::ldexp(1.0, -10)));
      }
    }
    EXPECT_LE(worst, 1.0) << rows << " x " << n << " x " << k;  // in units of the bound
    EXPECT_EQ(untouched, static_cast<size_t>(rows) * (ldy - n)) << "columns beside the output were written";
  }
}

}  // namespace
}  // namespace imp::cuda
