// The bf16 act-flip bound of the GPU expert tests (moe_prefill_test, kernels_test, moe_decode_fused_test):
// expert kernels over NVFP4 or BF16 slots against a CPU twin (cpu::linear on ExpertProjection views of
// checkpoint-layout bytes, SwiGLU rounded to bf16, weighted sum in choice order).
//
// Tolerance, per output element y[t, n]:
//   |got - want| <= base * max|want| + flip[t, n]
// Both sides see the same x and the same exact weights; they differ by fp32 summation order only, which stays
// far below base (each test states its base), except where it moves a SwiGLU output a = silu(g) * u across a
// bf16 rounding midpoint: then the two act values are one bf16 step apart and that step, times a down weight
// and a route weight, lands in y. The twin bounds this act by act: tol(a) is how far the kernel's a can be
// from the twin's (act_tolerance), spread(a) the largest change of round_to_bf16 over [a - tol, a + tol] (0
// unless a midpoint lies within tol of a: the "ambiguous" acts; then one bf16 step, more only for acts near
// zero), and
//   flip[t, n] = 1.01 * sum_j |route_w[t, j]| * sum_i |W_down[n, i]| * spread(a[t, j, i])
// with |W_down| dequantized (block scale and weight_scale_2 included): cpu::linear on the down projection
// with its signs cleared; 1.01 covers the fp32 evaluation of the bound itself. Where there are enough acts
// for it to be a statistic, the check also asks that this stays a small correction (a minority of acts
// ambiguous, flip well below the output scale), so it cannot quietly turn into no bound at all.
//
// Use: a FlipExpert per expert (row norms of gate / up, |W_down|), a FlipBound over the twin's input rows x,
// FlipBound::add for each expert's pairs in place of the twin's own SwiGLU (it returns the bf16 acts for the
// twin's down projection), then expect_within_flip_bound on the kernels' output.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "cpu/ops.h"
#include "gpu_test_util.h"
#include "model/weights.h"

