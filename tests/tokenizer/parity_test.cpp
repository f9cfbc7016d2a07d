// Parity of imp's tokenizer with Hugging Face `tokenizers` on the corpus and expectations that the
// fixture set-up (make_corpus.py) wrote: ids, pre-token boundaries (word ids), decode with and without
// special tokens, streaming decode, decode of random id sequences, and the Unicode data underneath
// (character classes, NFC) on every code point checked.
#include <gtest/gtest.h>

#include <pcre2.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "text/normalizer.h"
#include "text/pretokenizer.h"
#include "text/tokenizer.h"
#include "text/unicode.h"

namespace imp::text {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

fs::path data_dir() { return fs::path(IMP_TOKENIZER_PARITY_DIR); }

json read_json(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("missing " + path.string() + " (the tokenizer_parity_corpus test writes it)");
  std::stringstream buffer;
  buffer << in.rdbuf();
  return json::parse(buffer.str());
}

struct Piece {
  std::string name;
  std::string input;  // what imp encodes (raw bytes for the invalid UTF-8 pieces)
  std::string text;   // what `tokenizers` encoded
};

const std::vector<Piece>& corpus() {
  static const std::vector<Piece> pieces = [] {
    std::vector<Piece> out;
    for (const json& p : read_json(data_dir() / "corpus.json")) {
      Piece piece{p["name"].get<std::string>(), {}, {}};
      if (p.contains("hex")) {
        const std::string hex = p["hex"].get<std::string>();
        for (size_t i = 0; i < hex.size(); i += 2) piece.input.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
        piece.text = p["replaced"].get<std::string>();
      } else {
        piece.input = piece.text = p["text"].get<std::string>();
      }
      out.push_back(std::move(piece));
    }
    return out;
  }();
  return pieces;
}

struct Expected {
  struct Entry {
    size_t piece;
    std::vector<int32_t> ids;
    std::vector<int32_t> words;
    std::string decoded;
    std::string decoded_skip;
  };
  struct Decode {
    std::vector<int32_t> ids;
    std::string decoded;
    std::string decoded_skip;
  };
  std::vector<Entry> entries;
  std::vector<Decode> decodes;
  int32_t vocab_size = 0;
};

struct Variant {
  Tokenizer tokenizer;
  Expected expected;
};

const Variant& variant(const std::string& name) {
  static std::map<std::string, std::unique_ptr<Variant>> cache;
  auto& slot = cache[name];
  if (slot) return *slot;
  Tokenizer tokenizer = Tokenizer::load(data_dir() / name);
  const json data = read_json(data_dir() / (name + ".expected.json"));
  Expected expected;
  for (const json& e : data["pieces"]) {
    Expected::Entry entry;
    entry.piece = e["piece"].get<size_t>();
    entry.ids = e["ids"].get<std::vector<int32_t>>();
    for (const json& w : e["words"]) entry.words.push_back(w.is_null() ? -1 : w.get<int32_t>());
    const std::string& text = corpus().at(entry.piece).text;
    entry.decoded = e["decoded"].is_null() ? text : e["decoded"].get<std::string>();
    entry.decoded_skip = e["decoded_skip"].is_null() ? entry.decoded : e["decoded_skip"].get<std::string>();
    expected.entries.push_back(std::move(entry));
  }
  for (const json& d : data["random_ids"]) {
    expected.decodes.push_back({d["ids"].get<std::vector<int32_t>>(), d["decoded"].get<std::string>(),
                                d["decoded_skip"].get<std::string>()});
  }
  expected.vocab_size = data["vocab_size"].get<int32_t>();
  slot = std::make_unique<Variant>(Variant{std::move(tokenizer), std::move(expected)});
  return *slot;
}

std::string first_difference(const std::vector<int32_t>& got, const std::vector<int32_t>& want) {
  size_t i = 0;
  while (i < got.size() && i < want.size() && got[i] == want[i]) ++i;
  auto around = [&](const std::vector<int32_t>& v) {
    const size_t from = i >= 3 ? i - 3 : 0;
    return fmt::format("{}", fmt::join(v.begin() + static_cast<ptrdiff_t>(std::min(from, v.size())),
                                       v.begin() + static_cast<ptrdiff_t>(std::min(i + 5, v.size())), " "));
  };
  return fmt::format("first difference at {} of {}/{}: imp [{}] vs tokenizers [{}]", i, got.size(), want.size(),
                     around(got), around(want));
}

class Parity : public testing::TestWithParam<std::string> {};

TEST_P(Parity, EncodeGivesTheSameIdsAndPieces) {
  const Variant& v = variant(GetParam());
  size_t failures = 0, ids_total = 0, bytes_total = 0;
  for (const Expected::Entry& e : v.expected.entries) {
    const Piece& piece = corpus().at(e.piece);
    std::vector<int32_t> words;
    const std::vector<int32_t> ids = v.tokenizer.encode(piece.input, &words);
    ids_total += ids.size();
    bytes_total += piece.input.size();
    if (ids != e.ids) {
      if (++failures <= 10) ADD_FAILURE() << piece.name << ": ids differ, " << first_difference(ids, e.ids);
    } else if (words != e.words) {
      if (++failures <= 10) ADD_FAILURE() << piece.name << ": pre-token boundaries differ, " << first_difference(words, e.words);
    }
  }
  EXPECT_EQ(failures, 0u) << "of " << v.expected.entries.size() << " pieces";
  std::printf("%s: %zu pieces, %zu bytes, %zu ids compared\n", GetParam().c_str(), v.expected.entries.size(),
              bytes_total, ids_total);
}

TEST_P(Parity, DecodeGivesTheSameText) {
  const Variant& v = variant(GetParam());
  size_t failures = 0;
  for (const Expected::Entry& e : v.expected.entries) {
    const std::string& name = corpus().at(e.piece).name;
    if (v.tokenizer.decode(e.ids) != e.decoded && ++failures <= 10) ADD_FAILURE() << name << ": decode differs";
    if (v.tokenizer.decode(e.ids, true) != e.decoded_skip && ++failures <= 10) {
      ADD_FAILURE() << name << ": decode skipping special tokens differs";
    }
  }
  for (const Expected::Decode& d : v.expected.decodes) {
    if (v.tokenizer.decode(d.ids) != d.decoded && ++failures <= 10) {
      ADD_FAILURE() << fmt::format("decode of random ids [{}] differs", fmt::join(d.ids, " "));
    }
    if (v.tokenizer.decode(d.ids, true) != d.decoded_skip && ++failures <= 10) {
      ADD_FAILURE() << fmt::format("decode (skip special) of random ids [{}] differs", fmt::join(d.ids, " "));
    }
  }
  EXPECT_EQ(failures, 0u);
  EXPECT_EQ(v.tokenizer.vocab_size(), v.expected.vocab_size);
}

std::string stream(const Tokenizer& tokenizer, const std::vector<int32_t>& ids, bool skip_special) {
  IncrementalDetokenizer detokenizer(tokenizer, skip_special);
  std::string out;
  for (int32_t id : ids) out += detokenizer.push(id);
  return out + detokenizer.finish();
}

TEST_P(Parity, StreamingDecodeGivesTheSameText) {
  const Variant& v = variant(GetParam());
  size_t failures = 0;
  for (const Expected::Entry& e : v.expected.entries) {
    if (stream(v.tokenizer, e.ids, false) != e.decoded && ++failures <= 10) {
      ADD_FAILURE() << corpus().at(e.piece).name << ": streamed text differs";
    }
  }
  for (const Expected::Decode& d : v.expected.decodes) {
    if (stream(v.tokenizer, d.ids, false) != d.decoded && ++failures <= 10) {
      ADD_FAILURE() << fmt::format("streamed random ids [{}] differ", fmt::join(d.ids, " "));
    }
    if (stream(v.tokenizer, d.ids, true) != d.decoded_skip && ++failures <= 10) {
      ADD_FAILURE() << fmt::format("streamed random ids [{}] (skip special) differ", fmt::join(d.ids, " "));
    }
  }
  EXPECT_EQ(failures, 0u);
}

INSTANTIATE_TEST_SUITE_P(Variants, Parity, testing::Values("qwen3", "qwen35", "flags"),
                         [](const testing::TestParamInfo<std::string>& info) { return info.param; });

TEST(InvalidUtf8, IsReplacedLikePython) {
  for (const Piece& piece : corpus()) {
    if (piece.input != piece.text) {
      EXPECT_EQ(unicode::to_valid_utf8(piece.input), piece.text) << piece.name;
    }
  }
}

// Our tables against fresh probes of `tokenizers`, on every checked code point.
class UnicodeClasses : public testing::Test {
 protected:
  static std::vector<unicode::CodePointRange> ranges(const json& list) {
    std::vector<unicode::CodePointRange> out;
    for (const json& r : list) out.push_back({r[0].get<char32_t>(), r[1].get<char32_t>()});
    return out;
  }
  template <typename F>
  static void for_each_checked(const json& probed, F&& f) {
    for (const auto& r : ranges(probed["checked"])) {
      for (char32_t c = r.first; c <= r.last; ++c) f(c);
    }
  }
  static bool in(const std::vector<unicode::CodePointRange>& rs, char32_t c) {
    auto it = std::upper_bound(rs.begin(), rs.end(), c, [](char32_t v, const auto& r) { return v < r.first; });
    return it != rs.begin() && c <= std::prev(it)->last;
  }
};

TEST_F(UnicodeClasses, TablesMatchTokenizers) {
  const json probed = read_json(data_dir() / "unicode_classes.json");
  const std::pair<const char*, const unicode::CodePointSet*> tables[] = {
      {"letter", &unicode::kLetter}, {"number", &unicode::kNumber},           {"mark", &unicode::kMark},
      {"regex_space", &unicode::kRegexSpace}, {"word", &unicode::kWord}, {"space", &unicode::kSpace}};
  for (const auto& [name, table] : tables) {
    const auto want = ranges(probed[name]);
    size_t differences = 0;
    for_each_checked(probed, [&](char32_t c) {
      if (table->contains(c) != in(want, c) && ++differences <= 5) {
        ADD_FAILURE() << fmt::format("{}: U+{:04X} is {} in imp's table", name, static_cast<uint32_t>(c),
                                     table->contains(c) ? "in" : "not");
      }
    });
    EXPECT_EQ(differences, 0u) << name;
  }
}

// The PCRE2 form of each class escape, as translate_pattern writes it, matches exactly what
// Oniguruma matches in `tokenizers`.
TEST_F(UnicodeClasses, TranslatedRegexMatchesTokenizers) {
  const json probed = read_json(data_dir() / "unicode_classes.json");
  const std::pair<const char*, const char*> classes[] = {
      {"letter", "\\p{L}"}, {"number", "\\p{N}"}, {"mark", "\\p{M}"}, {"regex_space", "\\s"}};
  for (const auto& [name, escape] : classes) {
    const std::string pattern = translate_pattern(escape);
    int error = 0;
    PCRE2_SIZE offset = 0;
    pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                     PCRE2_UTF | PCRE2_UCP | PCRE2_ANCHORED, &error, &offset, nullptr);
    ASSERT_NE(code, nullptr) << pattern;
    pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
    pcre2_match_data* data = pcre2_match_data_create_from_pattern(code, nullptr);
    const auto want = ranges(probed[name]);
    size_t differences = 0;
    std::string utf8;
    for_each_checked(probed, [&](char32_t c) {
      utf8.clear();
      unicode::append_utf8(utf8, c);
      const bool match = pcre2_match(code, reinterpret_cast<PCRE2_SPTR>(utf8.data()), utf8.size(), 0, 0, data, nullptr) > 0;
      if (match != in(want, c) && ++differences <= 5) {
        ADD_FAILURE() << fmt::format("{}: U+{:04X} {} by the translated regex", escape, static_cast<uint32_t>(c),
                                     match ? "matched" : "not matched");
      }
    });
    EXPECT_EQ(differences, 0u) << escape;
    pcre2_match_data_free(data);
    pcre2_code_free(code);
  }
}

