#include "cuda/launch.h"

namespace imp::cuda {
namespace {
thread_local bool pdl_on = false;
thread_local std::optional<int> priority_now;
}  // namespace

PdlScope::PdlScope() : previous_(pdl_on) { pdl_on = true; }
PdlScope::~PdlScope() { pdl_on = previous_; }
bool pdl_enabled() { return pdl_on; }

LaunchPriority::LaunchPriority(int priority) : previous_(priority_now) { priority_now = priority; }
LaunchPriority::~LaunchPriority() { priority_now = previous_; }
std::optional<int> launch_priority() { return priority_now; }

void raise_shared_limit_outside_capture(const void* kernel, size_t bytes) {
  if (bytes <= 48 * 1024) return;
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  IMP_CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&mode));
  const cudaError_t status = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes));
  IMP_CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&mode));
  IMP_CUDA_CHECK(status);
}

int sm_count() {
  static const int sms = [] {
    int device = 0, count = 0;
    IMP_CUDA_CHECK(cudaGetDevice(&device));
    IMP_CUDA_CHECK(cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device));
    return count;
  }();
  return sms;
}

}  // namespace imp::cuda
