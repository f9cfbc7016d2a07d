// The GPU PLE decode step (host n-gram hash, table gather, projections and norms by the dense kernels,
// gate, dilated conv step) against cpu::ple_block for several tokens from a random conv state, with an
// FP8 table (bf16(fp8 * scale) rows) at the released shapes and a BF16 table at small shapes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "cpu/blocks.h"
#include "cuda/kernels/dense.h"
#include "cuda/device_model.h"
#include "cuda/kernels/ngram_hash.h"
#include "cuda/kernels/ple.h"
#include "cuda/memory/device_buffer.h"
#include "gpu_test_util.h"
#include "model/ngram_hash.h"

namespace imp::cuda {
namespace {

using namespace testing_support;

template <typename T>
struct HostTensor {
  std::vector<T> data;
  model::TensorInfo info;
  DeviceBuffer<T> device;
  HostTensor(std::vector<T> values, DType dtype, std::vector<int64_t> shape) : data(std::move(values)) {
    info.name = "w";
    info.dtype = dtype;
    info.shape = std::move(shape);
    info.data = reinterpret_cast<const uint8_t*>(data.data());
    info.nbytes = data.size() * sizeof(T);
    device = DeviceBuffer<T>(data);
  }
};

HostTensor<uint16_t> bf16_weight(std::vector<int64_t> shape, float scale, float offset = 0.0f) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  std::normal_distribution<float> dist(offset, scale);
  std::vector<uint16_t> bits;
  for (int64_t i = 0; i < n; ++i) bits.push_back(f32_to_bf16(dist(rng())));
  return HostTensor<uint16_t>(std::move(bits), DType::kBF16, std::move(shape));
}

void run_case(int d, int streams, int embed, int ngram, int heads_per_ngram, bool fp8_table) {
  model::ModelConfig config;
  config.vocab_size = 512;
  config.hidden_size = d;
  config.hc_count = streams;
  config.ple_layer_ids = {2};
  config.ple_embed_dim = embed;
  config.ngram_size = ngram;
  config.heads_per_ngram = heads_per_ngram;
  config.ngram_vocab_size_base = 1000;
  config.make_ngram_vocab_size_divisible_by = 128;
  config.eos_token_ids = {1};
  const int width = streams * d, heads = static_cast<int>(config.ngram_heads()), head_dim = embed / heads;
  auto hash = std::make_shared<model::NgramHash>(config, 0);
  const int64_t rows_total = hash->padded_rows();

  std::uniform_int_distribution<int> byte(0, 0x7e);
  std::vector<uint8_t> fp8(static_cast<size_t>(rows_total * head_dim));
  for (auto& b : fp8) b = static_cast<uint8_t>(byte(rng()) | (byte(rng()) & 1 ? 0x80 : 0));
  HostTensor<uint8_t> table_fp8(fp8, DType::kF8E4M3, {rows_total, head_dim});
  auto table_bf16 = bf16_weight({rows_total, head_dim}, 0.5f);
  auto key_proj = bf16_weight({width, embed}, 0.05f), value_proj = bf16_weight({d, embed}, 0.05f);
  auto norm_key = bf16_weight({width}, 0.1f), norm_query = bf16_weight({width}, 0.1f), norm_conv = bf16_weight({width}, 0.1f);
  auto conv = bf16_weight({width, 1, 4}, 0.3f);
  model::PleWeights w{&key_proj.info, &value_proj.info, &norm_key.info, &norm_query.info, &norm_conv.info, &conv.info,
                      {fp8_table ? &table_fp8.info : &table_bf16.info}, rows_total, fp8_table ? 2.0e-3f : 1.0f, hash};

  std::normal_distribution<float> dist(0.0f, 1.0f);
  cpu::PleState state;
  state.context = hash->initial_context();
  state.conv.resize(static_cast<size_t>(config.ple_conv_state_rows()) * width);
  for (float& v : state.conv) v = dist(rng());
  DeviceBuffer<float> d_state(state.conv);

  PleTableDevice table{fp8_table ? table_fp8.device.data() : reinterpret_cast<const uint8_t*>(table_bf16.device.data()),
                       fp8_table, w.table_scale, head_dim, rows_total};
  // Row ids come from the device hash step, checked against the host hash every step.
  const NgramHashDevice device_hash = to_device(*hash);
  DeviceBuffer<int64_t> d_context(state.context);
  DeviceBuffer<int32_t> d_token(1);
  DeviceBuffer<float> d_emb(static_cast<size_t>(embed)), d_key(static_cast<size_t>(width)), d_query(static_cast<size_t>(width)),
      d_value(static_cast<size_t>(d)), d_gated(static_cast<size_t>(width)), d_normed(static_cast<size_t>(width)),
      d_stream(static_cast<size_t>(width));
  DeviceBuffer<int64_t> d_ids(static_cast<size_t>(heads));
  std::vector<int64_t> gpu_context = state.context;
  std::uniform_int_distribution<int> token(0, 20);  // small ids: EOS (1) comes up often
  for (int step = 0; step < 12; ++step) {
    std::vector<float> stream(static_cast<size_t>(width));
    for (float& v : stream) v = dist(rng());
    const int32_t tok[1] = {token(rng())};

    std::vector<int64_t> ids(static_cast<size_t>(heads));
    hash->row_ids(gpu_context, tok, ids);
    d_token.upload(std::span<const int32_t>(tok, 1));
    launch_ngram_ids(device_hash, d_token.data(), 1, d_context.data(), d_ids.data(), nullptr);
    ASSERT_EQ(d_ids.download(), ids) << "step " << step;
    ASSERT_EQ(d_context.download(), gpu_context) << "step " << step;
    d_stream.upload(stream);
    launch_ple_gather(table, d_ids.data(), 1, heads, d_emb.data(), nullptr);
    launch_gemv_bf16(key_proj.device.data(), d_emb.data(), 1, width, embed, d_key.data(), nullptr);
    launch_rms_norm(d_key.data(), norm_key.device.data(), 1, width, d, 1e-6f, d_key.data(), nullptr);
    launch_gemv_bf16(value_proj.device.data(), d_emb.data(), 1, d, embed, d_value.data(), nullptr);
    launch_rms_norm(d_stream.data(), norm_query.device.data(), 1, width, d, 1e-6f, d_query.data(), nullptr);
    launch_ple_gate(d_key.data(), d_query.data(), d_value.data(), 1, streams, d, d_gated.data(), nullptr);
    launch_rms_norm(d_gated.data(), norm_conv.device.data(), 1, width, d, 1e-6f, d_normed.data(), nullptr);
    launch_ple_conv_step(d_gated.data(), d_normed.data(), conv.device.data(), 4, ngram, d_state.data(), 1, width,
                         d_stream.data(), nullptr);

    std::vector<float> out(static_cast<size_t>(width));
    cpu::ple_block(config, w, stream.data(), tok, state, out.data());
    for (size_t i = 0; i < stream.size(); ++i) stream[i] += out[i];
    // fp32 both sides, sums in other orders: 1e-5 of the scale.
    EXPECT_LE(max_rel_diff(d_stream.download(), stream), 1e-5) << "step " << step;
    EXPECT_LE(max_rel_diff(d_state.download(), state.conv), 1e-5) << "step " << step;
  }
  EXPECT_EQ(gpu_context, state.context);
}

// The table gather for many rows at once (prefill), against the host decode of each row: FP8 rows of 160 bytes in
// mapped host memory, as the engine keeps them, BF16 rows of 32 and 24 bytes; ids beyond the table wrap. Exact: both sides round e4m3 * scale once to bf16.
void check_gather(bool fp8, int head_dim, int rows, int heads, int64_t table_rows) {
  const int element = fp8 ? 1 : 2;
  const size_t bytes = static_cast<size_t>(table_rows) * head_dim * element;
  void* host = nullptr;
  IMP_CUDA_CHECK(cudaHostAlloc(&host, bytes, cudaHostAllocMapped));
  auto* table_bytes = static_cast<uint8_t*>(host);
  std::uniform_int_distribution<int> byte(0, 255);
  for (size_t i = 0; i < bytes; ++i) {
    table_bytes[i] = static_cast<uint8_t>(byte(rng()));
    if (fp8 && (table_bytes[i] & 0x7f) == 0x7f) table_bytes[i] = 0x7e;  // no NaN codes
    if (!fp8 && i % 2 == 1 && (table_bytes[i] & 0x7f) >= 0x7f) table_bytes[i] = 0x40;  // no inf or NaN bf16
  }
  void* mapped = nullptr;
  IMP_CUDA_CHECK(cudaHostGetDevicePointer(&mapped, host, 0));
  const float scale = 1.9931793212890625e-4f;
  const PleTableDevice table{static_cast<const uint8_t*>(mapped), fp8, fp8 ? scale : 1.0f, head_dim, table_rows};
  std::vector<int64_t> ids(static_cast<size_t>(rows) * heads);
  std::uniform_int_distribution<int64_t> id(0, 3 * table_rows);
  for (int64_t& v : ids) v = id(rng());
  DeviceBuffer<int64_t> d_ids(ids);
  DeviceBuffer<float> d_emb(ids.size() * static_cast<size_t>(head_dim));
  launch_ple_gather(table, d_ids.data(), rows, heads, d_emb.data(), nullptr);
  IMP_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<float> want(ids.size() * static_cast<size_t>(head_dim));
  for (size_t item = 0; item < ids.size(); ++item) {
    const uint8_t* row = table_bytes + static_cast<size_t>(ids[item] % table_rows) * head_dim * element;
    for (int i = 0; i < head_dim; ++i) {
      want[item * static_cast<size_t>(head_dim) + static_cast<size_t>(i)] =
          fp8 ? bf16_to_f32(f32_to_bf16(e4m3_to_f32(row[i]) * scale))
              : bf16_to_f32(static_cast<uint16_t>(row[2 * i] | (row[2 * i + 1] << 8)));
    }
  }
  EXPECT_TRUE(d_emb.download() == want) << (fp8 ? "fp8" : "bf16") << " rows of " << head_dim;
  IMP_CUDA_CHECK(cudaFreeHost(host));
}

TEST(GpuPle, GatherOfManyRowsMatchesTheHostRows) {
  check_gather(true, 160, 37, 16, 1000);  // released: 160-byte FP8 rows
  check_gather(false, 16, 5, 3, 50);
  check_gather(false, 12, 9, 4, 50);
  check_gather(true, 12, 9, 4, 50);
}

TEST(GpuPle, DecodeStepMatchesCpuAtReleasedShapesWithFp8Table) { run_case(2560, 4, 2560, 3, 8, true); }
TEST(GpuPle, DecodeStepMatchesCpuAtSmallShapesWithBf16Table) { run_case(48, 2, 48, 4, 4, false); }

}  // namespace
}  // namespace imp::cuda
