// The byte-level BPE model: a pre-token's bytes start as one symbol each and the adjacent pair with
// the lowest merge rank (leftmost on ties) is merged until no pair has a rank. That order is exactly
// `tokenizers`' priority queue over (rank, position). Results are cached per pre-token.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace imp::text {

class BpeModel {
 public:
  struct Entry {
    std::string bytes;  // the token's raw bytes
    int32_t id;
  };
  struct MergeRule {
    std::string left;   // raw bytes
    std::string right;  // raw bytes
    bool applicable = true;  // false: names tokens no byte-level piece can hold; only takes a rank
  };

  // `merges` in rank order; a later duplicate of a pair overrides the earlier rank, as in `tokenizers`.
  // Throws imp::Error when a merge names a token missing from the vocabulary.
  BpeModel(std::vector<Entry> vocab, const std::vector<MergeRule>& merges, bool ignore_merges);
  ~BpeModel();
  BpeModel(BpeModel&&) noexcept;
  BpeModel& operator=(BpeModel&&) noexcept;

  // Appends the ids of one pre-token (raw bytes). Thread-safe.
  void encode(std::string_view piece, std::vector<int32_t>& out) const;
  std::optional<int32_t> id_of(std::string_view bytes) const;
  size_t size() const;  // distinct tokens

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace imp::text
