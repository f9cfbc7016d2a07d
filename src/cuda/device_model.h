// The model's weights on the GPU, laid out for the decode step: dense weights as BF16 (projections that
// read the same input are stacked into one matrix so one GEMV serves them), routed experts in a slot pool
// per layer (src/model/expert_slot.h; NVFP4 slots, or BF16 slots for checkpoints without NVFP4), the PLE
// n-gram table in mapped pinned host memory (48 GiB in the released model: rows are gathered, not copied).
// Built from a checkpoint's bound weights, or filled with random values of realistic magnitude for
// full-scale benchmarks without a checkpoint (dummy weights).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "cuda/kernels/gated_delta_net.h"
#include "cuda/kernels/gemm_bf16_split.h"
#include "cuda/kernels/ngram_hash.h"
#include "cuda/kernels/ple.h"
#include "cuda/memory/device_buffer.h"
#include "model/config.h"
#include "model/expert_slot.h"
#include "model/ngram_hash.h"
#include "model/weights.h"

namespace imp::cuda {

// An E4M3 copy of rows [first, end) of a DenseWeight for prefill's FP8 low term (codes.data: row `first`), or empty.
struct Fp8Copy {
  Fp8Rows codes;
  int32_t first = 0, end = 0;
};

// An fp16 copy of rows [first, end) of a DenseWeight, scaled by a power of two (rows.data: row `first`), or empty.
struct F16Copy {
  F16Rows rows;
  int32_t first = 0, end = 0;
};

// A BF16 matrix [rows, cols] (or a vector: rows = 1) in device memory.
struct DenseWeight {
  const uint16_t* data = nullptr;
  int32_t rows = 0;
  int32_t cols = 0;
  Fp8Copy low8;  // DeviceModel::build_low_term_weights
  F16Copy half;  // the same
};

struct HyperConnectionDevice {
  DenseWeight norm;         // [S*d]
  DenseWeight down_inject;  // [rank (+ S), S*d]: input_mix_weight_down, then block_inject_weight when present
  // input_mix_weight_up [S*d, rank] where prefill's fused up projection + mix takes the shape (hc_up_mix_fits: the
  // released one); otherwise [S*d, 2 rank], each row twice, so prefill's split input [hi | lo] of width 2 rank is
  // one GEMM (two, the second adding into the fp32 output, cost 68 + 136 us at 4096 tokens). Decode and the fused
  // kernel read the first rank of each row (rows up.cols apart).
  DenseWeight up;
  bool has_inject = false;
  // The power of two prefill's fp16 copy of this read's x is scaled by: |x_j| <= sqrt(d) max |1 + norm| (x is a
  // convex mix of the streams' normed values, each at most sqrt(d) |1 + w| for the RMS over d), and this scale
  // maps that bound to at most 2^15, so no value overflows fp16 (DeviceModel::build_low_term_weights). 0: no fp16
  // copy reads this read's x.
  float x16_scale = 0.0f;
};

struct GatedDeltaNetDevice {
  DenseWeight in_proj;   // [conv_dim + value_dim + 2 value_heads, d]: qkv, z, b, a
  DenseWeight out_proj;  // [d, value_dim]
  GatedDeltaNetWeightsDevice small;
  // The power of two prefill's fp16 copy of the output projection's input (the gated norm's output) is scaled by,
  // from |core| <= sqrt(head dim) max |norm| max(|silu(z)|), |z_i| <= |W_z row i|_1 * (the read's bound on |x|);
  // 0 without that copy (DeviceModel::build_low_term_weights).
  float core16_scale = 0.0f;
};

struct AttentionDevice {
  // [heads*2*hd + 2*kv_width (+ (indexer heads + 1) * indexer dim), d]: q (query|gate per head), k, v,
  // then the indexer's qk projection when QSA is configured.
  DenseWeight in_proj;
  DenseWeight o_proj;
  DenseWeight q_norm, k_norm;                  // [hd]
  DenseWeight index_q_norm, index_k_norm;      // [indexer dim]; empty without QSA
  // The same for the output projection's input: sigmoid(gate) times a convex mix of value rows, so |core| <=
  // max_i |W_v row i|_1 * (the read's bound on |x|).
  float core16_scale = 0.0f;
};

struct MoeDevice {
  DenseWeight in_proj;      // [E + 2 I_shared + 1, d]: router, shared gate, shared up, shared_expert_gate
  DenseWeight shared_down;  // [d, I_shared]
  DeviceBuffer<uint8_t> pool;               // one slot per expert (everything resident)
  DeviceBuffer<model::SlotScales> scales;   // per-slot weight_scale_2 mirror
};

struct PleDevice {
  DenseWeight key_value;  // [S*d + d, e]: key_proj, then value_proj
  DenseWeight norm_key, norm_query, norm_conv;  // [S*d]
  DenseWeight conv1d;     // [S*d, kernel]
  PleTableDevice table;
  NgramHashDevice hash;
};

struct LayerDevice {
  model::LayerType type = model::LayerType::kLinearAttention;
  HyperConnectionDevice attn_hc, mlp_hc;
  std::optional<GatedDeltaNetDevice> gdn;
  std::optional<AttentionDevice> attention;
  MoeDevice moe;
  std::optional<PleDevice> ple;
};

class DeviceModel {
 public:
  // Uploads a checkpoint's bound weights (throws imp::Error on a shape the kernels cannot take).
  static std::unique_ptr<DeviceModel> upload(const model::ModelConfig& config, const model::ModelWeights& weights);
  // Random weights of the config's shapes; the PLE table is `ple_table_bytes` (smaller than the hash range:
  // row ids wrap), FP8.
  static std::unique_ptr<DeviceModel> dummy(const model::ModelConfig& config, uint64_t seed, size_t ple_table_bytes);

