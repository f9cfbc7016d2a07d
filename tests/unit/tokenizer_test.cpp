// The tokenizer on small crafted tokenizer.json files: BPE merge order, ignore_merges, added-token flags
// (lstrip, rstrip, single_word, normalized, special) and id assignment, refusal of unsupported
// components, invalid UTF-8, streaming decode at every split point, and `imp tokenize`. Expected values
// were produced by Hugging Face tokenizers 0.23.3 on the same files (tests/tokenizer covers real ones).
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "text/byte_level.h"
#include "text/tokenizer.h"
#include "text/unicode.h"

namespace imp::text {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using Strings = std::vector<std::string>;

constexpr const char* kQwen3Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

json added(const std::string& content, json flags = json::object()) {
  json t = {{"id", 0},          {"content", content}, {"single_word", false}, {"lstrip", false},
            {"rstrip", false},  {"normalized", false}, {"special", true}};
  t.update(flags);
  return t;
}

// Bytes 0-255 are ids 0-255; each merge adds its result with the next id; then "abc".
json tiny_tokenizer(json added_tokens = json::array(), bool ignore_merges = false) {
  const std::vector<std::pair<std::string, std::string>> merges = {
      {"h", "e"},    {"l", "l"},      {"he", "ll"},     {"hell", "o"},         {" ", "w"},
      {"o", "r"},    {" w", "or"},    {" wor", "l"},    {" worl", "d"},        {"a", "b"},
      {"\xE4", "\xB8"}, {"\xE4\xB8", "\xAD"}, {"\xF0", "\x9F"}, {"\xF0\x9F", "\x98"}};
  json vocab = json::object();
  int next = 0;
  auto add_token = [&](const std::string& bytes) {
    const std::string chars = byte_level::bytes_to_chars(bytes);
    if (!vocab.contains(chars)) vocab[chars] = next++;
  };
  for (int b = 0; b < 256; ++b) add_token(std::string(1, static_cast<char>(b)));
  json merge_list = json::array();
  for (const auto& [a, b] : merges) {
    merge_list.push_back({byte_level::bytes_to_chars(a), byte_level::bytes_to_chars(b)});
    add_token(a + b);
  }
  add_token("abc");
  for (json& token : added_tokens) {
    const std::string content = token["content"].get<std::string>();
    token["id"] = vocab.contains(content) ? vocab[content].get<int>() : next++;
  }
  return {{"version", "1.0"},
          {"truncation", nullptr},
          {"padding", nullptr},
          {"added_tokens", added_tokens},
          {"normalizer", {{"type", "NFC"}}},
          {"pre_tokenizer",
           {{"type", "Sequence"},
            {"pretokenizers",
             {{{"type", "Split"}, {"pattern", {{"Regex", kQwen3Regex}}}, {"behavior", "Isolated"}, {"invert", false}},
              {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}}}}}},
          {"post_processor", nullptr},
          {"decoder", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}}},
          {"model",
           {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr}, {"continuing_subword_prefix", ""},
            {"end_of_word_suffix", ""}, {"fuse_unk", false}, {"byte_fallback", false}, {"ignore_merges", ignore_merges},
            {"vocab", vocab}, {"merges", merge_list}}}};
}

Tokenizer make(const json& spec) { return Tokenizer::from_json(spec.dump()); }

// The tokens (as the bytes they decode to) encode gives.
Strings pieces(const Tokenizer& tokenizer, std::string_view text) {
  Strings out;
  for (int32_t id : tokenizer.encode(text)) out.emplace_back(tokenizer.token_bytes(id));
  return out;
}

TEST(Tokenizer, MergesInRankOrder) {
  const Tokenizer t = make(tiny_tokenizer());
  EXPECT_EQ(t.encode("hello world"), (std::vector<int32_t>{259, 264}));
  EXPECT_EQ(pieces(t, "hello  world\n"), (Strings{"hello", " ", " world", "\n"}));
  EXPECT_EQ(pieces(t, "abc"), (Strings{"ab", "c"}));
  EXPECT_EQ(pieces(t, "中中"), (Strings{"中", "中"}));
  EXPECT_EQ(pieces(t, "😀"), (Strings{"\xF0\x9F\x98", "\x80"}));
  EXPECT_EQ(t.decode(t.encode("hello  world\n")), "hello  world\n");
  EXPECT_EQ(t.vocab_size(), 271);
  EXPECT_EQ(t.token_to_id("Ġworld"), 264);
  EXPECT_EQ(t.id_to_token(264), "Ġworld");
  EXPECT_FALSE(t.id_to_token(271).has_value());
}

