// The PLE hashed n-gram row ids, exactly as the reference computes them. One implementation for both
// backends: the CUDA backend computes the ids on the host before it launches a step.
//
// For a PLE block with index `ple_index` in ple_layer_ids:
//   multipliers m_i = 2 * (splitmix64(seed + 10007*ple_index + gamma*(i+1)) mod half) + 1, i < ngram_size
//   head h vocabulary P_h = the (ple_index*heads + h + 1)-th prime > ngram_vocab_size_base - 1, offsets O_h
//   shifted ids never cross an EOS; key of an n-gram = XOR of shifted_id * m; row = (key mod P_h) + O_h.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "model/config.h"

namespace imp::model {

class NgramHash {
 public:
  NgramHash(const ModelConfig& config, int ple_index);

  int64_t context_len() const { return ngram_size_ - 1; }
  int64_t heads() const { return static_cast<int64_t>(vocab_sizes_.size()); }
  int64_t eos() const { return eos_; }
  int64_t total_rows() const { return total_rows_; }
  int64_t padded_rows() const { return padded_rows_; }
  const std::vector<int64_t>& multipliers() const { return multipliers_; }
  const std::vector<int64_t>& vocab_sizes() const { return vocab_sizes_; }
  const std::vector<int64_t>& offsets() const { return offsets_; }

  // The context a sequence starts with: context_len() EOS ids.
  std::vector<int64_t> initial_context() const;

  // Row ids of the new tokens, out[t * heads() + h], given the raw last context_len() ids of the sequence.
  // Then replaces `context` with the last context_len() ids of context ++ tokens.
  void row_ids(std::vector<int64_t>& context, std::span<const int32_t> tokens, std::span<int64_t> out) const;

 private:
  int64_t eos_;
  int64_t ngram_size_;
  int64_t heads_per_ngram_;
  std::vector<int64_t> multipliers_;
  std::vector<int64_t> vocab_sizes_;
  std::vector<int64_t> offsets_;
  int64_t total_rows_ = 0;
  int64_t padded_rows_ = 0;
};

uint64_t splitmix64(uint64_t value);

}  // namespace imp::model