  ~DeviceModel();
  DeviceModel(const DeviceModel&) = delete;
  DeviceModel& operator=(const DeviceModel&) = delete;

  const model::ModelConfig& config() const { return config_; }
  const model::ExpertSlotLayout& slot_layout() const { return slot_layout_; }
  const std::vector<LayerDevice>& layers() const { return layers_; }
  const DenseWeight& embed_tokens() const { return embed_tokens_; }
  const DenseWeight& lm_head() const { return lm_head_; }
  const HyperConnectionDevice& mixer() const { return mixer_; }
  const float* inv_freq() const { return inv_freq_.data(); }
  // Bytes of device weights read by one decode token (dense + top-k experts + PLE rows), for the roofline.
  uint64_t decode_bytes_per_token() const;
  uint64_t device_bytes() const { return device_bytes_; }

  // Prefill's cheaper copies of the GEMM weights whose products need not be fp32-grade (launch_gemm_bf16_split):
  // - fp16 copies (one power-of-two scale per copy) of the rows whose input has a bound from the weights
  //   (HyperConnectionDevice::x16_scale, GatedDeltaNetDevice::core16_scale, AttentionDevice::core16_scale): the GDN
  //   value and gate rows, the attention query/key/value rows, the shared expert's gate | up rows, the GDN and
  //   attention output projections. Those GEMMs run as one fp16 term (x to ~2^-12) instead of two.
  // - E4M3 copies (one scale per row) of the GDN query and key rows (with fp16 inputs they moved ple_qsa to 0.024
  //   of HF in the CPU emulation) and the shared expert's down projection (its input, silu(gate) * up, has no
  //   useful bound): the low term of their split-bf16 GEMMs runs in FP8, ~2^-12 of the product instead of ~2^-16.
  // Not the rows whose outputs feed a top-k choice (the router, the QSA indexer): with an FP8 low term, near-tied
  // choices flipped on 5 of 8 golden fixtures (long_sparse 0.337 of HF). The engine builds them when its memory
  // plan has room; their bytes first.
  uint64_t low_term_weight_bytes() const;
  void build_low_term_weights();
  bool has_low_term_weights() const { return !low8_codes_.empty(); }

 private:
  struct Builder;
  explicit DeviceModel(const model::ModelConfig& config) : config_(config) {}
  // Runs a Builder; running out of memory becomes an error that says the model does not fit, and how far it got.
  void build_or_explain(const std::function<void()>& build);

  model::ModelConfig config_;
  model::ExpertSlotLayout slot_layout_;
  std::vector<LayerDevice> layers_;
  DenseWeight embed_tokens_, lm_head_;
  HyperConnectionDevice mixer_;
  DeviceBuffer<float> inv_freq_;
  std::vector<DeviceBuffer<uint16_t>> dense_storage_;
  std::vector<DeviceBuffer<uint8_t>> low8_codes_;
  std::vector<DeviceBuffer<float>> low8_scales_;
  std::vector<DeviceBuffer<uint16_t>> half_copies_;
  std::vector<void*> pinned_tables_;  // cudaHostAlloc'd PLE tables
  uint64_t device_bytes_ = 0;
};

// The Gated DeltaNet kernels' shape from the config.
GatedDeltaNetShape gdn_shape(const model::ModelConfig& config);

// The device form of a PLE block's n-gram hash constants.
NgramHashDevice to_device(const model::NgramHash& hash);

}  // namespace imp::cuda