TEST(Nfc, MatchesTokenizersOnEveryCodePoint) {
  const json cases = read_json(data_dir() / "nfc_cases.json");
  std::vector<bool> listed(0x110000);
  size_t differences = 0;
  for (const json& c : cases) {
    const std::string input = c[0].get<std::string>();
    const std::string want = c[1].get<std::string>();
    size_t pos = 0;
    const char32_t first = unicode::decode_at(input, pos);
    if (pos == input.size()) listed[first] = true;
    const std::string got = nfc(input);
    if (got != want && ++differences <= 10) {
      std::string hex;
      for (unsigned char b : input) hex += fmt::format("{:02X}", b);
      ADD_FAILURE() << "NFC of bytes " << hex << " differs";
    }
  }
  // Every code point not listed is left alone by `tokenizers`; so must it be by imp.
  std::string utf8;
  for (char32_t c = 1; c < 0x110000; ++c) {
    if ((c >= 0xD800 && c <= 0xDFFF) || listed[c]) continue;
    utf8.clear();
    unicode::append_utf8(utf8, c);
    if (nfc(utf8) != utf8 && ++differences <= 10) {
      ADD_FAILURE() << fmt::format("imp's NFC changes U+{:04X}; tokenizers does not", static_cast<uint32_t>(c));
    }
  }
  EXPECT_EQ(differences, 0u);
}

}  // namespace
}  // namespace imp::text
