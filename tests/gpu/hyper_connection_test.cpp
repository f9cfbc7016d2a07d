// Hyper-connection read and write on the GPU (norm, GEMVs, element-wise kernels) against
// cpu::hyper_connection_read / _write, released shapes (S = 4, d = 2560, rank 320) and a 3-stream one.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <span>
#include <vector>

#include "core/dtype.h"
#include "cpu/blocks.h"
#include "cuda/kernels/dense.h"
#include "cuda/kernels/hyper_connection.h"
#include "cuda/memory/device_buffer.h"
#include "gpu_test_util.h"

namespace imp::cuda {
namespace {

using namespace testing_support;

void run_case(int streams, int d, int rank, int rows) {
  model::ModelConfig config;
  config.hc_count = streams;
  config.hidden_size = d;
  config.hc_lowrank = rank;
  const int width = streams * d;
  Bf16Weight norm({width}, 0.1f), down({rank, width}, 0.02f), up({width, rank}, 0.05f), inject({streams, width}, 0.02f);
  const model::HyperConnectionWeights w{&norm.info, &down.info, &up.info, &inject.info};

  std::normal_distribution<float> dist(0.0f, 2.0f);
  std::vector<float> stream(static_cast<size_t>(rows) * width), y(static_cast<size_t>(rows) * d);
  for (float& v : stream) v = dist(rng());
  for (float& v : y) v = dist(rng());
  std::vector<float> want_x(static_cast<size_t>(rows) * d), want_inject(static_cast<size_t>(rows) * streams);
  cpu::hyper_connection_read(config, w, stream.data(), rows, want_x.data(), want_inject.data());
  std::vector<float> want_stream = stream;
  cpu::hyper_connection_write(config, y.data(), want_inject.data(), rows, want_stream.data());

  // down and inject stacked as the device model stores them (prefill: the two projections, then both activations).
  std::vector<uint16_t> stacked(down.bits);
  stacked.insert(stacked.end(), inject.bits.begin(), inject.bits.end());
  DeviceBuffer<uint16_t> d_stacked(stacked);
  DeviceBuffer<float> d_stream(stream), d_y(y), d_normed(stream.size()), d_raw(static_cast<size_t>(rows) * rank),
      d_raw_inject(static_cast<size_t>(rows) * streams), d_low(static_cast<size_t>(rows) * rank), d_mix(stream.size()),
      d_x(want_x.size()), d_inject(want_inject.size());
  launch_rms_norm(d_stream.data(), norm.device.data(), rows, width, d, 1e-6f, d_normed.data(), nullptr);
  launch_gemv_bf16(d_stacked.data(), d_normed.data(), rows, rank, width, d_raw.data(), nullptr);
  launch_gemv_bf16(d_stacked.data() + static_cast<size_t>(rank) * width, d_normed.data(), rows, streams, width,
                   d_raw_inject.data(), nullptr);
  launch_hc_activations(d_raw.data(), d_raw_inject.data(), rows, rank, streams, streams, d_low.data(), d_inject.data(),
                        nullptr);
  launch_gemv_bf16(up.device.data(), d_low.data(), rows, width, rank, d_mix.data(), nullptr);
  launch_hc_mix(d_mix.data(), d_normed.data(), rows, streams, d, d_x.data(), nullptr);
  launch_hc_write(d_y.data(), d_inject.data(), rows, streams, d, d_stream.data(), nullptr);

  // fp32 both sides; sums over 10240 and 320 terms in other orders: 1e-5 of the scale.
  EXPECT_LE(max_rel_diff(d_x.download(), want_x), 1e-5);
  EXPECT_LE(max_rel_diff(d_inject.download(), want_inject), 1e-5);
  EXPECT_LE(max_rel_diff(d_stream.download(), want_stream), 1e-5);

  // The fused decode read, row by row.
  DeviceBuffer<float> d_row(static_cast<size_t>(width)), d_low1(static_cast<size_t>(rank + streams)),
      d_inv(static_cast<size_t>(streams)), d_x1(static_cast<size_t>(d));
  for (int r = 0; r < rows; ++r) {
    d_row.upload(std::span<const float>(stream.data() + static_cast<size_t>(r) * width, static_cast<size_t>(width)));
    launch_hc_read_down(d_row.data(), norm.device.data(), d_stacked.data(), rank + streams, rank, streams, d, 1e-6f,
                        d_low1.data(), d_inv.data(), nullptr);
    launch_hc_read_up_mix(d_row.data(), norm.device.data(), d_inv.data(), up.device.data(), d_low1.data(), rank, streams, d,
                          d_x1.data(), nullptr);
    const std::vector<float> low1 = d_low1.download();
    const std::vector<float> got_inject(low1.begin() + rank, low1.end());
    const std::vector<float> want_row_x(want_x.begin() + static_cast<ptrdiff_t>(r) * d, want_x.begin() + static_cast<ptrdiff_t>(r + 1) * d);
    const std::vector<float> want_row_inject(want_inject.begin() + r * streams, want_inject.begin() + (r + 1) * streams);
    EXPECT_LE(max_rel_diff(d_x1.download(), want_row_x), 1e-5) << "fused read, row " << r;
    EXPECT_LE(max_rel_diff(got_inject, want_row_inject), 1e-5) << "fused read, row " << r;
  }
}

TEST(GpuHyperConnection, ReadAndWriteMatchCpuAtReleasedShapes) { run_case(4, 2560, 320, 2); }
TEST(GpuHyperConnection, ReadAndWriteMatchCpuWithThreeStreams) { run_case(3, 64, 16, 5); }

}  // namespace
}  // namespace imp::cuda
