#include "text/added_vocabulary.h"

#include <algorithm>

#include "text/unicode.h"

namespace imp::text {

AddedVocabulary::AddedVocabulary(const std::vector<AddedToken>& tokens, std::vector<Pattern> raw_patterns,
                                 std::vector<Pattern> normalized_patterns) {
  for (const Pattern& p : raw_patterns) add(tries_[0], p);
  for (const Pattern& p : normalized_patterns) add(tries_[1], p);
  // The flags of an id are those of its last definition, as `tokenizers` keeps them.
  std::vector<std::pair<int32_t, Flags>> flagged;
  for (const AddedToken& t : tokens) {
    std::erase_if(flagged, [&](const auto& f) { return f.first == t.id; });
    if (t.single_word || t.lstrip || t.rstrip) flagged.push_back({t.id, {t.single_word, t.lstrip, t.rstrip}});
  }
  std::sort(flagged.begin(), flagged.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& [id, f] : flagged) {
    flag_ids_.push_back(id);
    flags_.push_back(f);
  }
}

void AddedVocabulary::add(Trie& trie, const Pattern& pattern) {
  if (pattern.text.empty()) return;
  int32_t node = 0;
  for (char c : pattern.text) {
    const auto byte = static_cast<uint8_t>(c);
    auto& children = trie.nodes[node].children;
    auto it = std::find_if(children.begin(), children.end(), [&](const auto& ch) { return ch.first == byte; });
    if (it != children.end()) {
      node = it->second;
    } else {
      const auto child = static_cast<int32_t>(trie.nodes.size());
      children.push_back({byte, child});
      trie.nodes.emplace_back();
      node = child;
    }
  }
  trie.first_byte[static_cast<uint8_t>(pattern.text[0])] = true;
  // With duplicate contents the first pattern wins, as in a leftmost-longest Aho-Corasick automaton.
  if (trie.nodes[node].pattern < 0) {
    trie.nodes[node].pattern = static_cast<int32_t>(trie.ids.size());
    trie.ids.push_back(pattern.id);
  }
}

// Leftmost-longest: the earliest position where any pattern starts, and the longest pattern there.
bool AddedVocabulary::find(const Trie& trie, std::string_view text, size_t from, Match& match) {
  const auto* bytes = reinterpret_cast<const uint8_t*>(text.data());
  for (size_t start = from; start < text.size(); ++start) {
    if (!trie.first_byte[bytes[start]]) continue;
    int32_t node = 0;
    int32_t found = -1;
    size_t found_end = 0;
    for (size_t i = start; i < text.size(); ++i) {
      const auto& children = trie.nodes[node].children;
      auto it = std::find_if(children.begin(), children.end(), [&](const auto& ch) { return ch.first == bytes[i]; });
      if (it == children.end()) break;
      node = it->second;
      if (trie.nodes[node].pattern >= 0) {
        found = trie.nodes[node].pattern;
        found_end = i + 1;
      }
    }
    if (found >= 0) {
      match = {start, found_end, trie.ids[found]};
      return true;
    }
  }
  return false;
}

const AddedVocabulary::Flags& AddedVocabulary::flags(int32_t id) const {
  static const Flags kNone;
  auto it = std::lower_bound(flag_ids_.begin(), flag_ids_.end(), id);
  return it != flag_ids_.end() && *it == id ? flags_[it - flag_ids_.begin()] : kNone;
}

void AddedVocabulary::split(std::string_view text, bool normalized_pass, std::vector<Split>& out) const {
  const Trie& trie = tries_[normalized_pass];
  size_t start_offset = 0;
  size_t search_from = 0;
  Match match;
  while (search_from < text.size() && find(trie, text, search_from, match)) {
    // The search resumes after the match as found, whatever the flags below make of it.
    search_from = match.end;
    size_t start = match.begin;
    size_t stop = match.end;
    const Flags& f = flags(match.id);
    if (f.single_word) {
      const bool word_before = start > 0 && unicode::kWord.contains(unicode::decode_before(text, start));
      size_t after = stop;
      const bool word_after = stop < text.size() && unicode::kWord.contains(unicode::decode_at(text, after));
      if (word_before || word_after) continue;
    }
    if (f.lstrip) {
      size_t new_start = start;
      while (new_start > 0) {
        size_t before = new_start - 1;
        while (before > 0 && (static_cast<uint8_t>(text[before]) & 0xC0) == 0x80) --before;
        size_t at = before;
        if (!unicode::kSpace.contains(unicode::decode_at(text, at))) break;
        new_start = before;
      }
      start = std::max(new_start, start_offset);
    }
    if (f.rstrip) {
      while (stop < text.size()) {
        size_t next = stop;
        if (!unicode::kSpace.contains(unicode::decode_at(text, next))) break;
        stop = next;
      }
    }
    if (start_offset < start) out.push_back({start_offset, start, -1});
    out.push_back({start, stop, match.id});
    start_offset = stop;
  }
  if (start_offset != text.size()) out.push_back({start_offset, text.size(), -1});
}

}  // namespace imp::text
