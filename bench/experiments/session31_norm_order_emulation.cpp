// Session 31: how far the hc write/norm/split row kernel's split terms can be from launch_rms_norm's N when the
// squares are summed with 640 (or 288) threads instead of 256 (tests/gpu/hyper_connection_test.cpp's bound, 2^-16).
// Build and run: g++ -O2 -o /tmp/emu bench/experiments/session31_norm_order_emulation.cpp && /tmp/emu
// Output (session 31): worst inv rel 1.83e-07, worst (hi+lo) vs other N rel 7.85e-06, 2^-16 = 1.53e-05
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>
float bf16(float x) {
  uint32_t b;
  std::memcpy(&b, &x, 4);
  b = (b + 0x7fff + ((b >> 16) & 1)) & 0xffff0000u;
  float r;
  std::memcpy(&r, &b, 4);
  return r;
}
float sum_order(const std::vector<float>& e, int T) {
  std::vector<float> per(T, 0.0f);
  for (size_t i = 0; i < e.size(); ++i) per[i % T] += e[i];
  while (per.size() > 1) {
    if (per.size() % 2) per.push_back(0.0f);
    std::vector<float> n(per.size() / 2);
    for (size_t i = 0; i < n.size(); ++i) n[i] = per[2 * i] + per[2 * i + 1];
    per = n;
  }
  return per[0];
}
int main() {
  std::mt19937 rng(7);
  std::normal_distribution<float> h_dist(0.0f, 2.0f), w_dist(0.0f, 0.1f);
  double worst = 0, worst_inv = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    const int d = trial % 2 ? 2560 : 1028;
    std::vector<float> h(d), w(d), e(d / 4);
    for (int i = 0; i < d; ++i) {
      h[i] = h_dist(rng) * (1.0f + trial % 7);
      w[i] = bf16(w_dist(rng));
    }
    for (int q = 0; q < d / 4; ++q)
      e[q] = ((h[4 * q] * h[4 * q] + h[4 * q + 1] * h[4 * q + 1]) + h[4 * q + 2] * h[4 * q + 2]) +
             h[4 * q + 3] * h[4 * q + 3];
    const float ia = 1.0f / std::sqrt(sum_order(e, 256) / d + 1e-6f),
                ib = 1.0f / std::sqrt(sum_order(e, d == 2560 ? 640 : 288) / d + 1e-6f);
    worst_inv = std::fmax(worst_inv, std::fabs(ia - ib) / ia);
    for (int i = 0; i < d; ++i) {
      const float na = h[i] * ia * (1.0f + w[i]), nb = h[i] * ib * (1.0f + w[i]);
      const float hi = bf16(nb), lo = bf16(nb - hi);
      const double err = std::fabs(double(hi) + lo - na) / std::fmax(std::fabs(na), 1e-30f);
      worst = std::fmax(worst, err);
    }
  }
  std::printf("worst inv rel %.3g, worst (hi+lo) vs other N rel %.3g, 2^-16 = %.3g\n", worst_inv, worst,
              std::ldexp(1.0, -16));
}
