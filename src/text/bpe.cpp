#include "text/bpe.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <climits>
#include <cstring>
#include <functional>
#include <queue>
#include <unordered_map>

#include "core/error.h"
#include "text/byte_level.h"

namespace imp::text {
namespace {

constexpr int32_t kNoRank = INT32_MAX;
constexpr size_t kShortPiece = 48;  // up to this many symbols the quadratic merge scan is faster

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using StringMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

// Open addressing map from a pair of ids to (rank, merged id): the hot lookup of the merge loop.
class MergeTable {
 public:
  struct Value {
    int32_t rank = kNoRank;
    int32_t id = -1;
  };

  explicit MergeTable(size_t count) {
    size_t capacity = 16;
    while (capacity < count * 2) capacity *= 2;
    slots_.assign(capacity, Slot{kEmpty, {}});
    mask_ = capacity - 1;
  }

  void insert(int32_t left, int32_t right, Value value) {
    const uint64_t key = make_key(left, right);
    for (size_t i = hash(key);; i = (i + 1) & mask_) {
      if (slots_[i].key == kEmpty || slots_[i].key == key) {
        slots_[i] = {key, value};
        return;
      }
    }
  }

  Value find(int32_t left, int32_t right) const {
    const uint64_t key = make_key(left, right);
    for (size_t i = hash(key);; i = (i + 1) & mask_) {
      if (slots_[i].key == key) return slots_[i].value;
      if (slots_[i].key == kEmpty) return {};
    }
  }

 private:
  static constexpr uint64_t kEmpty = UINT64_MAX;  // ids are non-negative, so no pair makes this key
  struct Slot {
    uint64_t key;
    Value value;
  };
  static uint64_t make_key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
  }
  size_t hash(uint64_t key) const { return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> 17) & mask_; }

  std::vector<Slot> slots_;
  size_t mask_ = 0;
};

// Pre-token -> ids, per thread and direct-mapped: no locks, no allocation. Natural text reuses a
// small set of words, so a collision simply overwrites. Short pieces with few ids only.
class PieceCache {
 public:
  static constexpr size_t kMaxKey = 30;
  static constexpr size_t kMaxIds = 7;

  // The calling thread's cache, emptied when it last served another model.
  static PieceCache& for_model(uint64_t model_uid) {
    thread_local PieceCache cache;
    if (cache.owner_ != model_uid) {
      std::fill(cache.slots_.begin(), cache.slots_.end(), Slot{});
      cache.owner_ = model_uid;
    }
    return cache;
  }

  static uint64_t hash(std::string_view piece) {
    uint64_t h = 0x9E3779B97F4A7C15ull ^ piece.size();
    size_t i = 0;
    for (; i + 8 <= piece.size(); i += 8) {
      uint64_t chunk;
      std::memcpy(&chunk, piece.data() + i, 8);
      h = (h ^ chunk) * 0xBF58476D1CE4E5B9ull;
      h ^= h >> 31;
    }
    if (i < piece.size()) {
      uint64_t chunk = 0;
      std::memcpy(&chunk, piece.data() + i, piece.size() - i);
      h = (h ^ chunk) * 0xBF58476D1CE4E5B9ull;
      h ^= h >> 31;
    }
    return h | 1;  // 0 marks an empty slot
  }

  bool lookup(std::string_view piece, uint64_t tag, std::vector<int32_t>& out) const {
    const Slot& slot = slots_[tag & (kSlots - 1)];
    if (slot.tag != tag || slot.key_length != piece.size() || std::memcmp(slot.key, piece.data(), piece.size()) != 0) {
      return false;
    }
    out.insert(out.end(), slot.ids, slot.ids + slot.count);
    return true;
  }

  void store(std::string_view piece, uint64_t tag, const int32_t* ids, size_t count) {
    if (count > kMaxIds) return;
    Slot& slot = slots_[tag & (kSlots - 1)];
    slot.tag = tag;
    slot.key_length = static_cast<uint8_t>(piece.size());
    slot.count = static_cast<uint8_t>(count);
    std::memcpy(slot.key, piece.data(), piece.size());
    std::copy(ids, ids + count, slot.ids);
  }

 private:
  static constexpr size_t kSlots = 32768;  // 2.4 MB a thread
  struct Slot {
    uint64_t tag = 0;
    uint8_t key_length = 0;
    uint8_t count = 0;
    char key[kMaxKey] = {};
    int32_t ids[kMaxIds] = {};
  };
  PieceCache() : slots_(kSlots) {}
  std::vector<Slot> slots_;
  uint64_t owner_ = 0;
};

std::atomic<uint64_t> next_model_uid{1};

}  // namespace

struct BpeModel::Impl {
  StringMap vocab;                   // raw bytes -> id
  std::array<int32_t, 256> byte_id;  // -1: the byte has no token and is dropped, as in `tokenizers`
  MergeTable merges{0};
  bool ignore_merges = false;
  uint64_t uid = next_model_uid.fetch_add(1);

  void merge_short(std::vector<int32_t>& symbols, std::vector<int32_t>& out) const;
  void merge_long(std::vector<int32_t>& symbols, std::vector<int32_t>& out) const;
};

