#include "text/jinja/unicode.h"

#include <utf8proc.h>

namespace imp::text::jinja::unicode {
namespace {

utf8proc_category_t category(char32_t cp) { return utf8proc_category(static_cast<utf8proc_int32_t>(cp)); }

// Unicode SpecialCasing: characters whose upper (and title) case is several characters,
// generated from Python 3.11's str.upper()/str.title() (Unicode 14).
struct SpecialCase {
  char32_t cp;
  const char* upper;
  const char* title;  // nullptr: the simple titlecase mapping
};
constexpr SpecialCase kSpecialCases[] = {
    {0x00DF, "\x53\x53", "\x53\x73"},
    {0x0149, "\xca\xbc\x4e", "\xca\xbc\x4e"},
    {0x01F0, "\x4a\xcc\x8c", "\x4a\xcc\x8c"},
    {0x0390, "\xce\x99\xcc\x88\xcc\x81", "\xce\x99\xcc\x88\xcc\x81"},
    {0x03B0, "\xce\xa5\xcc\x88\xcc\x81", "\xce\xa5\xcc\x88\xcc\x81"},
    {0x0587, "\xd4\xb5\xd5\x92", "\xd4\xb5\xd6\x82"},
    {0x1E96, "\x48\xcc\xb1", "\x48\xcc\xb1"},
    {0x1E97, "\x54\xcc\x88", "\x54\xcc\x88"},
    {0x1E98, "\x57\xcc\x8a", "\x57\xcc\x8a"},
    {0x1E99, "\x59\xcc\x8a", "\x59\xcc\x8a"},
    {0x1E9A, "\x41\xca\xbe", "\x41\xca\xbe"},
    {0x1F50, "\xce\xa5\xcc\x93", "\xce\xa5\xcc\x93"},
    {0x1F52, "\xce\xa5\xcc\x93\xcc\x80", "\xce\xa5\xcc\x93\xcc\x80"},
    {0x1F54, "\xce\xa5\xcc\x93\xcc\x81", "\xce\xa5\xcc\x93\xcc\x81"},
    {0x1F56, "\xce\xa5\xcc\x93\xcd\x82", "\xce\xa5\xcc\x93\xcd\x82"},
    {0x1F80, "\xe1\xbc\x88\xce\x99", nullptr},
    {0x1F81, "\xe1\xbc\x89\xce\x99", nullptr},
    {0x1F82, "\xe1\xbc\x8a\xce\x99", nullptr},
    {0x1F83, "\xe1\xbc\x8b\xce\x99", nullptr},
    {0x1F84, "\xe1\xbc\x8c\xce\x99", nullptr},
    {0x1F85, "\xe1\xbc\x8d\xce\x99", nullptr},
    {0x1F86, "\xe1\xbc\x8e\xce\x99", nullptr},
    {0x1F87, "\xe1\xbc\x8f\xce\x99", nullptr},
    {0x1F88, "\xe1\xbc\x88\xce\x99", nullptr},
    {0x1F89, "\xe1\xbc\x89\xce\x99", nullptr},
    {0x1F8A, "\xe1\xbc\x8a\xce\x99", nullptr},
    {0x1F8B, "\xe1\xbc\x8b\xce\x99", nullptr},
    {0x1F8C, "\xe1\xbc\x8c\xce\x99", nullptr},
    {0x1F8D, "\xe1\xbc\x8d\xce\x99", nullptr},
    {0x1F8E, "\xe1\xbc\x8e\xce\x99", nullptr},
    {0x1F8F, "\xe1\xbc\x8f\xce\x99", nullptr},
    {0x1F90, "\xe1\xbc\xa8\xce\x99", nullptr},
    {0x1F91, "\xe1\xbc\xa9\xce\x99", nullptr},
    {0x1F92, "\xe1\xbc\xaa\xce\x99", nullptr},
    {0x1F93, "\xe1\xbc\xab\xce\x99", nullptr},
    {0x1F94, "\xe1\xbc\xac\xce\x99", nullptr},
    {0x1F95, "\xe1\xbc\xad\xce\x99", nullptr},
    {0x1F96, "\xe1\xbc\xae\xce\x99", nullptr},
    {0x1F97, "\xe1\xbc\xaf\xce\x99", nullptr},
    {0x1F98, "\xe1\xbc\xa8\xce\x99", nullptr},
    {0x1F99, "\xe1\xbc\xa9\xce\x99", nullptr},
    {0x1F9A, "\xe1\xbc\xaa\xce\x99", nullptr},
    {0x1F9B, "\xe1\xbc\xab\xce\x99", nullptr},
    {0x1F9C, "\xe1\xbc\xac\xce\x99", nullptr},
    {0x1F9D, "\xe1\xbc\xad\xce\x99", nullptr},
    {0x1F9E, "\xe1\xbc\xae\xce\x99", nullptr},
    {0x1F9F, "\xe1\xbc\xaf\xce\x99", nullptr},
    {0x1FA0, "\xe1\xbd\xa8\xce\x99", nullptr},
    {0x1FA1, "\xe1\xbd\xa9\xce\x99", nullptr},
    {0x1FA2, "\xe1\xbd\xaa\xce\x99", nullptr},
    {0x1FA3, "\xe1\xbd\xab\xce\x99", nullptr},
    {0x1FA4, "\xe1\xbd\xac\xce\x99", nullptr},
    {0x1FA5, "\xe1\xbd\xad\xce\x99", nullptr},
    {0x1FA6, "\xe1\xbd\xae\xce\x99", nullptr},
    {0x1FA7, "\xe1\xbd\xaf\xce\x99", nullptr},
    {0x1FA8, "\xe1\xbd\xa8\xce\x99", nullptr},
    {0x1FA9, "\xe1\xbd\xa9\xce\x99", nullptr},
    {0x1FAA, "\xe1\xbd\xaa\xce\x99", nullptr},
    {0x1FAB, "\xe1\xbd\xab\xce\x99", nullptr},
    {0x1FAC, "\xe1\xbd\xac\xce\x99", nullptr},
    {0x1FAD, "\xe1\xbd\xad\xce\x99", nullptr},
    {0x1FAE, "\xe1\xbd\xae\xce\x99", nullptr},
    {0x1FAF, "\xe1\xbd\xaf\xce\x99", nullptr},
    {0x1FB2, "\xe1\xbe\xba\xce\x99", "\xe1\xbe\xba\xcd\x85"},
    {0x1FB3, "\xce\x91\xce\x99", nullptr},
    {0x1FB4, "\xce\x86\xce\x99", "\xce\x86\xcd\x85"},
    {0x1FB6, "\xce\x91\xcd\x82", "\xce\x91\xcd\x82"},
    {0x1FB7, "\xce\x91\xcd\x82\xce\x99", "\xce\x91\xcd\x82\xcd\x85"},
    {0x1FBC, "\xce\x91\xce\x99", nullptr},
    {0x1FC2, "\xe1\xbf\x8a\xce\x99", "\xe1\xbf\x8a\xcd\x85"},
    {0x1FC3, "\xce\x97\xce\x99", nullptr},
    {0x1FC4, "\xce\x89\xce\x99", "\xce\x89\xcd\x85"},
    {0x1FC6, "\xce\x97\xcd\x82", "\xce\x97\xcd\x82"},
    {0x1FC7, "\xce\x97\xcd\x82\xce\x99", "\xce\x97\xcd\x82\xcd\x85"},
    {0x1FCC, "\xce\x97\xce\x99", nullptr},
    {0x1FD2, "\xce\x99\xcc\x88\xcc\x80", "\xce\x99\xcc\x88\xcc\x80"},
    {0x1FD3, "\xce\x99\xcc\x88\xcc\x81", "\xce\x99\xcc\x88\xcc\x81"},
    {0x1FD6, "\xce\x99\xcd\x82", "\xce\x99\xcd\x82"},
    {0x1FD7, "\xce\x99\xcc\x88\xcd\x82", "\xce\x99\xcc\x88\xcd\x82"},
    {0x1FE2, "\xce\xa5\xcc\x88\xcc\x80", "\xce\xa5\xcc\x88\xcc\x80"},
    {0x1FE3, "\xce\xa5\xcc\x88\xcc\x81", "\xce\xa5\xcc\x88\xcc\x81"},
    {0x1FE4, "\xce\xa1\xcc\x93", "\xce\xa1\xcc\x93"},
    {0x1FE6, "\xce\xa5\xcd\x82", "\xce\xa5\xcd\x82"},
    {0x1FE7, "\xce\xa5\xcc\x88\xcd\x82", "\xce\xa5\xcc\x88\xcd\x82"},
    {0x1FF2, "\xe1\xbf\xba\xce\x99", "\xe1\xbf\xba\xcd\x85"},
    {0x1FF3, "\xce\xa9\xce\x99", nullptr},
    {0x1FF4, "\xce\x8f\xce\x99", "\xce\x8f\xcd\x85"},
    {0x1FF6, "\xce\xa9\xcd\x82", "\xce\xa9\xcd\x82"},
    {0x1FF7, "\xce\xa9\xcd\x82\xce\x99", "\xce\xa9\xcd\x82\xcd\x85"},
    {0x1FFC, "\xce\xa9\xce\x99", nullptr},
    {0xFB00, "\x46\x46", "\x46\x66"},
    {0xFB01, "\x46\x49", "\x46\x69"},
    {0xFB02, "\x46\x4c", "\x46\x6c"},
    {0xFB03, "\x46\x46\x49", "\x46\x66\x69"},
    {0xFB04, "\x46\x46\x4c", "\x46\x66\x6c"},
    {0xFB05, "\x53\x54", "\x53\x74"},
    {0xFB06, "\x53\x54", "\x53\x74"},
    {0xFB13, "\xd5\x84\xd5\x86", "\xd5\x84\xd5\xb6"},
    {0xFB14, "\xd5\x84\xd4\xb5", "\xd5\x84\xd5\xa5"},
    {0xFB15, "\xd5\x84\xd4\xbb", "\xd5\x84\xd5\xab"},
    {0xFB16, "\xd5\x8e\xd5\x86", "\xd5\x8e\xd5\xb6"},
    {0xFB17, "\xd5\x84\xd4\xbd", "\xd5\x84\xd5\xad"},
};

const SpecialCase* special_case(char32_t cp) {
  if (cp < 0xDF) return nullptr;
  for (const SpecialCase& entry : kSpecialCases) {
    if (entry.cp == cp) return &entry;
  }
  return nullptr;
}

// Unicode's Case_Ignorable, approximately: marks, format and modifier characters, and the
// word-internal punctuation that does not break a word.
bool case_ignorable(char32_t cp) {
  switch (category(cp)) {
    case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_ME:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_SK: return true;
    default: return cp == '\'' || cp == '.' || cp == ':' || cp == 0xB7 || cp == 0x2019;
  }
}

// Python lowers a capital sigma at the end of a word to the final form.
bool final_sigma(const std::u32string& text, size_t i) {
  size_t j = i;
  while (j > 0 && case_ignorable(text[j - 1])) --j;
  if (j == 0 || !is_cased(text[j - 1])) return false;
  size_t k = i + 1;
  while (k < text.size() && case_ignorable(text[k])) ++k;
  return k == text.size() || !is_cased(text[k]);
}

}  // namespace

std::u32string decode(std::string_view utf8) {
  std::u32string out;
  out.reserve(utf8.size());
  const auto* p = reinterpret_cast<const utf8proc_uint8_t*>(utf8.data());
  utf8proc_ssize_t left = static_cast<utf8proc_ssize_t>(utf8.size());
  while (left > 0) {
    utf8proc_int32_t cp = 0;
    utf8proc_ssize_t used = utf8proc_iterate(p, left, &cp);
    if (used <= 0) {
      cp = 0xFFFD;
      used = 1;
    }
    out.push_back(static_cast<char32_t>(cp));
    p += used;
    left -= used;
  }
  return out;
}

void append(std::string& out, char32_t cp) {
  utf8proc_uint8_t buffer[4];
  const utf8proc_ssize_t n = utf8proc_encode_char(static_cast<utf8proc_int32_t>(cp), buffer);
  out.append(reinterpret_cast<const char*>(buffer), static_cast<size_t>(n));
}

std::string encode(std::u32string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char32_t cp : text) append(out, cp);
  return out;
}