TEST(Tokenizer, IgnoreMergesTakesWholeVocabularyPieces) {
  const Tokenizer plain = make(tiny_tokenizer());
  const Tokenizer ignoring = make(tiny_tokenizer(json::array(), /*ignore_merges=*/true));
  EXPECT_EQ(pieces(plain, "abc"), (Strings{"ab", "c"}));
  EXPECT_EQ(pieces(ignoring, "abc"), (Strings{"abc"}));
  EXPECT_EQ(pieces(ignoring, "abcd"), (Strings{"ab", "c", "d"}));
  EXPECT_EQ(ignoring.encode("hello"), (std::vector<int32_t>{259}));
}

class AddedTokens : public testing::Test {
 protected:
  AddedTokens()
      : t_(make(tiny_tokenizer(json::array({
            added("<L>", {{"lstrip", true}}),
            added("<R>", {{"rstrip", true}}),
            added("<LR>", {{"lstrip", true}, {"rstrip", true}}),
            added("<S>", {{"single_word", true}}),
            added("hello", {{"single_word", true}, {"special", false}}),
            added("cafe\u0301", {{"normalized", true}, {"special", false}}),
            added("e\u0301x", {{"special", false}}),
            added("\u2126", {{"normalized", true}}),
            added("<plain>"),
            added("a b", {{"special", false}}),
        })))) {}
  Tokenizer t_;
};

TEST_F(AddedTokens, StripAbsorbsWhitespaceAroundTheToken) {
  EXPECT_EQ(pieces(t_, "x  <L>  y"), (Strings{"x", "<L>", " ", " ", "y"}));
  EXPECT_EQ(pieces(t_, "x\t<R>\t y"), (Strings{"x", "\t", "<R>", "y"}));
  EXPECT_EQ(pieces(t_, "x <LR> y"), (Strings{"x", "<LR>", "y"}));
  EXPECT_EQ(pieces(t_, "<L><L>"), (Strings{"<L>", "<L>"}));
  EXPECT_EQ(pieces(t_, "<R>  <R>"), (Strings{"<R>", "<R>"}));
  EXPECT_EQ(pieces(t_, "\u3000<L>"), (Strings{"<L>"}));  // Unicode whitespace counts
  EXPECT_EQ(pieces(t_, "<R>\u2003\u2003z"), (Strings{"<R>", "z"}));
  EXPECT_EQ(t_.decode(t_.encode("x  <L>  y")), "x<L>  y");
  EXPECT_EQ(t_.decode(t_.encode("x  <L>  y"), true), "x  y");
}

TEST_F(AddedTokens, SingleWordNeedsNonWordNeighbours) {
  EXPECT_EQ(pieces(t_, "x<S>y"), (Strings{"x", "<", "S", ">", "y"}));
  EXPECT_EQ(pieces(t_, "x <S> y"), (Strings{"x", " ", "<S>", " ", "y"}));
  EXPECT_EQ(pieces(t_, "é<S>"), (Strings{"\xC3", "\xA9", "<", "S", ">"}));  // é is a word character
  EXPECT_EQ(pieces(t_, "_<S>"), (Strings{"_", "<", "S", ">"}));
  EXPECT_EQ(pieces(t_, "Ⓐ<S> "), (Strings{"\xE2", "\x92", "\xB6", "<", "S", ">", " "}));  // alphabetic symbol
  EXPECT_EQ(pieces(t_, "①<S>"), (Strings{"\xE2", "\x91", "\xA0", "<S>"}));  // No is not \w
  EXPECT_EQ(pieces(t_, "<S><S>"), (Strings{"<S>", "<S>"}));
  EXPECT_EQ(pieces(t_, "say hello!"), (Strings{"s", "a", "y", " ", "hello", "!"}));
  EXPECT_EQ(t_.encode("hello"), (std::vector<int32_t>{259}));  // the model's id: "hello" is in its vocabulary
}

