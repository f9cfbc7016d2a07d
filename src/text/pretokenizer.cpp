#include "text/pretokenizer.h"

#include <pcre2.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"
#include "core/log.h"
#include "text/unicode.h"

namespace imp::text {
namespace {

std::string pcre2_message(int code) {
  PCRE2_UCHAR buffer[256];
  pcre2_get_error_message(code, buffer, sizeof buffer);
  return reinterpret_cast<const char*>(buffer);
}

std::string class_items(const std::vector<unicode::CodePointRange>& ranges) {
  std::string out;
  for (const auto& r : ranges) {
    out += r.first == r.last ? fmt::format("\\x{{{:x}}}", static_cast<uint32_t>(r.first))
                             : fmt::format("\\x{{{:x}}}-\\x{{{:x}}}", static_cast<uint32_t>(r.first),
                                           static_cast<uint32_t>(r.last));
  }
  return out;
}

// Class items (for use inside [...]) for the properties translate_pattern rewrites: PCRE2's own
// property plus the code points our table has and PCRE2's (older) table lacks.
struct PropertyItems {
  std::string letter, number, mark, space;
};

std::vector<unicode::CodePointRange> missing_from_pcre2(const char* property, const unicode::CodePointSet& table) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(property), PCRE2_ZERO_TERMINATED,
                                   PCRE2_UTF | PCRE2_UCP | PCRE2_ANCHORED, &error, &offset, nullptr);
  if (code == nullptr) fail("PCRE2 cannot compile {}: {}", property, pcre2_message(error));
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
  pcre2_match_data* data = pcre2_match_data_create_from_pattern(code, nullptr);
  std::vector<unicode::CodePointRange> missing;
  std::string utf8;
  for (const auto& range : table.ranges()) {
    for (char32_t c = range.first; c <= range.last; ++c) {
      utf8.clear();
      unicode::append_utf8(utf8, c);
      if (pcre2_match(code, reinterpret_cast<PCRE2_SPTR>(utf8.data()), utf8.size(), 0, PCRE2_NO_UTF_CHECK, data,
                      nullptr) >= 0) {
        continue;
      }
      if (!missing.empty() && missing.back().last + 1 == c) {
        missing.back().last = c;
      } else {
        missing.push_back({c, c});
      }
    }
  }
  pcre2_match_data_free(data);
  pcre2_code_free(code);
  return missing;
}

const PropertyItems& property_items() {
  static const PropertyItems items = [] {
    char version[32] = {};
    pcre2_config(PCRE2_CONFIG_UNICODE_VERSION, version);
    int major = 0;
    std::from_chars(version, version + sizeof version, major);
    if (major > 16) {
      log::warn("PCRE2 has Unicode {}, newer than the Unicode 16 tables of tokenizers: characters added since "
                "may pre-tokenize differently from Hugging Face",
                version);
    }
    PropertyItems p;
    p.letter = "\\p{L}" + class_items(missing_from_pcre2("\\p{L}", unicode::kLetter));
    p.number = "\\p{N}" + class_items(missing_from_pcre2("\\p{N}", unicode::kNumber));
    p.mark = "\\p{M}" + class_items(missing_from_pcre2("\\p{M}", unicode::kMark));
    p.space = class_items({unicode::kRegexSpace.ranges().begin(), unicode::kRegexSpace.ranges().end()});
    return p;
  }();
  return items;
}

const std::string* general_category(std::string_view name) {
  const PropertyItems& p = property_items();
  if (name == "L" || name == "Letter") return &p.letter;
  if (name == "N" || name == "Number") return &p.number;
  if (name == "M" || name == "Mark" || name == "Combining_Mark") return &p.mark;
  return nullptr;
}

class Translator {
 public:
  explicit Translator(std::string_view pattern) : in_(pattern) {}

  std::string run() {
    while (pos_ < in_.size()) {
      const char c = in_[pos_];
      if (c == '\\') {
        escape();
      } else if (c == '[' && !in_class_) {
        open_class();
      } else if (c == '[' && in_class_) {
        if (in_.substr(pos_, 2) == "[:") unsupported("POSIX bracket expression");
        unsupported("nested character class");
      } else if (c == ']' && in_class_) {
        in_class_ = false;
        out_ += c;
        ++pos_;
      } else if (c == '&' && in_class_ && in_.substr(pos_, 2) == "&&") {
        unsupported("class intersection &&");
      } else {
        out_ += c;
        ++pos_;
      }
    }
    if (in_class_) fail("pre-tokenizer regex: unterminated character class in '{}'", in_);
    return out_;
  }

