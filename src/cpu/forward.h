// The CPU reference model: the whole qwen4_exp text model in fp32, top to bottom in forward().
#pragma once

#include <filesystem>
#include <memory>
#include <span>
#include <vector>

#include "cpu/ops.h"
#include "cpu/state.h"
#include "model/checkpoint.h"
#include "model/config.h"
#include "model/weights.h"

namespace imp::cpu {

class Model {
 public:
  // Opens, validates and binds a model folder (throws imp::Error).
  explicit Model(const std::filesystem::path& model_dir);

  const model::ModelConfig& config() const { return config_; }
  const model::Checkpoint& checkpoint() const { return checkpoint_; }
  const model::ModelWeights& weights() const { return weights_; }

  SequenceState new_state() const { return new_sequence_state(config_); }

  // Appends `tokens` to the sequence and returns logits: one row per token when all_rows, else the last row.
  // decode_path: for T = 1 with existing state, the Gated DeltaNet uses the token-by-token recurrence
  // (as the reference does); otherwise its chunked form.
  std::vector<float> forward(SequenceState& state, std::span<const int32_t> tokens, bool all_rows) const;

 private:
  model::ModelConfig config_;
  model::Checkpoint checkpoint_;
  model::ModelWeights weights_;
  Rope rope_;
};

}  // namespace imp::cpu
