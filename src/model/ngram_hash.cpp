#include "model/ngram_hash.h"

#include <algorithm>
#include <limits>

#include "core/error.h"

namespace imp::model {
namespace {

constexpr uint64_t kGamma = 0x9E3779B97F4A7C15ull;
constexpr int64_t kLayerSeedPrime = 10007;

bool is_prime(int64_t value) {
  if (value < 2) return false;
  if (value % 2 == 0) return value == 2;
  for (int64_t divisor = 3; divisor * divisor <= value; divisor += 2) {
    if (value % divisor == 0) return false;
  }
  return true;
}

int64_t next_prime_after(int64_t value) {
  do {
    ++value;
  } while (!is_prime(value));
  return value;
}

// Floored modulo, as torch.remainder.
int64_t floor_mod(int64_t a, int64_t m) {
  const int64_t r = a % m;
  return (r != 0 && ((r < 0) != (m < 0))) ? r + m : r;
}

}  // namespace

uint64_t splitmix64(uint64_t value) {
  value += kGamma;
  value = (value ^ (value >> 30)) * 0xBF58476D1CE4E5B9ull;
  value = (value ^ (value >> 27)) * 0x94D049BB133111EBull;
  return value ^ (value >> 31);
}

NgramHash::NgramHash(const ModelConfig& config, int ple_index)
    : eos_(config.ple_eos()), ngram_size_(config.ngram_size), heads_per_ngram_(config.heads_per_ngram) {
  if (eos_ < 0) fail("PLE needs eos_token_id in config.json");
  // Multipliers: odd numbers below half of max_int64 / vocab so every product fits in int64.
  const int64_t multiplier_max = std::numeric_limits<int64_t>::max() / std::max<int64_t>(config.vocab_size, 1);
  const uint64_t half = static_cast<uint64_t>(std::max<int64_t>(1, multiplier_max / 2));
  const uint64_t base_seed = static_cast<uint64_t>(config.seed) + static_cast<uint64_t>(kLayerSeedPrime * ple_index);
  for (int64_t i = 0; i < ngram_size_; ++i) {
    const uint64_t value = base_seed + kGamma * static_cast<uint64_t>(i + 1);
    multipliers_.push_back(static_cast<int64_t>(2 * (splitmix64(value) % half) + 1));
  }
  // Head vocabularies: consecutive primes above the base; PLE block k takes the k-th run of `heads` primes.
  const int64_t heads = config.ngram_heads();
  int64_t prime = config.ngram_vocab_size_base - 1;
  for (int64_t skip = 0; skip < static_cast<int64_t>(ple_index) * heads; ++skip) prime = next_prime_after(prime);
  for (int64_t h = 0; h < heads; ++h) {
    prime = next_prime_after(prime);
    vocab_sizes_.push_back(prime);
    offsets_.push_back(total_rows_);
    total_rows_ += prime;
  }
  const int64_t divisor = config.make_ngram_vocab_size_divisible_by;
  padded_rows_ = (total_rows_ + divisor - 1) / divisor * divisor;
}

std::vector<int64_t> NgramHash::initial_context() const { return std::vector<int64_t>(context_len(), eos_); }

void NgramHash::row_ids(std::vector<int64_t>& context, std::span<const int32_t> tokens,
                        std::span<int64_t> out) const {
  const int64_t ctx = context_len();
  const int64_t count = static_cast<int64_t>(tokens.size());
  if (static_cast<int64_t>(context.size()) != ctx) fail("n-gram context holds {} ids, expected {}", context.size(), ctx);
  if (static_cast<int64_t>(out.size()) != count * heads()) fail("n-gram row id buffer has the wrong size");

  std::vector<int64_t> history(context);
  history.insert(history.end(), tokens.begin(), tokens.end());
  // Distance from each position back to the nearest earlier EOS (exclusive); a shift s is valid only
  // if it does not reach past it, so an n-gram never spans a document boundary.
  std::vector<int64_t> segment_start(history.size());
  int64_t last_eos = -1;
  for (size_t n = 0; n < history.size(); ++n) {
    segment_start[n] = last_eos + 1;
    if (history[n] == eos_) last_eos = static_cast<int64_t>(n);
  }

  std::vector<int64_t> shifted(static_cast<size_t>(ngram_size_));
  for (int64_t t = 0; t < count; ++t) {
    const int64_t n = ctx + t;
    for (int64_t s = 0; s < ngram_size_; ++s) {
      const bool valid = n - s >= 0 && n - segment_start[static_cast<size_t>(n)] >= s;
      shifted[static_cast<size_t>(s)] = valid ? history[static_cast<size_t>(n - s)] : eos_;
    }
    // Products stay below 2^63 by construction; unsigned arithmetic gives the same bits as torch's int64.
    uint64_t key = static_cast<uint64_t>(shifted[0]) * static_cast<uint64_t>(multipliers_[0]);
    for (int64_t order = 2; order <= ngram_size_; ++order) {
      key ^= static_cast<uint64_t>(shifted[static_cast<size_t>(order - 1)]) *
             static_cast<uint64_t>(multipliers_[static_cast<size_t>(order - 1)]);
      for (int64_t j = 0; j < heads_per_ngram_; ++j) {
        const int64_t h = (order - 2) * heads_per_ngram_ + j;
        out[static_cast<size_t>(t * heads() + h)] =
            floor_mod(static_cast<int64_t>(key), vocab_sizes_[static_cast<size_t>(h)]) + offsets_[static_cast<size_t>(h)];
      }
    }
  }
  context.assign(history.end() - ctx, history.end());
}

}  // namespace imp::model