namespace imp::cuda::testing_support {

// Act tolerance (act_tolerance), in units of the fp32 unit roundoff u = 2^-24 where it is fp32 arithmetic:
//   g and u are H-term dot products that the kernels sum in tensor-core blocks, in an order of their own and
//   perhaps truncating each accumulator update. Reordering noise: kActDot * ||x_t|| * ||w_row|| (this also
//   covers sums that cancel to near zero, where a relative bound would not); a one-sided truncation on every
//   update of a sum that grows steadily: kActCoherent * |g|. Both were sized on a CPU emulation of the prefill
//   kernels with truncating 8-product (4-product) accumulator updates: over 6.5M acts the largest
//   |emulated a - twin a| reached 0.55 (0.75) of tol. The decode kernels (launch_expert_gate_up,
//   launch_moe_decode_gate_up) were not emulated; their sums are of the same kind or tamer (NVFP4:
//   mma.m16n8k16 into a fresh accumulator per 64-input supertile, the block scale applied to that fp32
//   partial; BF16: fp32 FMAs per lane, then a warp tree), so the tolerance is taken over unchanged.
//   silu(g) * u itself: __expf (2 + 1.2|g| ulp), a division instead of a product with the sigmoid, the scale
//   folding and the product: a few to ~25 u relative, covered by kActRel = 1e-5 (~170 u).
constexpr double kActDot = 8.0 / (1 << 24), kActCoherent = 1e-5, kActRel = 1e-5;

// The flip bound's evaluation margin (fp32 sums of the bound itself).
constexpr float kFlipMargin = 1.01f;

// The flip bound stays a small correction (expect_within_flip_bound). Checked where there are enough acts
// (kFlipStatsMinActs) for these to be statistics: with a few hundred, one large ambiguous act alone can be a
// sizable share of max|want|. Emulated at the released shapes: ~9% of acts ambiguous (nearly all of them small
// acts whose tolerance is the absolute reordering term, with a tiny bf16 step), max flip 2e-3 .. 3.3e-3 of
// max|want|. With three acts in four ambiguous (a tolerance of half a bf16 step), it reached 2e-2 .. 3.5e-2.
// Hence: at most a quarter of the acts ambiguous, max flip at most 1e-2 of max|want|.
constexpr size_t kFlipStatsMinActs = 100000;
constexpr double kFlipMaxShareOfScale = 1e-2;

// How far the kernels' unrounded SwiGLU output can be from the twin's a = silu(g) * u, given the error bounds
// of g and u propagated through silu(g) * u (silu'(g) = s (1 + g (1 - s)), s = sigmoid(g)).
// g_scale, u_scale: ||x_t|| * ||row of W_gate / W_up||.
inline double act_tolerance(float g, float u, float a, double g_scale, double u_scale) {
  const double s = 1.0 / (1.0 + std::exp(-static_cast<double>(g)));
  const double dsilu = s * (1.0 + g * (1.0 - s)), silu = g * s;
  const double dg = kActDot * g_scale + kActCoherent * std::fabs(g), du = kActDot * u_scale + kActCoherent * std::fabs(u);
  return kActRel * std::fabs(a) + std::fabs(dsilu * u) * dg + std::fabs(silu) * du;
}

// The largest change of round_to_bf16 over [a - tol, a + tol]: 0 unless a bf16 rounding midpoint lies within
// tol of a, and then the bf16 step across it (more steps only for acts near zero, where tol can exceed one).
inline double bf16_rounding_spread(float a, double tol) {
  const double hi = static_cast<double>(a) + tol, lo = static_cast<double>(a) - tol;
  float f_hi = static_cast<float>(hi), f_lo = static_cast<float>(lo);
  if (f_hi < hi) f_hi = std::nextafter(f_hi, INFINITY);  // rounded outwards: never narrower than the interval
  if (f_lo > lo) f_lo = std::nextafter(f_lo, -INFINITY);
  const double r = round_to_bf16(a);
  return std::max(round_to_bf16(f_hi) - r, r - round_to_bf16(f_lo));
}

// ||v|| of n floats, in double.
inline double l2_norm(const float* v, size_t n) {
  double sum = 0.0;
  for (size_t i = 0; i < n; ++i) sum += static_cast<double>(v[i]) * v[i];
  return std::sqrt(sum);
}

// ||row|| of each row of an NVFP4 projection in checkpoint layout (codes [rows, cols/2], E4M3 block scales
// [rows, cols/16], weight_scale_2), in the values the twin dequantizes.
inline std::vector<double> nvfp4_row_norms(const uint8_t* codes, const uint8_t* scales, float scale_2, int rows, int cols) {
  double e2m1_sq[16];
  for (int c = 0; c < 16; ++c) e2m1_sq[c] = static_cast<double>(e2m1_to_f32(static_cast<uint8_t>(c))) * e2m1_to_f32(static_cast<uint8_t>(c));
  std::vector<double> norms(static_cast<size_t>(rows));
  for (int r = 0; r < rows; ++r) {
    const size_t row = static_cast<size_t>(r) * cols;
    double sum = 0.0;
    for (int b = 0; b < cols / 16; ++b) {
      double block = 0.0;
      for (int j = 0; j < 8; ++j) {
        const uint8_t byte = codes[(row + static_cast<size_t>(b) * 16) / 2 + j];
        block += e2m1_sq[byte & 0xf] + e2m1_sq[byte >> 4];
      }
      const double scale = e4m3_to_f32(scales[row / 16 + b]);
      sum += block * scale * scale;
    }
    sum *= static_cast<double>(scale_2) * scale_2;
    norms[static_cast<size_t>(r)] = std::sqrt(sum);
  }
  return norms;
}

// ||row|| of each row of a BF16 projection [rows, cols].
inline std::vector<double> bf16_row_norms(const uint16_t* bits, int rows, int cols) {
  std::vector<double> norms(static_cast<size_t>(rows));
  for (int r = 0; r < rows; ++r) {
    const size_t row = static_cast<size_t>(r) * cols;
    double sum = 0.0;
    for (int c = 0; c < cols; ++c) {
      const double v = bf16_to_f32(bits[row + c]);
      sum += v * v;
    }
    norms[static_cast<size_t>(r)] = std::sqrt(sum);
  }
  return norms;
}

// What the bound needs of one expert (hidden H, intermediate I): the row norms of W_gate and W_up [I], and
// |W_down| [H, I] in the expert's own format. Self-contained (copies what it keeps).
struct FlipExpert {
  int H = 0, I = 0;
  bool nvfp4 = false;
  std::vector<double> gate_norm, up_norm;
  // |W_down|: the E2M1 sign is bit 3 of each nibble (the E4M3 block scales and weight_scale_2 are positive),
  // the BF16 sign bit 15.
  std::vector<uint8_t> abs_down_codes, down_scales;  // NVFP4: codes & 0x77 [H, I/2], E4M3 [H, I/16]
  float down_scale_2 = 1.0f;
  std::vector<uint16_t> abs_down_bf16;  // BF16: bits & 0x7fff [H, I]

