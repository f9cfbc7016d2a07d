// Running out of GPU memory is an error that says how much was asked for and how much is free (not a bare
// "CUDA error: out of memory"), a model that does not fit says so, and both leave the device usable with the
// memory they had placed given back.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "cuda/device_model.h"
#include "cuda/memory/device_buffer.h"
#include "model/config.h"

namespace imp::cuda {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

size_t free_device_bytes(size_t* total = nullptr) {
  size_t free_bytes = 0, total_bytes = 0;
  IMP_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  if (total) *total = total_bytes;
  return free_bytes;
}

void expect_device_usable() {
  const std::vector<float> host(1024, 1.5f);
  DeviceBuffer<float> small(host);
  EXPECT_EQ(small.download(), host);
}

TEST(GpuOutOfMemory, BufferBeyondTheGpuSaysHowMuchWasAskedAndIsFree) {
  size_t total = 0;
  free_device_bytes(&total);
  const size_t too_much = total + (size_t{1} << 30);
  try {
    DeviceBuffer<uint8_t> buffer(too_much);
    FAIL() << "allocating more than the GPU holds succeeded";
  } catch (const OutOfMemory& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("out of GPU memory"), std::string::npos) << message;
    EXPECT_NE(message.find(fmt::format("needs {:.2f} GiB", static_cast<double>(too_much) / kGiB)), std::string::npos)
        << message;
    EXPECT_NE(message.find(fmt::format("of the GPU's {:.2f} GiB", static_cast<double>(total) / kGiB)), std::string::npos)
        << message;
  }
  expect_device_usable();
}

TEST(GpuOutOfMemory, ModelThatDoesNotFitSaysSoAndGivesItsMemoryBack) {
  std::ifstream file("bench/configs/qwen3.8-flash-next.json");
  ASSERT_TRUE(file) << "run from the repository root";
  model::ModelConfig config = model::parse_config(nlohmann::json::parse(file));
  size_t total = 0;
  const size_t before = free_device_bytes(&total);
  // Enough experts that their slots alone take 1.5 times the GPU.
  const model::ExpertSlotLayout layout = model::ExpertSlotLayout::make(
      static_cast<int32_t>(config.hidden_size), static_cast<int32_t>(config.moe_intermediate_size));
  const double per_expert = static_cast<double>(layout.slot_bytes) * static_cast<double>(config.num_hidden_layers);
  config.num_experts = static_cast<int64_t>(1.5 * static_cast<double>(total) / per_expert) + 1;
  try {
    DeviceModel::dummy(config, 1, size_t{64} << 20);
    FAIL() << "a model of " << config.num_experts << " experts per layer fit on the GPU";
  } catch (const OutOfMemory& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("the model does not fit"), std::string::npos) << message;
    EXPECT_NE(message.find("out of GPU memory"), std::string::npos) << message;
  }
  // Tolerance: what the runtime keeps for itself after a large allocation (its own pools), well under 1 GiB.
  EXPECT_GT(static_cast<double>(free_device_bytes()), static_cast<double>(before) - kGiB);
  expect_device_usable();
}

}  // namespace
}  // namespace imp::cuda