 private:
  [[noreturn]] void unsupported(std::string_view what) const {
    fail("pre-tokenizer regex: unsupported construct ({}) at offset {} of '{}'", what, pos_, in_);
  }

  void open_class() {
    in_class_ = true;
    out_ += '[';
    ++pos_;
    if (pos_ < in_.size() && in_[pos_] == '^') {
      out_ += '^';
      ++pos_;
    }
    if (pos_ < in_.size() && in_[pos_] == ']') {  // a leading ] is a literal
      out_ += "\\]";
      ++pos_;
    }
  }

  // Emits class items, wrapped in [...] (or [^...]) outside a class.
  void emit_items(const std::string& items, bool negated) {
    if (in_class_) {
      if (negated) unsupported("negated class escape inside a class");
      out_ += items;
    } else {
      out_ += negated ? "[^" : "[";
      out_ += items;
      out_ += ']';
    }
  }

  void escape() {
    if (pos_ + 1 >= in_.size()) fail("pre-tokenizer regex: trailing backslash in '{}'", in_);
    const char e = in_[pos_ + 1];
    switch (e) {
      case 's':
      case 'S':
        emit_items(property_items().space, e == 'S');
        pos_ += 2;
        return;
      case 'p':
      case 'P':
        property(e == 'P');
        return;
      case 'u': {  // Oniguruma's \uHHHH
        const std::string_view hex = in_.substr(pos_ + 2, 4);
        auto is_hex = [](char h) { return std::isxdigit(static_cast<unsigned char>(h)) != 0; };
        if (hex.size() != 4 || !std::all_of(hex.begin(), hex.end(), is_hex)) {
          unsupported("\\u without four hex digits");
        }
        out_ += fmt::format("\\x{{{}}}", hex);
        pos_ += 6;
        return;
      }
      case 'w': case 'W': case 'b': case 'B': case 'h': case 'H': case 'v': case 'V': case 'X': case 'R':
      case 'K': case 'Q': case 'E': case 'N': case 'O': case 'y': case 'Y':
        unsupported(fmt::format("\\{}", e));
      case 'd':
      case 'D':
        warn_unverified(fmt::format("\\{}", e));
        break;
      default:
        break;
    }
    // Any other escape means the same in both engines: copy it (with its braces, as in \x{...}).
    size_t end = pos_ + 2;
    if (end < in_.size() && in_[end] == '{' && (e == 'x' || e == 'o')) {
      end = in_.find('}', end);
      if (end == std::string_view::npos) fail("pre-tokenizer regex: unterminated \\{}{{ in '{}'", e, in_);
      ++end;
    }
    out_.append(in_.substr(pos_, end - pos_));
    pos_ = end;
  }

  void property(bool negated) {
    std::string_view name;
    size_t end;
    if (pos_ + 2 < in_.size() && in_[pos_ + 2] == '{') {
      const size_t close = in_.find('}', pos_ + 3);
      if (close == std::string_view::npos) fail("pre-tokenizer regex: unterminated \\p{{ in '{}'", in_);
      name = in_.substr(pos_ + 3, close - pos_ - 3);
      end = close + 1;
    } else {
      name = in_.substr(pos_ + 2, 1);
      end = pos_ + 3;
    }
    if (!name.empty() && name[0] == '^') {  // \p{^L} is \P{L}
      negated = !negated;
      name.remove_prefix(1);
    }
    if (const std::string* items = general_category(name)) {
      emit_items(*items, negated);
    } else {
      warn_unverified(fmt::format("\\p{{{}}}", name));
      out_ += negated ? "\\P{" : "\\p{";
      out_ += name;
      out_ += '}';
    }
    pos_ = end;
  }

  void warn_unverified(const std::string& what) const {
    log::warn("pre-tokenizer regex: {} uses PCRE2's Unicode tables, which may be older than tokenizers'; "
              "characters added since may split differently",
              what);
  }

  std::string_view in_;
  std::string out_;
  size_t pos_ = 0;
  bool in_class_ = false;
};

}  // namespace

std::string translate_pattern(std::string_view pattern) { return Translator(pattern).run(); }

struct PreTokenizer::Compiled {
  pcre2_code* code = nullptr;
  pcre2_match_context* context = nullptr;
  ~Compiled() {
    pcre2_match_context_free(context);
    pcre2_code_free(code);
  }
};