size_t length(std::string_view utf8) {
  size_t count = 0;
  for (unsigned char c : utf8) count += (c & 0xC0) != 0x80;
  return count;
}

bool is_space(char32_t cp) {
  if (cp < 0x80) return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20);
  switch (cp) {
    case 0x85:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000: return true;
    default: return cp >= 0x2000 && cp <= 0x200A;
  }
}

bool is_line_break(char32_t cp) {
  switch (cp) {
    case '\n':
    case '\r':
    case 0x0B:
    case 0x0C:
    case 0x1C:
    case 0x1D:
    case 0x1E:
    case 0x85:
    case 0x2028:
    case 0x2029: return true;
    default: return false;
  }
}

bool is_printable(char32_t cp) {
  if (cp == ' ') return true;
  switch (category(cp)) {
    case UTF8PROC_CATEGORY_CC:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CO:
    case UTF8PROC_CATEGORY_CN:
    case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP:
    case UTF8PROC_CATEGORY_ZS: return false;
    default: return true;
  }
}

bool is_alpha(char32_t cp) {
  const auto c = category(cp);
  return c >= UTF8PROC_CATEGORY_LU && c <= UTF8PROC_CATEGORY_LO;
}
bool is_decimal(char32_t cp) { return category(cp) == UTF8PROC_CATEGORY_ND; }
bool is_digit(char32_t cp) {
  // Python's isdigit also accepts superscripts and similar "digit" numerics (No with a digit value).
  return is_decimal(cp) || cp == 0xB2 || cp == 0xB3 || cp == 0xB9 || (cp >= 0x2070 && cp <= 0x2079) ||
         (cp >= 0x2080 && cp <= 0x2089) || (cp >= 0x2460 && cp <= 0x2468) || (cp >= 0x2474 && cp <= 0x247C) ||
         (cp >= 0x2488 && cp <= 0x2490) || (cp >= 0x24F5 && cp <= 0x24FD) || (cp >= 0x2776 && cp <= 0x277E);
}
bool is_numeric(char32_t cp) {
  const auto c = category(cp);
  return c == UTF8PROC_CATEGORY_ND || c == UTF8PROC_CATEGORY_NL || c == UTF8PROC_CATEGORY_NO;
}
bool is_alnum(char32_t cp) { return is_alpha(cp) || is_numeric(cp); }
bool is_word(char32_t cp) { return cp == '_' || is_alnum(cp); }
bool is_upper(char32_t cp) { return category(cp) == UTF8PROC_CATEGORY_LU; }
bool is_lower(char32_t cp) { return category(cp) == UTF8PROC_CATEGORY_LL; }
bool is_cased(char32_t cp) {
  const auto c = category(cp);
  return c == UTF8PROC_CATEGORY_LU || c == UTF8PROC_CATEGORY_LL || c == UTF8PROC_CATEGORY_LT;
}
char32_t to_lower(char32_t cp) { return static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(cp))); }
char32_t to_upper(char32_t cp) { return static_cast<char32_t>(utf8proc_toupper(static_cast<utf8proc_int32_t>(cp))); }
char32_t to_title(char32_t cp) { return static_cast<char32_t>(utf8proc_totitle(static_cast<utf8proc_int32_t>(cp))); }

void append_upper(std::string& out, char32_t cp) {
  if (const SpecialCase* entry = special_case(cp)) {
    out += entry->upper;
  } else {
    append(out, to_upper(cp));
  }
}

void append_title(std::string& out, char32_t cp) {
  const SpecialCase* entry = special_case(cp);
  if (entry != nullptr && entry->title != nullptr) {
    out += entry->title;
  } else {
    append(out, to_title(cp));
  }
}

std::string lower(std::string_view utf8) {
  const std::u32string text = decode(utf8);
  std::string out;
  out.reserve(utf8.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const char32_t cp = text[i];
    if (cp == 0x130) {
      out += "i\xcc\x87";  // İ lowers to i + combining dot above
    } else if (cp == 0x3A3 && final_sigma(text, i)) {
      append(out, 0x3C2);
    } else {
      append(out, to_lower(cp));
    }
  }
  return out;
}

std::string upper(std::string_view utf8) {
  std::string out;
  out.reserve(utf8.size());
  for (char32_t cp : decode(utf8)) append_upper(out, cp);
  return out;
}

}  // namespace imp::text::jinja::unicode
