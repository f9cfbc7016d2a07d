// Hyper-connection read and write on the GPU (norm, GEMVs, element-wise kernels) against
// cpu::hyper_connection_read / _write, released shapes (S = 4, d = 2560, rank 320) and a 3-stream one.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "cpu/blocks.h"
#include "cuda/blas.h"
#include "cuda/kernels/dense.h"
#include "cuda/kernels/gemm_bf16_split.h"
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
      d_x(want_x.size()), d_inject(want_inject.size()), d_scratch(stream.size()), d_x_terms(want_x.size());
  launch_rms_norm(d_stream.data(), norm.device.data(), rows, width, d, 1e-6f, d_normed.data(), nullptr);
  launch_gemv_bf16(d_stacked.data(), d_normed.data(), rows, rank, width, d_raw.data(), nullptr);
  launch_gemv_bf16(d_stacked.data() + static_cast<size_t>(rank) * width, d_normed.data(), rows, streams, width,
                   d_raw_inject.data(), nullptr);
  launch_hc_activations(d_raw.data(), d_raw_inject.data(), rows, rank, streams, streams, d_low.data(), d_inject.data(),
                        nullptr);
  launch_gemv_bf16(up.device.data(), d_low.data(), rows, width, rank, d_mix.data(), nullptr);
  launch_hc_mix(d_mix.data(), launch_split_bf16(d_normed.data(), rows, width, d_scratch.data(), nullptr), streams, d,
                d_x.data(), d_x_terms.data(), nullptr);
  launch_hc_write(d_y.data(), d_inject.data(), rows, streams, d, d_stream.data(), nullptr);

  // fp32 both sides (the mix reads N as its two bf16 terms, ~2^-17 relative); sums over 10240 and 320 terms in
  // other orders: 1e-5 of the scale.
  EXPECT_LE(max_rel_diff(d_x.download(), want_x), 1e-5);
  EXPECT_LE(max_rel_diff(d_inject.download(), want_inject), 1e-5);
  EXPECT_LE(max_rel_diff(d_stream.download(), want_stream), 1e-5);

  // The fused decode read, row by row.
  DeviceBuffer<float> d_row(static_cast<size_t>(width)), d_low1(static_cast<size_t>(rank + streams)),
      d_inv(static_cast<size_t>(streams)), d_x1(static_cast<size_t>(d)), d_x2(static_cast<size_t>(d));
  std::vector<uint16_t> up_repeated;
  for (int i = 0; i < width; ++i) {
    for (int half = 0; half < 2; ++half) {
      up_repeated.insert(up_repeated.end(), up.bits.begin() + static_cast<ptrdiff_t>(i) * rank,
                         up.bits.begin() + static_cast<ptrdiff_t>(i + 1) * rank);
    }
  }
  DeviceBuffer<uint16_t> d_up_repeated(up_repeated);
  for (int r = 0; r < rows; ++r) {
    d_row.upload(std::span<const float>(stream.data() + static_cast<size_t>(r) * width, static_cast<size_t>(width)));
    launch_hc_read_down(d_row.data(), norm.device.data(), d_stacked.data(), rank + streams, rank, streams, d, 1e-6f,
                        d_low1.data(), d_inv.data(), nullptr);
    launch_hc_read_up_mix(d_row.data(), norm.device.data(), d_inv.data(), up.device.data(), rank, d_low1.data(), rank, streams, d,
                          d_x1.data(), nullptr);
    // The engine's layout: each up row twice ([W | W], HyperConnectionDevice::up), read with a row stride of
    // 2 rank: the same bits.
    launch_hc_read_up_mix(d_row.data(), norm.device.data(), d_inv.data(), d_up_repeated.data(), 2 * rank, d_low1.data(),
                          rank, streams, d, d_x2.data(), nullptr);
    EXPECT_TRUE(d_x2.download() == d_x1.download()) << "repeated up rows, row " << r;
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

// launch_hc_mix on both of its paths: four outputs per thread (d % 4 == 0, aligned) and one (d = 66), against
// the formula in float with N = hi + lo from the same bf16 terms. Tolerance 1e-6 of the scale: expf on the device
// and std::exp on the host may differ by an ulp or two, nothing else differs. x's split terms bit for bit
// launch_split_bf16 of the x it wrote, with and without x.
void check_mix(int streams, int d, int rows) {
  std::normal_distribution<float> dist(0.0f, 2.0f);
  std::vector<float> mix(static_cast<size_t>(rows) * streams * d), normed(mix.size());
  std::vector<uint16_t> terms(2 * mix.size());  // [hi | lo], as launch_split_bf16 lays them out
  for (float& v : mix) v = dist(rng());
  for (size_t i = 0; i < normed.size(); ++i) {
    const float v = dist(rng());
    terms[i] = f32_to_bf16(v);
    terms[normed.size() + i] = f32_to_bf16(v - bf16_to_f32(terms[i]));
    normed[i] = bf16_to_f32(terms[i]) + bf16_to_f32(terms[normed.size() + i]);
  }
  std::vector<float> want(static_cast<size_t>(rows) * d);
  for (int r = 0; r < rows; ++r) {
    for (int j = 0; j < d; ++j) {
      float sum = 0.0f;
      for (int s = 0; s < streams; ++s) {
        const size_t at = (static_cast<size_t>(r) * streams + s) * d + j;
        sum += 1.0f / (1.0f + std::exp(-mix[at])) * normed[at];
      }
      want[static_cast<size_t>(r) * d + j] = sum * (1.0f / static_cast<float>(streams));
    }
  }
  DeviceBuffer<float> d_mix(mix), d_x(want.size()), d_x_terms(want.size()), want_terms(want.size());
  DeviceBuffer<uint16_t> d_terms(terms);
  const SplitActivations split{d_terms.data(), d_terms.data() + normed.size(), rows, streams * d};
  const SplitActivations got = launch_hc_mix(d_mix.data(), split, streams, d, d_x.data(), d_x_terms.data(), nullptr);
  EXPECT_LE(max_rel_diff(d_x.download(), want), 1e-6) << "streams " << streams << " d " << d << " rows " << rows;
  const SplitActivations expect = launch_split_bf16(d_x.data(), rows, d, want_terms.data(), nullptr);
  IMP_CUDA_CHECK(cudaDeviceSynchronize());
  EXPECT_TRUE(d_x_terms.download() == want_terms.download()) << "x terms, d " << d;
  EXPECT_EQ(got.lo - got.hi, expect.lo - expect.hi);
  EXPECT_EQ(got.rows, rows);
  EXPECT_EQ(got.k, d);
  // Without fp32 x (prefill's reads before GEMMs only): the same terms.
  DeviceBuffer<float> terms_only(want.size());
  launch_hc_mix(d_mix.data(), split, streams, d, nullptr, terms_only.data(), nullptr);
  IMP_CUDA_CHECK(cudaDeviceSynchronize());
  EXPECT_TRUE(terms_only.download() == want_terms.download()) << "x terms without x, d " << d;
}
TEST(GpuHyperConnection, MixMatchesTheFormulaOnBothPaths) {
  check_mix(4, 2560, 3);  // 16-byte path
  check_mix(3, 66, 5);    // one output per thread
}

// The prefill's up projection + mix in one kernel (launch_hc_up_mix) against the formula in double from the same
// bf16 terms (m = sum_k (hi + lo)_k W_k, x = mean_s sigmoid(m_s) N_s), and against the GEMM + launch_hc_mix pair it
// replaces. Tolerance 1e-5 of the scale: fp32 sums of 2 rank products in the tensor cores' order against double.
// x's split terms bit for bit launch_split_bf16 of the x it wrote, with and without x, and its fp16 term bit for bit
// launch_f16_terms of those terms. `repeated`: up rows stored
// twice ([W | W], as the engine keeps them) or once.
void check_up_mix(int d, int rank, int rows, bool repeated) {
  constexpr int streams = 4;
  const int width = streams * d, stride = repeated ? 2 * rank : rank;
  ASSERT_TRUE(hc_up_mix_fits(streams, d, rank));
  Bf16Weight up({width, rank}, 0.05f);
  std::vector<uint16_t> up_rows;
  for (int i = 0; i < width; ++i) {
    for (int half = 0; half < (repeated ? 2 : 1); ++half) {
      up_rows.insert(up_rows.end(), up.bits.begin() + static_cast<ptrdiff_t>(i) * rank,
                     up.bits.begin() + static_cast<ptrdiff_t>(i + 1) * rank);
    }
  }
  std::normal_distribution<float> dist(0.0f, 2.0f);
  std::vector<float> low(static_cast<size_t>(rows) * rank), normed(static_cast<size_t>(rows) * width);
  for (float& v : low) v = 0.5f * dist(rng());
  std::vector<uint16_t> terms(2 * normed.size());  // [hi | lo], as launch_split_bf16 lays them out
  for (size_t i = 0; i < normed.size(); ++i) {
    const float v = dist(rng());
    terms[i] = f32_to_bf16(v);
    terms[normed.size() + i] = f32_to_bf16(v - bf16_to_f32(terms[i]));
    normed[i] = bf16_to_f32(terms[i]) + bf16_to_f32(terms[normed.size() + i]);
  }
  DeviceBuffer<float> d_low(low), low_scratch(low.size()), d_mix(normed.size()), d_x(static_cast<size_t>(rows) * d),
      want_x(static_cast<size_t>(rows) * d), d_x_terms(d_x.size()), want_terms(d_x.size()), terms_only(d_x.size());
  DeviceBuffer<uint16_t> d_terms(terms), d_up(up_rows);
  const uint16_t* low_terms = launch_split_bf16_rows(d_low.data(), rows, rank, low_scratch.data(), nullptr);
  const SplitActivations split{d_terms.data(), d_terms.data() + normed.size(), rows, width};
  const SplitActivations got =
      launch_hc_up_mix(low_terms, d_up.data(), stride, rank, split, streams, d, d_x.data(), d_x_terms.data(), nullptr);
  std::vector<uint16_t> lt(2 * low.size());
  IMP_CUDA_CHECK(cudaMemcpy(lt.data(), low_terms, lt.size() * sizeof(uint16_t), cudaMemcpyDeviceToHost));
  std::vector<float> want(static_cast<size_t>(rows) * d, 0.0f);
  for (int r = 0; r < rows; ++r) {
    for (int j = 0; j < d; ++j) {
      float sum = 0.0f;
      for (int s = 0; s < streams; ++s) {
        const size_t n = static_cast<size_t>(s) * d + j;
        double m = 0.0;
        for (int k = 0; k < rank; ++k) {
          const size_t at = static_cast<size_t>(r) * 2 * rank + k;
          m += (static_cast<double>(bf16_to_f32(lt[at])) + bf16_to_f32(lt[at + rank])) *
               bf16_to_f32(up.bits[n * rank + k]);
        }
        sum += 1.0f / (1.0f + std::exp(-static_cast<float>(m))) * normed[static_cast<size_t>(r) * width + n];
      }
      want[static_cast<size_t>(r) * d + j] = sum * (1.0f / streams);
    }
  }
  const std::string shape = "d " + std::to_string(d) + " rank " + std::to_string(rank) + " rows " + std::to_string(rows);
  EXPECT_LE(max_rel_diff(d_x.download(), want), 1e-5) << shape;
  EXPECT_EQ(got.rows, rows);
  EXPECT_EQ(got.k, d);
  launch_split_bf16(d_x.data(), rows, d, want_terms.data(), nullptr);
  IMP_CUDA_CHECK(cudaDeviceSynchronize());
  EXPECT_TRUE(d_x_terms.download() == want_terms.download()) << shape << ": x terms";
  // Without x, with x's fp16 term: the terms as before, and the fp16 term launch_f16_terms's bits.
  DeviceBuffer<uint16_t> x16(static_cast<size_t>(rows) * d), want16(x16.size());
  const float x16_scale = 1024.0f;
  const SplitActivations with16 = launch_hc_up_mix(low_terms, d_up.data(), stride, rank, split, streams, d, nullptr,
                                                   terms_only.data(), nullptr, x16.data(), x16_scale);
  EXPECT_EQ(with16.x16, x16.data());
  EXPECT_EQ(with16.x16_scale, x16_scale);
  launch_f16_terms(with16, x16_scale, want16.data(), nullptr);
  IMP_CUDA_CHECK(cudaDeviceSynchronize());
  EXPECT_TRUE(terms_only.download() == want_terms.download()) << shape << ": x terms without x";
  EXPECT_TRUE(x16.download() == want16.download()) << shape << ": x's fp16 term";
  // The pair it replaces: the GEMM of [hi | lo] against [W | W] rows, then the mix.
  if (!repeated) return;
  gemm_bf16_rows(low_terms, d_up.data(), rows, width, 2 * rank, d_mix.data(), false, nullptr);
  launch_hc_mix(d_mix.data(), split, streams, d, want_x.data(), want_terms.data(), nullptr);
  EXPECT_LE(max_rel_diff(d_x.download(), want_x.download()), 1e-5) << shape << ": against GEMM + mix";
}

TEST(GpuHyperConnection, UpMixMatchesTheFormulaAndTheGemmWithMix) {
  check_up_mix(2560, 320, 520, true);  // released: 3 blocks per 64 columns, 9 tiles of 64 tokens, the last partial
  check_up_mix(128, 64, 300, false);   // one k box, one tile per block, up rows stored once
  check_up_mix(256, 80, 64, true);     // a single tile; two k boxes, the second mostly past rank (zeros)
  check_up_mix(64, 16, 37, true);      // the fixtures' shape (S 4, d 64, rank 16): one partial tile
}

// The prefill's fused write + norm + split (launch_hc_write_norm_split; both of its kernels: the row in registers
// and the wider one) against the three kernels it replaces. The streams bit for bit. The split terms bit for bit
// too where the fused kernel sums the squares as launch_rms_norm does (its threads the same: up to 256 quads per
// stream, or more than 640); from 257 to 640 quads its row kernel takes one quad per thread, so its norms may
// differ in the last bit, and the terms are checked against the separate kernels' N element by element: hi + lo
// within 2^-16 of |N|, hi within 2^-8 (the split keeps ~2^-17; a CPU emulation of both orders over 2000 rows of
// these distributions, bench/experiments/session31_norm_order_emulation.cpp, gives up to 1.8e-7 of the inverse and
// 7.9e-6 of |N| for hi + lo). Every shape has more than 64 (row, group) items or groups below 1024, so
// launch_rms_norm takes its row kernel. The inject logits (when `with_inject`) against N . W^T in
// double from the separate kernels' N: fp32 sums of S*d terms in another order, 1e-5 of the scale.
void check_write_norm_split(int streams, int d, int rows, bool with_inject) {
  const int width = streams * d;
  const size_t count = static_cast<size_t>(rows) * width;
  Bf16Weight norm({width}, 0.1f), inject_w({streams, width}, 0.02f);
  std::normal_distribution<float> dist(0.0f, 2.0f);
  std::vector<float> stream(count), y(static_cast<size_t>(rows) * d), inject(static_cast<size_t>(rows) * streams);
  for (float& v : stream) v = dist(rng());
  for (float& v : y) v = dist(rng());
  for (float& v : inject) v = 1.0f + 0.5f * dist(rng());
  DeviceBuffer<float> d_y(y), d_inject(inject), want_stream(stream), got_stream(stream), want_normed(count),
      want_scratch(count), got_scratch(count), got_logits(static_cast<size_t>(rows) * streams);
  launch_hc_write(d_y.data(), d_inject.data(), rows, streams, d, want_stream.data(), nullptr);
  launch_rms_norm(want_stream.data(), norm.device.data(), rows, width, d, 1e-6f, want_normed.data(), nullptr);
  const SplitActivations want = launch_split_bf16(want_normed.data(), rows, width, want_scratch.data(), nullptr);
  const SplitActivations got = launch_hc_write_norm_split(
      d_y.data(), d_inject.data(), rows, streams, d, got_stream.data(), norm.device.data(), 1e-6f,
      with_inject ? inject_w.device.data() : nullptr, with_inject ? got_logits.data() : nullptr, got_scratch.data(),
      nullptr);
  IMP_CUDA_CHECK(cudaDeviceSynchronize());
  const std::string shape = "S " + std::to_string(streams) + " d " + std::to_string(d) + " rows " + std::to_string(rows);
  EXPECT_TRUE(got_stream.download() == want_stream.download()) << shape << ": streams";
  const std::vector<float> n = want_normed.download(), terms = got_scratch.download();
  const int quads = d / 4;
  if (quads <= 256 || quads > 640) EXPECT_TRUE(terms == want_scratch.download()) << shape << ": split terms, bit for bit";
  const auto* bits = reinterpret_cast<const uint16_t*>(terms.data());  // [hi of all | lo of all], count each
  size_t off = 0;
  for (size_t i = 0; i < count; ++i) {
    const double hi = bf16_to_f32(bits[i]), lo = bf16_to_f32(bits[count + i]), want = std::fabs(n[i]);
    if (std::fabs(hi + lo - n[i]) > 0x1p-16 * want || std::fabs(hi - n[i]) > 0x1p-8 * want) ++off;
  }
  EXPECT_EQ(off, 0u) << shape << ": split terms off N";
  EXPECT_EQ(got.rows, want.rows);
  EXPECT_EQ(got.k, want.k);
  EXPECT_EQ(got.lo - got.hi, want.lo - want.hi);  // the same layout in the scratch
  if (!with_inject) return;
  std::vector<float> want_logits(static_cast<size_t>(rows) * streams);
  for (int r = 0; r < rows; ++r) {
    for (int k = 0; k < streams; ++k) {
      double sum = 0.0;
      for (int i = 0; i < width; ++i) {
        sum += static_cast<double>(n[static_cast<size_t>(r) * width + i]) *
               bf16_to_f32(inject_w.bits[static_cast<size_t>(k) * width + i]);
      }
      want_logits[static_cast<size_t>(r) * streams + k] = static_cast<float>(sum);
    }
  }
  EXPECT_LE(max_rel_diff(got_logits.download(), want_logits), 1e-5) << shape << ": inject logits";
}

TEST(GpuHyperConnection, FusedWriteNormSplitMatchesTheSeparateKernels) {
  check_write_norm_split(4, 2560, 17, true);   // released: 640 quads per stream, one per thread
  check_write_norm_split(3, 64, 5, true);      // 16 quads per stream: one warp
  check_write_norm_split(2, 1028, 33, true);   // 257 quads: a partial last warp
  check_write_norm_split(4, 3072, 17, true);   // 768 quads: the row kernel's three quads per thread of 256
  check_write_norm_split(3, 2816, 33, false);  // 704 quads, three per thread, no logits
  check_write_norm_split(4, 2560, 17, false);  // no inject weights (the final mixer's read): no logits
  check_write_norm_split(6, 64, 17, true);     // more than four streams: the eight-logit instantiation
  check_write_norm_split(2, 4096, 33, true);   // 4 quads per thread: too wide for the row in registers
  check_write_norm_split(4, 1028, 17, false);  // 257 quads without logits, a partial last warp
}

}  // namespace
}  // namespace imp::cuda