  // y [rows, H] = |W_down| x for x [rows, I] (cpu::linear, as the twin's down projection).
  void abs_down(const float* x, int rows, float* y) const {
    if (nvfp4) {
      const Nvfp4View w(abs_down_codes.data(), down_scales.data(), down_scale_2, H, I);
      cpu::linear(w.projection, x, rows, y);
    } else {
      const model::TensorInfo w = host_tensor(abs_down_bf16.data(), DType::kBF16, {H, I});
      cpu::linear(model::ExpertProjection{&w, nullptr, 1.0f, H, I}, x, rows, y);
    }
  }
};

// One NVFP4 projection in checkpoint layout: codes [rows, cols/2], E4M3 block scales [rows, cols/16].
struct Nvfp4Weights {
  const uint8_t* codes;
  const uint8_t* scales;
  float scale_2;
};

inline FlipExpert nvfp4_flip_expert(const Nvfp4Weights& gate, const Nvfp4Weights& up, const Nvfp4Weights& down, int H, int I) {
  FlipExpert e;
  e.H = H, e.I = I, e.nvfp4 = true;
  e.gate_norm = nvfp4_row_norms(gate.codes, gate.scales, gate.scale_2, I, H);
  e.up_norm = nvfp4_row_norms(up.codes, up.scales, up.scale_2, I, H);
  e.abs_down_codes.assign(down.codes, down.codes + static_cast<size_t>(H) * I / 2);
  for (auto& b : e.abs_down_codes) b &= 0x77;
  e.down_scales.assign(down.scales, down.scales + static_cast<size_t>(H) * I / 16);
  e.down_scale_2 = down.scale_2;
  return e;
}

// BF16 gate, up [I, H] and down [H, I].
inline FlipExpert bf16_flip_expert(const uint16_t* gate, const uint16_t* up, const uint16_t* down, int H, int I) {
  FlipExpert e;
  e.H = H, e.I = I, e.nvfp4 = false;
  e.gate_norm = bf16_row_norms(gate, I, H);
  e.up_norm = bf16_row_norms(up, I, H);
  e.abs_down_bf16.assign(down, down + static_cast<size_t>(H) * I);
  for (auto& b : e.abs_down_bf16) b &= 0x7fff;
  return e;
}

// flip [tokens, H] of one test case, accumulated expert by expert, with the act counts for the report.
class FlipBound {
 public:
  // x [tokens, H]: the rows the twin feeds its gate / up projections (bf16-rounded where the kernels round).
  FlipBound(const std::vector<float>& x, int tokens, int H)
      : H_(H), x_norm_(static_cast<size_t>(tokens)), flip_(static_cast<size_t>(tokens) * H, 0.0f) {
    for (int t = 0; t < tokens; ++t) x_norm_[static_cast<size_t>(t)] = l2_norm(x.data() + static_cast<size_t>(t) * H, static_cast<size_t>(H));
  }

