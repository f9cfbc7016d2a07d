// Owning device allocation. Allocation happens at load/plan time only; nothing in a decode step allocates.
#pragma once

#include <cstddef>
#include <span>
#include <utility>
#include <vector>

#include "cuda/check.h"

namespace imp::cuda {

template <typename T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t count) : count_(count) {
    if (count) IMP_CUDA_CHECK_ALLOC(cudaMalloc(&data_, count * sizeof(T)), count * sizeof(T));
  }
  explicit DeviceBuffer(std::span<const T> host) : DeviceBuffer(host.size()) { upload(host); }
  DeviceBuffer(DeviceBuffer&& other) noexcept { *this = std::move(other); }
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(count_, other.count_);
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() {
    if (data_) cudaFree(data_);
  }

  T* data() { return data_; }
  const T* data() const { return data_; }
  size_t size() const { return count_; }

  void upload(std::span<const T> host) {
    if (host.size() != count_) throw_invalid_launch("DeviceBuffer::upload: element count differs from the buffer's");
    IMP_CUDA_CHECK(cudaMemcpy(data_, host.data(), count_ * sizeof(T), cudaMemcpyHostToDevice));
  }
  std::vector<T> download() const {
    std::vector<T> host(count_);
    IMP_CUDA_CHECK(cudaMemcpy(host.data(), data_, count_ * sizeof(T), cudaMemcpyDeviceToHost));
    return host;
  }

 private:
  T* data_ = nullptr;
  size_t count_ = 0;
};

}  // namespace imp::cuda