TEST_F(AddedTokens, NormalizedTokensMatchNormalizedText) {
  const int32_t cafe = 275;
  EXPECT_EQ(t_.encode("caf\u00e9"), (std::vector<int32_t>{cafe}));
  EXPECT_EQ(t_.encode("cafe\u0301"), (std::vector<int32_t>{cafe}));
  // Looked up as written, decoded as normalized: "café" as NFC bytes through the byte-level map.
  EXPECT_EQ(t_.token_to_id("cafe\u0301"), cafe);
  EXPECT_EQ(t_.id_to_token(cafe), "caf\u00e9");
  EXPECT_EQ(t_.decode(std::vector<int32_t>{cafe}), "caf\uFFFD");
  // A normalized=false token only matches the raw text.
  EXPECT_EQ(pieces(t_, "e\u0301x"), (Strings{"e\u0301x"}));
  EXPECT_EQ(pieces(t_, "\u00e9x"), (Strings{"\xC3", "\xA9", "x"}));
  EXPECT_EQ(t_.encode("\u2126 \u03a9"), (std::vector<int32_t>{277, 32, 277}));
  // Special, but normalization changed its content: not skipped (as in tokenizers).
  EXPECT_EQ(t_.decode(std::vector<int32_t>{277}, true), "\u03a9");
}

TEST_F(AddedTokens, SpecialTokensAreSkippedOnRequest) {
  const std::vector<int32_t> ids = t_.encode("<plain>x<plain>");
  EXPECT_EQ(ids, (std::vector<int32_t>{278, 120, 278}));
  EXPECT_TRUE(t_.is_special(278));
  EXPECT_EQ(t_.decode(ids), "<plain>x<plain>");
  EXPECT_EQ(t_.decode(ids, true), "x");
  // Content outside the byte-level alphabet decodes as its own UTF-8.
  EXPECT_EQ(pieces(t_, "a b c"), (Strings{"a b", " ", "c"}));
  EXPECT_EQ(t_.decode(t_.encode("a b c")), "a b c");
}

TEST(Tokenizer, AddedTokenIdsFollowTokenizersRules) {
  json spec = tiny_tokenizer();
  auto token = [](int id, const std::string& content, json flags = json::object()) {
    json t = added(content, flags);
    t["id"] = id;
    return t;
  };
  spec["added_tokens"] = json::array({token(500, "<a>"), token(7, "hello", {{"special", false}}),
                                      token(501, "<b>", {{"special", false}}), token(502, "<a>", {{"lstrip", true}}),
                                      token(503, ""), token(504, "<c>"), token(505, "<b>", {{"special", false}})});
  const Tokenizer t = make(spec);
  EXPECT_EQ(t.token_to_id("<a>"), 271);  // next free id, not the file's
  EXPECT_EQ(t.token_to_id("hello"), 259);
  EXPECT_EQ(t.token_to_id("<b>"), 272);
  EXPECT_EQ(t.token_to_id("<c>"), 273);
  EXPECT_EQ(t.vocab_size(), 274);
  // The later definition of <a> (lstrip) wins.
  EXPECT_EQ(t.encode(" <a> hello <b><c>"), (std::vector<int32_t>{271, 32, 259, 32, 272, 273}));
  EXPECT_EQ(t.decode(t.encode(" <a> hello <b><c>"), true), " hello <b>");
}

// encode is const and keeps its BPE cache per thread: concurrent use gives the single-thread results.
TEST(Tokenizer, EncodesConcurrently) {
  const Tokenizer t = make(tiny_tokenizer(json::array({added("<s>")})));
  std::string text;
  for (int i = 0; i < 2000; ++i) text += fmt::format("hello world {} 中文<s>abc ", i);
  const std::vector<int32_t> want = t.encode(text);
  std::vector<std::vector<int32_t>> got(4);
  std::vector<std::thread> threads;
  for (auto& out : got) threads.emplace_back([&] { out = t.encode(text); });
  for (auto& thread : threads) thread.join();
  for (const auto& out : got) EXPECT_EQ(out, want);
}

TEST(Tokenizer, InvalidUtf8IsReplacedBeforeEncoding) {
  const Tokenizer t = make(tiny_tokenizer());
  EXPECT_EQ(t.encode("a\xFF" "b"), t.encode("a\uFFFDb"));
  EXPECT_EQ(t.encode("\xE2\x82"), t.encode("\uFFFD"));          // truncated: one replacement
  EXPECT_EQ(t.encode("\xF0\x80\x80"), t.encode("\uFFFD\uFFFD\uFFFD"));  // each maximal subpart
  EXPECT_EQ(unicode::to_valid_utf8("\xED\xA0\x80x"), "\uFFFD\uFFFD\uFFFDx");  // no surrogates
  EXPECT_EQ(t.encode(""), std::vector<int32_t>{});
}