  // The twin's SwiGLU for n pairs of expert e, with their flips: g, u [n, I] the twin's unrounded gate / up
  // outputs (cpu::linear); pair i belongs to token token[i] with route weight route_w[i]. Writes
  // act [n, I] = round_to_bf16(silu(g) * u), the input of the twin's down projection (act may be g), and adds
  //   flip[token[i], :] += 1.01 * |route_w[i]| * |W_down| spread(a[i, :]).
  void add(const FlipExpert& e, int n, const int* token, const float* route_w, const float* g, const float* u, float* act) {
    const int I = e.I;
    std::vector<float> spread(static_cast<size_t>(n) * I), y_flip(static_cast<size_t>(n) * H_);
    for (int i = 0; i < n; ++i) {
      const double xn = x_norm_[static_cast<size_t>(token[i])];
      for (int r = 0; r < I; ++r) {
        const size_t at = static_cast<size_t>(i) * I + r;
        const float a = cpu::silu(g[at]) * u[at];
        const double tol = act_tolerance(g[at], u[at], a, xn * e.gate_norm[static_cast<size_t>(r)], xn * e.up_norm[static_cast<size_t>(r)]);
        spread[at] = static_cast<float>(bf16_rounding_spread(a, tol));
        ambiguous_ += spread[at] > 0.0f;
        act[at] = round_to_bf16(a);
      }
    }
    acts_ += static_cast<size_t>(n) * I;
    e.abs_down(spread.data(), n, y_flip.data());
    for (int i = 0; i < n; ++i) {
      const float rw = std::fabs(route_w[i]);
      float* out = flip_.data() + static_cast<size_t>(token[i]) * H_;
      for (int m = 0; m < H_; ++m) out[m] += kFlipMargin * rw * y_flip[static_cast<size_t>(i) * H_ + m];
    }
  }

  const std::vector<float>& flip() const { return flip_; }
  size_t acts() const { return acts_; }            // acts seen
  size_t ambiguous() const { return ambiguous_; }  // of which within tol of a bf16 rounding midpoint

 private:
  int H_;
  std::vector<double> x_norm_;
  std::vector<float> flip_;
  size_t acts_ = 0, ambiguous_ = 0;
};

struct FlipCheck {
  double base;                // the fp32 reordering allowance, as a share of max|want|
  bool stats = true;          // also check that the bound stays a small correction (with >= kFlipStatsMinActs acts)
  std::string what;           // the case, for the messages
  std::string row = "token";  // what a row of `width` outputs is, for the messages
};

// Per element: |got - want| <= check.base * max|want| + flip (see the top of the file); got, want, flip are
// [rows, width]. NaN fails and is reported first. acts / ambiguous: FlipBound's counts behind flip.
inline void expect_within_flip_bound(const std::vector<float>& got, const std::vector<float>& want,
                                     const std::vector<float>& flip, int width, size_t acts, size_t ambiguous,
                                     const FlipCheck& check) {
  ASSERT_EQ(got.size(), want.size()) << check.what;
  ASSERT_EQ(flip.size(), want.size()) << check.what;
  if (want.empty()) return;
  double scale = 0.0, max_flip = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    scale = std::max(scale, std::fabs(static_cast<double>(want[i])));
    max_flip = std::max(max_flip, static_cast<double>(flip[i]));
  }
  size_t bad = 0, worst = 0;
  double worst_excess = -INFINITY;
  for (size_t i = 0; i < want.size(); ++i) {
    const double diff = std::fabs(static_cast<double>(got[i]) - want[i]), bound = check.base * scale + flip[i];
    if (!(diff <= bound)) ++bad;
    const double excess = std::isnan(diff) ? INFINITY : diff - bound;
    if (excess > worst_excess) {
      worst_excess = excess;
      worst = i;
    }
  }
  const size_t w = static_cast<size_t>(width);
  const double worst_diff = std::fabs(static_cast<double>(got[worst]) - want[worst]);
  EXPECT_EQ(bad, 0u) << bad << " elements out of bound; " << check.what << ": worst [" << check.row << " "
                     << worst / w << ", " << worst % w << "] |got - want| " << worst_diff << " (" << worst_diff / scale
                     << " of max|want|), got " << got[worst] << " want " << want[worst] << ", bound "
                     << check.base * scale + flip[worst] << " = " << check.base << " * max|want| + flip " << flip[worst]
                     << "; ambiguous acts " << ambiguous << " of " << acts << ", max|want| " << scale
                     << ", max flip " << max_flip;
  if (check.stats && acts >= kFlipStatsMinActs) {
    EXPECT_LE(ambiguous, acts / 4) << check.what << ": ambiguous acts " << ambiguous << " of " << acts;
    EXPECT_LE(max_flip, kFlipMaxShareOfScale * scale) << check.what << ": max flip " << max_flip << ", max|want| " << scale;
  }
}

inline void expect_within_flip_bound(const std::vector<float>& got, const std::vector<float>& want, const FlipBound& bound,
                                     int width, const FlipCheck& check) {
  expect_within_flip_bound(got, want, bound.flip(), width, bound.acts(), bound.ambiguous(), check);
}

}  // namespace imp::cuda::testing_support
