#include "text/normalizer.h"

#include <cstdlib>
#include <vector>

#include <utf8proc.h>

#include "core/error.h"
#include "text/unicode.h"

namespace imp::text {
namespace {

bool is_ascii(char c) { return static_cast<unsigned char>(c) < 0x80; }

// `tokenizers` normalizes with older Unicode data than utf8proc: to it some marks are plain starters
// that decompose and compose with nothing (U+07FD and ~100 more marks added in Unicode 11-15 that have
// a nonzero combining class; U+11935, U+11930 and U+11938, whose composition it lacks). The generated
// table kNfcInert lists the marks it treats so; where utf8proc's data would act on one, the text is
// cut around it, which makes it the barrier it is for `tokenizers`. An exhaustive comparison over all
// code points, decompositions and combining-mark orders guards this (tests/tokenizer).
class CutPoints {
 public:
  CutPoints() : bits_(0x110000) {
    std::vector<bool> component(0x110000);
    utf8proc_int32_t buffer[8];
    for (utf8proc_int32_t c = 0; c < 0x110000; ++c) {
      const utf8proc_property_t* p = utf8proc_get_property(c);
      if (p->decomp_seqindex == UINT16_MAX || p->decomp_type != 0) continue;  // no canonical decomposition
      int last_boundclass = 0;
      const utf8proc_ssize_t n = utf8proc_decompose_char(c, buffer, 8, UTF8PROC_DECOMPOSE, &last_boundclass);
      for (utf8proc_ssize_t i = 0; i < n && i < 8; ++i) component[buffer[i]] = true;
      component[c] = true;
    }
    for (const auto& range : unicode::kNfcInert.ranges()) {
      for (char32_t c = range.first; c <= range.last; ++c) {
        if (component[c] || utf8proc_get_property(static_cast<utf8proc_int32_t>(c))->combining_class != 0) bits_[c] = true;
      }
    }
  }
  bool contains(char32_t c) const { return c < bits_.size() && bits_[c]; }

 private:
  std::vector<bool> bits_;
};

const CutPoints& cut_points() {
  static const CutPoints points;
  return points;
}

void append_utf8proc_nfc(std::string_view text, std::string& out) {
  if (text.empty()) return;
  utf8proc_uint8_t* result = nullptr;
  const utf8proc_ssize_t length =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()), static_cast<utf8proc_ssize_t>(text.size()),
                   &result, static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  if (length < 0) fail("NFC normalization failed: {}", utf8proc_errmsg(length));
  out.append(reinterpret_cast<const char*>(result), static_cast<size_t>(length));
  std::free(result);
}

void append_nfc_region(std::string_view region, std::string& out) {
  const CutPoints& cuts = cut_points();
  size_t start = 0;
  size_t pos = 0;
  while (pos < region.size()) {
    const size_t at = pos;
    if (static_cast<uint8_t>(region[pos]) < 0x80) {
      ++pos;
      continue;
    }
    if (!cuts.contains(unicode::decode_at(region, pos))) continue;
    append_utf8proc_nfc(region.substr(start, at - start), out);
    out.append(region.substr(at, pos - at));
    start = pos;
  }
  append_utf8proc_nfc(region.substr(start), out);
}

}  // namespace

std::string nfc(std::string_view text) {
  std::string out;
  if (!Normalizer(Normalizer::Kind::kNfc).normalize(text, out)) out.assign(text);
  return out;
}

bool Normalizer::normalize(std::string_view text, std::string& out) const {
  if (kind_ == Kind::kNone) return false;
  size_t first = 0;
  while (first < text.size() && is_ascii(text[first])) ++first;
  if (first == text.size()) return false;
  // Only stretches around non-ASCII characters go through utf8proc. A cut between two ASCII
  // characters is safe: ASCII never composes with what precedes it, and composes with what follows
  // only when a combining character follows.
  out.clear();
  out.reserve(text.size() + 16);
  size_t copied = 0;
  size_t next_non_ascii = first;
  while (next_non_ascii < text.size()) {
    const size_t region_start = next_non_ascii > copied ? next_non_ascii - 1 : next_non_ascii;
    out.append(text.substr(copied, region_start - copied));
    size_t end = next_non_ascii + 1;
    while (end < text.size() && !(is_ascii(text[end]) && (end + 1 == text.size() || is_ascii(text[end + 1])))) ++end;
    append_nfc_region(text.substr(region_start, end - region_start), out);
    copied = end;
    next_non_ascii = end;
    while (next_non_ascii < text.size() && is_ascii(text[next_non_ascii])) ++next_non_ascii;
  }
  out.append(text.substr(copied));
  return true;
}

std::string Normalizer::apply(std::string_view text) const {
  std::string out;
  return normalize(text, out) ? out : std::string(text);
}

}  // namespace imp::text