PreTokenizer::PreTokenizer(std::string_view pattern) {
  if (pattern.empty()) return;
  const std::string translated = translate_pattern(pattern);
  compiled_ = std::make_unique<Compiled>();
  int error = 0;
  PCRE2_SIZE offset = 0;
  // MULTILINE: in Oniguruma's default (Ruby) syntax ^ and $ are line anchors.
  compiled_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated.data()), translated.size(),
                                  PCRE2_UTF | PCRE2_UCP | PCRE2_MULTILINE, &error, &offset, nullptr);
  if (compiled_->code == nullptr) {
    fail("pre-tokenizer regex '{}' does not compile with PCRE2: {} (offset {} of the translated pattern)", pattern,
         pcre2_message(error), offset);
  }
  uint32_t min_length = 0;
  pcre2_pattern_info(compiled_->code, PCRE2_INFO_MINLENGTH, &min_length);
  if (min_length == 0) fail("pre-tokenizer regex '{}' can match the empty string (unsupported)", pattern);
  if (const int rc = pcre2_jit_compile(compiled_->code, PCRE2_JIT_COMPLETE); rc != 0) {
    log::warn("PCRE2 JIT unavailable ({}): the pre-tokenizer regex runs interpreted, slower", pcre2_message(rc));
  }
  // Long runs (megabytes of one character) must not hit PCRE2's default backtracking limits.
  compiled_->context = pcre2_match_context_create(nullptr);
  pcre2_set_match_limit(compiled_->context, UINT32_MAX);
  pcre2_set_depth_limit(compiled_->context, UINT32_MAX);
  pcre2_set_heap_limit(compiled_->context, UINT32_MAX);
}

PreTokenizer::~PreTokenizer() = default;
PreTokenizer::PreTokenizer(PreTokenizer&&) noexcept = default;
PreTokenizer& PreTokenizer::operator=(PreTokenizer&&) noexcept = default;

PreTokenizer::Pieces::Pieces(const PreTokenizer& owner, std::string_view text) : owner_(owner), text_(text) {
  if (owner_.compiled_) match_data_ = pcre2_match_data_create_from_pattern(owner_.compiled_->code, nullptr);
}

PreTokenizer::Pieces::~Pieces() { pcre2_match_data_free(static_cast<pcre2_match_data*>(match_data_)); }

bool PreTokenizer::Pieces::next(std::string_view& piece) {
  if (!owner_.compiled_) {
    if (done_ || text_.empty()) return false;
    done_ = true;
    piece = text_;
    return true;
  }
  if (pending_match_) {
    pending_match_ = false;
    piece = text_.substr(match_start_, match_end_ - match_start_);
    return true;
  }
  while (!done_) {
    auto* data = static_cast<pcre2_match_data*>(match_data_);
    const auto* subject = reinterpret_cast<PCRE2_SPTR>(text_.data());
    int rc = pcre2_jit_match(owner_.compiled_->code, subject, text_.size(), pos_, 0, data, owner_.compiled_->context);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT || rc == PCRE2_ERROR_JIT_BADOPTION) {
      rc = pcre2_match(owner_.compiled_->code, subject, text_.size(), pos_, PCRE2_NO_JIT | PCRE2_NO_UTF_CHECK, data,
                       owner_.compiled_->context);
    }
    if (rc == PCRE2_ERROR_NOMATCH) {
      done_ = true;
      if (gap_start_ == text_.size()) return false;
      piece = text_.substr(gap_start_);
      return true;
    }
    if (rc < 0) fail("pre-tokenizer regex failed: {}", pcre2_message(rc));
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(data);
    match_start_ = ovector[0];
    match_end_ = ovector[1];
    if (match_end_ == match_start_) {  // cannot happen with a positive minimum length; never loop
      if (match_end_ >= text_.size()) {
        done_ = true;
        if (gap_start_ == text_.size()) return false;
        piece = text_.substr(gap_start_);
        return true;
      }
      pos_ = match_end_ + 1;
      while (pos_ < text_.size() && (static_cast<uint8_t>(text_[pos_]) & 0xC0) == 0x80) ++pos_;
      continue;
    }
    pos_ = match_end_;
    const size_t gap_start = gap_start_;
    gap_start_ = match_end_;
    if (match_start_ > gap_start) {
      pending_match_ = true;
      piece = text_.substr(gap_start, match_start_ - gap_start);
      return true;
    }
    piece = text_.substr(match_start_, match_end_ - match_start_);
    if (pos_ >= text_.size()) done_ = true;
    return true;
  }
  return false;
}

}  // namespace imp::text