TEST(Tokenizer, ConfigGivesBosAndEos) {
  const json config = {{"add_bos_token", true},
                       {"bos_token", {{"content", "<a>"}, {"lstrip", false}}},
                       {"eos_token", "<b>"},
                       {"pad_token", nullptr}};
  json spec = tiny_tokenizer(json::array({added("<a>"), added("<b>")}));
  const Tokenizer t = Tokenizer::from_json(spec.dump(), config.dump());
  EXPECT_TRUE(t.config().add_bos_token);
  EXPECT_EQ(t.config().bos_token, "<a>");
  EXPECT_EQ(t.bos_token_id(), 271);
  EXPECT_EQ(t.eos_token_id(), 272);
  EXPECT_FALSE(t.config().pad_token.has_value());
  EXPECT_FALSE(make(spec).config().add_bos_token);
}

// Each change makes a file the tokenizer cannot reproduce; the error must name the component.
TEST(Tokenizer, RefusesUnsupportedComponents) {
  const std::vector<std::pair<std::function<void(json&)>, std::string>> cases = {
      {[](json& j) { j["model"]["type"] = "WordPiece"; }, "model 'WordPiece'"},
      {[](json& j) { j["model"]["byte_fallback"] = true; }, "byte_fallback"},
      {[](json& j) { j["model"]["dropout"] = 0.1; }, "dropout"},
      {[](json& j) { j["model"]["continuing_subword_prefix"] = "##"; }, "continuing_subword_prefix"},
      {[](json& j) { j["normalizer"] = {{"type", "NFKC"}}; }, "normalizer 'NFKC'"},
      {[](json& j) { j["normalizer"] = {{"type", "Sequence"}, {"normalizers", {{{"type", "Lowercase"}}}}}; },
       "normalizer 'Lowercase'"},
      {[](json& j) { j["pre_tokenizer"] = {{"type", "Whitespace"}}; }, "pre_tokenizer step 'Whitespace'"},
      {[](json& j) { j["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "Removed"; }, "Split behavior 'Removed'"},
      {[](json& j) { j["pre_tokenizer"]["pretokenizers"][0]["invert"] = true; }, "invert"},
      {[](json& j) { j["pre_tokenizer"]["pretokenizers"][0]["pattern"] = {{"String", " "}}; }, "Split pattern"},
      {[](json& j) { j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = R"(\w+|\s)"; }, "\\w"},
      {[](json& j) { j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "a*"; }, "empty string"},
      {[](json& j) { j["pre_tokenizer"]["pretokenizers"][1]["use_regex"] = true; }, "use_regex true"},
      {[](json& j) { j["pre_tokenizer"]["pretokenizers"].erase(1); }, "without ByteLevel"},
      {[](json& j) { j["decoder"] = {{"type", "WordPiece"}}; }, "decoder 'WordPiece'"},
      {[](json& j) { j["decoder"] = nullptr; }, "decoder 'null'"},
      {[](json& j) { j["post_processor"] = {{"type", "BertProcessing"}}; }, "post_processor 'BertProcessing'"},
      {[](json& j) { j["truncation"] = {{"max_length", 8}}; }, "truncation"},
      {[](json& j) { j["model"]["merges"].push_back({"x", "zz"}); }, "not in the vocabulary"},
      {[](json& j) { j["model"]["merges"].push_back("a b c"); }, "one space"},
      {[](json& j) { j["added_tokens"].push_back({{"id", 300}, {"content", "<x>"}}); }, "single_word"},
  };
  for (const auto& [change, expected] : cases) {
    json spec = tiny_tokenizer();
    change(spec);
    try {
      make(spec);
      ADD_FAILURE() << "accepted a file that should fail with: " << expected;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(Tokenizer::from_json("{not json"), Error);
  EXPECT_THROW(Tokenizer::load("/nonexistent/model"), Error);
}

// Streaming: for every way of cutting a byte string into single-byte tokens, each push emits exactly
// the decoded text that no later byte can change, and pushes plus finish equal decode.
TEST(IncrementalDetokenizer, EmitsOnlyFinalTextAtEverySplitPoint) {
  const Tokenizer t = make(tiny_tokenizer(json::array({added("<s>")})));
  const std::vector<std::string> texts = {
      "hello 中文 world", "😀👨‍👩‍👧", "\xE4\xB8", "a\xFF" "b", "\xF0\x9F\x98" "x", "\xE2\x82\xE2\x82\xAC",
      "\xC3", "\xED\xA0\x80", "\xF4\x90\x80\x80", "e\xCC\x81 \xEF\xBF\xBD", "\x80\x80\xC2\xA9"};
  for (const std::string& text : texts) {
    std::vector<int32_t> ids;
    for (char c : text) ids.push_back(static_cast<uint8_t>(c));  // one byte per token
    IncrementalDetokenizer detokenizer(t);
    std::string streamed;
    for (size_t k = 0; k < ids.size(); ++k) {
      const std::string piece = detokenizer.push(ids[k]);
      EXPECT_TRUE(unicode::is_valid_utf8(piece));
      streamed += piece;
      // Held back: at most a well-formed incomplete tail, never anything final.
      std::string prefix = text.substr(0, k + 1);
      size_t tail = prefix.size();
      for (size_t back = 1; back <= 3 && back <= prefix.size(); ++back) {
        const auto step = unicode::next_utf8(prefix, prefix.size() - back);
        if (step.kind == unicode::Utf8Kind::kIncomplete && step.length == back) tail = prefix.size() - back;
      }
      EXPECT_EQ(streamed, unicode::to_valid_utf8(prefix.substr(0, tail))) << "after byte " << k << " of " << text;
    }
    streamed += detokenizer.finish();
    EXPECT_EQ(streamed, t.decode(ids));
    EXPECT_EQ(streamed, unicode::to_valid_utf8(text));
  }
}

TEST(IncrementalDetokenizer, MultiByteTokensAndSpecialTokens) {
  const Tokenizer t = make(tiny_tokenizer(json::array({added("<s>")})));
  const int32_t special = *t.token_to_id("<s>");
  // 中 is one token (E4 B8 AD); E4 B8 is another, a token that ends inside a character.
  const std::vector<int32_t> ids = {*t.token_to_id("ä¸"), 0xAD, special, *t.token_to_id("ðŁĺ"), 0x80, 0xFF, 0xE4};
  for (bool skip : {false, true}) {
    IncrementalDetokenizer detokenizer(t, skip);
    std::vector<std::string> outputs;
    for (int32_t id : ids) outputs.push_back(detokenizer.push(id));
    outputs.push_back(detokenizer.finish());
    EXPECT_EQ(outputs, (Strings{"", "中", skip ? "" : "<s>", "", "😀", "\uFFFD", "", "\uFFFD"}));
    std::string all;
    for (const auto& o : outputs) all += o;
    EXPECT_EQ(all, t.decode(ids, skip));
  }
  IncrementalDetokenizer detokenizer(t);
  EXPECT_EQ(detokenizer.push(1 << 20), "");  // unknown ids add nothing, as in decode
  EXPECT_EQ(detokenizer.finish(), "");
}

// `imp tokenize` on a folder holding only tokenizer.json and tokenizer_config.json.
TEST(TokenizeCommand, EncodesAndDecodesStdin) {
  const fs::path dir = fs::temp_directory_path() / fmt::format("imp_tokenize_{}", ::getpid());
  fs::create_directories(dir);
  std::ofstream(dir / "tokenizer.json") << tiny_tokenizer(json::array({added("<s>")})).dump();
  std::ofstream(dir / "tokenizer_config.json") << json{{"add_bos_token", false}, {"eos_token", "<s>"}}.dump();
  auto run = [&](const std::string& input, const std::string& args) {
    const fs::path in = dir / "in.txt", out = dir / "out.txt";
    std::ofstream(in, std::ios::binary) << input;
    const std::string command =
        fmt::format("{} tokenize --model {} {} < {} > {} 2>&1", IMP_BINARY, dir.string(), args, in.string(), out.string());
    const int status = std::system(command.c_str());
    std::ifstream f(out, std::ios::binary);
    std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    return std::make_pair(WIFEXITED(status) ? WEXITSTATUS(status) : -1, text);
  };
  EXPECT_EQ(run("hello world<s>", ""), std::make_pair(0, std::string("259 264 271\n")));
  EXPECT_EQ(run("hello world", "--json"), std::make_pair(0, std::string("{\"ids\":[259,264]}\n")));
  EXPECT_EQ(run("259 264 271", "--decode"), std::make_pair(0, std::string("hello world<s>")));
  EXPECT_EQ(run("{\"ids\":[259,264,271]}", "--decode --skip-special"), std::make_pair(0, std::string("hello world")));
  const auto bad = run("1 x", "--decode");
  EXPECT_EQ(bad.first, 1);
  EXPECT_NE(bad.second.find("not a token id"), std::string::npos) << bad.second;
  fs::remove(dir / "tokenizer.json");
  EXPECT_EQ(run("hello", "").first, 1);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace imp::text