BpeModel::BpeModel(std::vector<Entry> vocab, const std::vector<MergeRule>& merges, bool ignore_merges)
    : impl_(std::make_unique<Impl>()) {
  impl_->ignore_merges = ignore_merges;
  impl_->vocab.reserve(vocab.size());
  for (Entry& entry : vocab) impl_->vocab.insert_or_assign(std::move(entry.bytes), entry.id);
  for (int b = 0; b < 256; ++b) {
    auto it = impl_->vocab.find(std::string_view(reinterpret_cast<const char*>(&b), 1));
    impl_->byte_id[b] = it == impl_->vocab.end() ? -1 : it->second;
  }
  impl_->merges = MergeTable(merges.size());
  std::string joined;
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const MergeRule& rule = merges[rank];
    if (!rule.applicable) continue;
    auto left = impl_->vocab.find(rule.left);
    auto right = impl_->vocab.find(rule.right);
    joined = rule.left + rule.right;
    auto merged = impl_->vocab.find(joined);
    if (left == impl_->vocab.end() || right == impl_->vocab.end() || merged == impl_->vocab.end()) {
      const std::string& missing = left == impl_->vocab.end() ? rule.left : right == impl_->vocab.end() ? rule.right : joined;
      fail("tokenizer.json: merge {} '{} {}' uses '{}', which is not in the vocabulary", rank,
           byte_level::bytes_to_chars(rule.left), byte_level::bytes_to_chars(rule.right),
           byte_level::bytes_to_chars(missing));
    }
    impl_->merges.insert(left->second, right->second, {static_cast<int32_t>(rank), merged->second});
  }
}

BpeModel::~BpeModel() = default;
BpeModel::BpeModel(BpeModel&&) noexcept = default;
BpeModel& BpeModel::operator=(BpeModel&&) noexcept = default;

size_t BpeModel::size() const { return impl_->vocab.size(); }

std::optional<int32_t> BpeModel::id_of(std::string_view bytes) const {
  auto it = impl_->vocab.find(bytes);
  if (it == impl_->vocab.end()) return std::nullopt;
  return it->second;
}

// Short pieces (most words): scan for the lowest-rank pair, merge, repeat. Quadratic, but tiny.
void BpeModel::Impl::merge_short(std::vector<int32_t>& symbols, std::vector<int32_t>& out) const {
  size_t n = symbols.size();
  std::array<MergeTable::Value, kShortPiece> pairs;
  for (size_t i = 0; i + 1 < n; ++i) pairs[i] = merges.find(symbols[i], symbols[i + 1]);
  while (n > 1) {
    size_t best = 0;
    for (size_t i = 1; i + 1 < n; ++i) {
      if (pairs[i].rank < pairs[best].rank) best = i;
    }
    if (pairs[best].rank == kNoRank) break;
    symbols[best] = pairs[best].id;
    for (size_t i = best + 1; i + 1 < n; ++i) symbols[i] = symbols[i + 1];
    for (size_t i = best + 1; i + 2 < n; ++i) pairs[i] = pairs[i + 1];
    --n;
    if (best > 0) pairs[best - 1] = merges.find(symbols[best - 1], symbols[best]);
    if (best + 1 < n) pairs[best] = merges.find(symbols[best], symbols[best + 1]);
  }
  out.insert(out.end(), symbols.begin(), symbols.begin() + static_cast<ptrdiff_t>(n));
}

// Long pieces (runs of one character, unspaced scripts): a heap of candidate merges over a linked
// list of symbols, with stale entries skipped, as `tokenizers` does. Same order as merge_short.
void BpeModel::Impl::merge_long(std::vector<int32_t>& symbols, std::vector<int32_t>& out) const {
  const int32_t n = static_cast<int32_t>(symbols.size());
  std::vector<int32_t> prev(n), next(n);
  for (int32_t i = 0; i < n; ++i) {
    prev[i] = i - 1;
    next[i] = i + 1 < n ? i + 1 : -1;
  }
  struct Candidate {
    int32_t rank;
    int32_t pos;
    int32_t id;
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> queue;
  auto push = [&](int32_t pos) {
    if (pos < 0 || next[pos] < 0) return;
    const MergeTable::Value v = merges.find(symbols[pos], symbols[next[pos]]);
    if (v.rank != kNoRank) queue.push({v.rank, pos, v.id});
  };
  for (int32_t i = 0; i + 1 < n; ++i) push(i);
  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    if (symbols[top.pos] < 0 || next[top.pos] < 0) continue;
    const int32_t right = next[top.pos];
    if (merges.find(symbols[top.pos], symbols[right]).id != top.id) continue;  // stale
    symbols[top.pos] = top.id;
    symbols[right] = -1;
    next[top.pos] = next[right];
    if (next[right] >= 0) prev[next[right]] = top.pos;
    push(prev[top.pos]);
    push(top.pos);
  }
  for (int32_t i = 0; i >= 0 && i < n; i = next[i]) out.push_back(symbols[i]);
}

void BpeModel::encode(std::string_view piece, std::vector<int32_t>& out) const {
  if (piece.size() == 1) {
    const int32_t id = impl_->byte_id[static_cast<uint8_t>(piece[0])];
    if (id >= 0) out.push_back(id);
    return;
  }
  if (impl_->ignore_merges) {
    if (auto it = impl_->vocab.find(piece); it != impl_->vocab.end()) {
      out.push_back(it->second);
      return;
    }
  }
  const bool cacheable = piece.size() <= PieceCache::kMaxKey;
  PieceCache* cache = cacheable ? &PieceCache::for_model(impl_->uid) : nullptr;
  const uint64_t tag = cacheable ? PieceCache::hash(piece) : 0;
  if (cacheable && cache->lookup(piece, tag, out)) return;

  thread_local std::vector<int32_t> symbols;
  symbols.clear();
  for (char c : piece) {
    const int32_t id = impl_->byte_id[static_cast<uint8_t>(c)];
    if (id >= 0) symbols.push_back(id);
  }
  const size_t first = out.size();
  if (symbols.size() <= kShortPiece) {
    impl_->merge_short(symbols, out);
  } else {
    impl_->merge_long(symbols, out);
  }
  if (cacheable) cache->store(piece, tag, out.data() + first, out.size() - first);
}

}  // namespace imp::text
