// Shared pieces of the GPU kernel tests: fresh random inputs, BF16 weights that exist both as a host
// TensorInfo (for the CPU twin) and on the device, and the relative error measure the tolerances use.
#pragma once

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "cuda/check.h"
#include "cuda/memory/device_buffer.h"
#include "model/checkpoint.h"
#include "model/config.h"
#include "model/weights.h"

namespace imp::cuda::testing_support {

// Seeded from the OS: every run sees fresh inputs.
inline std::mt19937& rng() {
  static std::mt19937 engine(std::random_device{}());
  return engine;
}

inline std::vector<float> random_floats(size_t n, float scale = 1.0f) {
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng());
  return v;
}

// `count` 16-bit values (bf16 / fp16 bits) from device memory the test does not own as a DeviceBuffer.
inline std::vector<uint16_t> download_bits(const uint16_t* device, size_t count) {
  std::vector<uint16_t> out(count);
  IMP_CUDA_CHECK(cudaMemcpy(out.data(), device, count * sizeof(uint16_t), cudaMemcpyDeviceToHost));
  return out;
}

// A host view (no copy) of `data` as a checkpoint tensor.
inline model::TensorInfo host_tensor(const void* data, DType dtype, std::vector<int64_t> shape) {
  model::TensorInfo t;
  t.name = "host";
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.data = static_cast<const uint8_t*>(data);
  t.nbytes = static_cast<size_t>(t.numel()) * dtype_size(dtype);
  return t;
}

// A random BF16 weight, N(offset, scale), on the host and on the device.
struct Bf16Weight {
  std::vector<uint16_t> bits;
  model::TensorInfo info;
  DeviceBuffer<uint16_t> device;
  Bf16Weight(std::vector<int64_t> shape, float scale, float offset = 0.0f) {
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    std::normal_distribution<float> dist(offset, scale);
    for (int64_t i = 0; i < n; ++i) bits.push_back(f32_to_bf16(dist(rng())));
    info = host_tensor(bits.data(), DType::kBF16, std::move(shape));
    device = DeviceBuffer<uint16_t>(bits);
  }
};

// max |got - want| / max |want|
inline double max_rel_diff(const std::vector<float>& got, const std::vector<float>& want) {
  double diff = 0.0, scale = 1e-30;
  for (size_t i = 0; i < want.size() && i < got.size(); ++i) {
    diff = std::max(diff, std::fabs(static_cast<double>(got[i]) - want[i]));
    scale = std::max(scale, std::fabs(static_cast<double>(want[i])));
  }
  return got.size() == want.size() ? diff / scale : INFINITY;
}

// A cpu::linear view of one NVFP4 projection in checkpoint layout (codes [rows, cols/2], E4M3 block scales
// [rows, cols/16]). It holds the TensorInfos its projection points at, so it is neither copied nor moved.
struct Nvfp4View {
  Nvfp4View(const uint8_t* codes, const uint8_t* scales, float scale_2, int64_t rows, int64_t cols)
      : codes_info(host_tensor(codes, DType::kU8, {rows, cols / 2})),
        scales_info(host_tensor(scales, DType::kF8E4M3, {rows, cols / 16})),
        projection{&codes_info, &scales_info, scale_2, rows, cols} {}
  Nvfp4View(const Nvfp4View&) = delete;
  Nvfp4View& operator=(const Nvfp4View&) = delete;
  model::TensorInfo codes_info, scales_info;
  model::ExpertProjection projection;
};

// Hyper-connection write inputs: a config with S streams of width d, and inject weights as the read makes
// them (2 sigmoid(.), positive).
inline model::ModelConfig hc_config(int streams, int d) {
  model::ModelConfig config;
  config.hc_count = streams;
  config.hidden_size = d;
  return config;
}
inline std::vector<float> positive_inject(int streams) {
  std::vector<float> inject = random_floats(static_cast<size_t>(streams));
  for (float& v : inject) v = 2.0f / (1.0f + std::exp(-v));
  return inject;
}

}  // namespace imp::cuda::testing_support
