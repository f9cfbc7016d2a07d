// Reading tokenizer.json / tokenizer_config.json into a Tokenizer, refusing what it cannot reproduce.
#include <algorithm>
#include <fstream>
#include <sstream>
#include <tuple>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/log.h"
#include "text/byte_level.h"
#include "text/tokenizer_impl.h"
#include "text/tokenizer_json.h"

namespace imp::text {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot read {}", path.string());
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

std::string type_of(const json& component) {
  if (!component.is_object() || !component.contains("type") || !component["type"].is_string()) return "?";
  return component["type"].get<std::string>();
}

class Loader {
 public:
  Loader(std::string_view origin, Tokenizer::Impl& impl) : origin_(origin), impl_(impl) {}

  void load(TokenizerJson& file) {
    const json& root = file.root;
    if (!root.is_object()) fail("{}: not a tokenizer.json object", origin_);
    for (const char* key : {"truncation", "padding"}) {
      if (root.contains(key) && !root[key].is_null()) fail("{}: {} is set (unsupported; imp never truncates or pads)", origin_, key);
    }
    normalizer(root.value("normalizer", json()));
    pre_tokenizer(root.value("pre_tokenizer", json()));
    decoder(root.value("decoder", json()));
    post_processor(root.value("post_processor", json()));
    if (!root.contains("model")) fail("{}: no model", origin_);
    model(root["model"], file);
    added_tokens(root.value("added_tokens", json::array()));
  }

  void config(const json& root, std::string_view origin) {
    if (!root.is_object()) fail("{}: not a JSON object", origin);
    TokenizerConfig& c = impl_.config;
    auto flag = [&](const char* key, bool& out) {
      if (!root.contains(key) || root[key].is_null()) return;
      if (!root[key].is_boolean()) fail("{}: {} must be true or false", origin, key);
      out = root[key].get<bool>();
    };
    auto token = [&](const char* key, std::optional<std::string>& out) {
      if (!root.contains(key) || root[key].is_null()) return;
      const json& v = root[key];
      if (v.is_string()) {
        out = v.get<std::string>();
      } else if (v.is_object() && v.contains("content") && v["content"].is_string()) {
        out = v["content"].get<std::string>();
      } else {
        fail("{}: {} must be a string or an object with \"content\"", origin, key);
      }
    };
    flag("add_bos_token", c.add_bos_token);
    flag("add_eos_token", c.add_eos_token);
    token("bos_token", c.bos_token);
    token("eos_token", c.eos_token);
    token("pad_token", c.pad_token);
  }

 private:
  [[noreturn]] void unsupported(std::string_view what) const {
    fail("{}: unsupported {} (imp supports byte-level BPE as in Qwen tokenizers)", origin_, what);
  }

  void normalizer(const json& n) {
    if (n.is_null()) return;
    const std::string type = type_of(n);
    if (type == "NFC") {
      impl_.normalizer = Normalizer(Normalizer::Kind::kNfc);
    } else if (type == "Sequence" && n.contains("normalizers") && n["normalizers"].is_array()) {
      for (const json& item : n["normalizers"]) normalizer(item);  // NFC twice is NFC
    } else {
      unsupported(fmt::format("normalizer '{}'", type));
    }
  }

  void pre_tokenizer(const json& p) {
    if (p.is_null()) unsupported("pre_tokenizer null (byte-level BPE needs ByteLevel)");
    std::vector<json> steps;
    if (type_of(p) == "Sequence" && p.contains("pretokenizers") && p["pretokenizers"].is_array()) {
      steps.assign(p["pretokenizers"].begin(), p["pretokenizers"].end());
    } else {
      steps.push_back(p);
    }
    std::string pattern;
    bool byte_level = false;
    for (const json& step : steps) {
      const std::string type = type_of(step);
      if (type == "Split" && !byte_level && pattern.empty()) {
        pattern = split_pattern(step);
      } else if (type == "ByteLevel" && !byte_level) {
        if (step.value("add_prefix_space", false)) unsupported("pre_tokenizer ByteLevel with add_prefix_space true");
        if (step.value("use_regex", true)) unsupported("pre_tokenizer ByteLevel with use_regex true");
        byte_level = true;
      } else {
        unsupported(fmt::format("pre_tokenizer step '{}' (expected at most one Split, then ByteLevel)", type));
      }
    }
    if (!byte_level) unsupported("pre_tokenizer without ByteLevel");
    impl_.pre_tokenizer = PreTokenizer(pattern);
  }

  std::string split_pattern(const json& step) {
    if (step.value("invert", false)) unsupported("Split with invert true");
    const std::string behavior = step.value("behavior", std::string("?"));
    if (behavior != "Isolated") unsupported(fmt::format("Split behavior '{}' (only Isolated)", behavior));
    const json pattern = step.value("pattern", json());
    if (!pattern.is_object() || !pattern.contains("Regex") || !pattern["Regex"].is_string()) {
      unsupported("Split pattern (only {\"Regex\": ...})");
    }
    std::string regex = pattern["Regex"].get<std::string>();
    if (regex.empty()) unsupported("empty Split regex");
    return regex;
  }

  void decoder(const json& d) {
    if (type_of(d) != "ByteLevel") unsupported(fmt::format("decoder '{}' (only ByteLevel)", d.is_null() ? "null" : type_of(d)));
  }

  // With add_special_tokens=False (imp's encode) these post-processors leave the ids alone.
  void post_processor(const json& p) {
    if (p.is_null()) return;
    const std::string type = type_of(p);
    if (type == "Sequence" && p.contains("processors") && p["processors"].is_array()) {
      for (const json& item : p["processors"]) post_processor(item);
    } else if (type != "ByteLevel" && type != "TemplateProcessing") {
      unsupported(fmt::format("post_processor '{}'", type));
    }
  }

  void model(const json& m, TokenizerJson& file) {
    if (!m.is_object()) fail("{}: model is not an object", origin_);
    if (m.contains("type") && type_of(m) != "BPE") unsupported(fmt::format("model '{}' (only BPE)", type_of(m)));
    if (m.value("byte_fallback", false)) unsupported("BPE byte_fallback true");
    if (m.contains("dropout") && !m["dropout"].is_null() && m["dropout"].get<double>() != 0.0) unsupported("BPE dropout");
    for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
      if (m.contains(key) && !m[key].is_null() && !m[key].get<std::string>().empty()) unsupported(fmt::format("BPE {}", key));
    }
    if (!file.has_vocab) fail("{}: model.vocab missing or not an object", origin_);
    if (!file.has_merges) fail("{}: model.merges missing or not an array", origin_);

    std::vector<BpeModel::Entry> entries;
    entries.reserve(file.vocab.size());
    for (auto& [token, id] : file.vocab) {
      if (id < 0 || id > INT32_MAX) fail("{}: model.vocab['{}'] is not a valid id", origin_, token);
      grow(static_cast<int32_t>(id));
      impl_.known[id] = 1;
      if (auto bytes = byte_level::chars_to_bytes(token)) {
        impl_.bytes[id] = *bytes;
        entries.push_back({std::move(*bytes), static_cast<int32_t>(id)});
      } else {
        // Not byte-level text: never produced by encoding; the decoder emits its UTF-8 as is.
        impl_.bytes[id] = token;
        impl_.spelled[id] = token;
        odd_vocab_[token] = static_cast<int32_t>(id);
      }
    }
    file.vocab = {};

    std::vector<BpeModel::MergeRule> rules;
    rules.reserve(file.merges.size());
    std::vector<std::tuple<size_t, std::string, std::string>> inert_merges;
    for (size_t rank = 0; rank < file.merges.size(); ++rank) {
      TokenizerJson::Merge& merge = file.merges[rank];
      if (!merge.is_pair) {
        const size_t space = merge.first.find(' ');
        if (space == std::string::npos || merge.first.find(' ', space + 1) != std::string::npos) {
          fail("{}: merge {} '{}' is not two tokens separated by one space", origin_, rank, merge.first);
        }
        merge.second = merge.first.substr(space + 1);
        merge.first.resize(space);
      }
      auto left_bytes = byte_level::chars_to_bytes(merge.first);
      auto right_bytes = byte_level::chars_to_bytes(merge.second);
      if (left_bytes && right_bytes) {
        rules.push_back({std::move(*left_bytes), std::move(*right_bytes)});
      } else {
        // A merge of non-byte-level tokens can never apply; it only has to name real tokens.
        inert_merges.emplace_back(rank, std::move(merge.first), std::move(merge.second));
        rules.push_back({{}, {}, /*applicable=*/false});
      }
    }
    file.merges = {};
    impl_.model.emplace(std::move(entries), rules, m.value("ignore_merges", false));
    model_vocab_size_ = static_cast<int64_t>(impl_.model->size() + odd_vocab_.size());
    for (auto& [token, id] : odd_vocab_) impl_.by_spelling[token] = id;
    for (const auto& [rank, left, right] : inert_merges) {
      for (const std::string& t : {left, right, left + right}) {
        if (!model_id_of(t)) fail("{}: merge {} uses '{}', which is not in the vocabulary", origin_, rank, t);
      }
    }

    if (m.contains("unk_token") && !m["unk_token"].is_null()) {
      for (int b = 0; b < 256; ++b) {
        if (!impl_.model->id_of(std::string(1, static_cast<char>(b)))) {
          unsupported("BPE unk_token with bytes missing from the vocabulary");
        }
      }
    }
  }

  // `tokenizers`' AddedVocabulary::add_tokens, in file order: an id comes from an earlier added
  // token or the model vocabulary with the same content, else it is the next free one.
  void added_tokens(const json& list) {
    if (!list.is_array()) fail("{}: added_tokens is not an array", origin_);
    std::vector<AddedToken> tokens;
    std::vector<int64_t> file_ids;
    for (const json& item : list) {
      // Every field is required, as `tokenizers` requires it.
      auto field = [&](const char* key) -> const json& {
        if (!item.is_object() || !item.contains(key)) {
          fail("{}: an added_tokens entry ({}) lacks \"{}\"", origin_, item.dump(), key);
        }
        return item[key];
      };
      AddedToken t;
      t.content = field("content").get<std::string>();
      t.single_word = field("single_word").get<bool>();
      t.lstrip = field("lstrip").get<bool>();
      t.rstrip = field("rstrip").get<bool>();
      t.normalized = field("normalized").get<bool>();
      t.special = field("special").get<bool>();
      file_ids.push_back(field("id").get<int64_t>());
      tokens.push_back(std::move(t));
    }
    std::vector<const AddedToken*> special_list, plain_list;
    std::unordered_map<std::string, bool> special_set;
    for (const AddedToken& t : tokens) {
      if (t.special && !t.content.empty() && !special_set.contains(t.content)) {
        special_list.push_back(&t);
        special_set[t.content] = true;
      }
    }
    std::unordered_map<std::string, int32_t> ids;
    std::vector<AddedToken> by_id;  // last definition of each id
    auto same = [](const AddedToken& a, const AddedToken& b) {
      return a.content == b.content && a.single_word == b.single_word && a.lstrip == b.lstrip && a.rstrip == b.rstrip &&
             a.normalized == b.normalized && a.special == b.special;
    };
    for (size_t i = 0; i < tokens.size(); ++i) {
      AddedToken& t = tokens[i];
      if (t.content.empty() || std::any_of(by_id.begin(), by_id.end(), [&](const AddedToken& d) { return same(d, t); })) {
        continue;
      }
      int32_t id;
      if (auto it = ids.find(t.content); it != ids.end()) {
        id = it->second;
      } else if (auto model_id = model_id_of(t.content)) {
        id = *model_id;
      } else if (ids.empty()) {
        id = static_cast<int32_t>(model_vocab_size_);
      } else {
        int64_t max_id = 0;
        for (const auto& [_, v] : ids) max_id = std::max<int64_t>(max_id, v);
        id = static_cast<int32_t>(max_id >= model_vocab_size_ ? max_id + 1 : model_vocab_size_);
      }
      if (file_ids[i] >= 0 && file_ids[i] != id) {
        log::warn("{}: added token '{}' has id {} in the file but {} by tokenizers' rules; using {}", origin_, t.content,
                  file_ids[i], id, id);
      }
      t.id = id;
      ids[t.content] = id;
      std::erase_if(by_id, [&](const AddedToken& d) { return d.id == id; });
      by_id.push_back(t);
      if (!special_set.contains(t.content)) plain_list.push_back(&t);
    }
    for (const auto* list_tokens : {&special_list, &plain_list}) {
      for (const AddedToken* t : *list_tokens) {
        const int32_t id = ids.at(t->content);
        if (t->normalized) {
          normalized_patterns_.push_back({impl_.normalizer.apply(t->content), id});
        } else {
          raw_patterns_.push_back({t->content, id});
        }
      }
    }
    // `tokenizers` looks a token up by its content as written, but a normalized token's id maps back
    // to its normalized content: that is what decoding emits and what "special" is checked against
    // (so a special token that normalization changes is not skipped; Hugging Face does the same).
    for (AddedToken& t : by_id) {
      impl_.by_spelling[t.content] = t.id;
      if (t.normalized) t.content = impl_.normalizer.apply(t.content);
      grow(t.id);
      impl_.known[t.id] = 1;
      impl_.special[t.id] = special_set.contains(t.content) ? 1 : 0;
      impl_.bytes[t.id] = byte_level::chars_to_bytes(t.content).value_or(t.content);
      impl_.spelled[t.id] = t.content;
    }
    std::sort(by_id.begin(), by_id.end(), [](const AddedToken& a, const AddedToken& b) { return a.id < b.id; });
    impl_.added = AddedVocabulary(by_id, raw_patterns_, normalized_patterns_);
    impl_.added_tokens = std::move(by_id);
  }

  std::optional<int32_t> model_id_of(const std::string& content) const {
    if (auto it = odd_vocab_.find(content); it != odd_vocab_.end()) return it->second;
    if (auto bytes = byte_level::chars_to_bytes(content)) return impl_.model->id_of(*bytes);
    return std::nullopt;
  }

  void grow(int32_t id) {
    const size_t size = static_cast<size_t>(id) + 1;
    if (impl_.known.size() >= size) return;
    impl_.known.resize(size);
    impl_.special.resize(size);
    impl_.bytes.resize(size);
  }

  std::string origin_;
  Tokenizer::Impl& impl_;
  std::unordered_map<std::string, int32_t> odd_vocab_;  // model tokens that are not byte-level text
  int64_t model_vocab_size_ = 0;
  std::vector<AddedVocabulary::Pattern> raw_patterns_, normalized_patterns_;
};

json parse_json(std::string_view text, std::string_view origin) {
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    fail("{}: not valid JSON ({})", origin, e.what());
  }
}

std::unique_ptr<Tokenizer::Impl> build(std::string_view tokenizer_json, std::string_view origin,
                                       std::string_view config_json, std::string_view config_origin) {
  auto impl = std::make_unique<Tokenizer::Impl>();
  Loader loader(origin, *impl);
  try {
    TokenizerJson file = parse_tokenizer_json(tokenizer_json, origin);
    loader.load(file);
    if (!config_json.empty()) loader.config(parse_json(config_json, config_origin), config_origin);
  } catch (const json::exception& e) {
    fail("{}: unexpected content ({})", origin, e.what());
  }
  return impl;
}

}  // namespace

Tokenizer Tokenizer::from_json(std::string_view tokenizer_json, std::string_view config_json, std::string_view origin) {
  return Tokenizer(build(tokenizer_json, origin, config_json, "tokenizer_config.json"));
}

Tokenizer Tokenizer::load(const fs::path& path) {
  const fs::path file = fs::is_directory(path) ? path / "tokenizer.json" : path;
  if (!fs::is_regular_file(file)) fail("no tokenizer.json at {}", file.string());
  const fs::path config = file.parent_path() / "tokenizer_config.json";
  const std::string config_text = fs::exists(config) ? read_file(config) : std::string();
  return Tokenizer(build(read_file(file), file.string(), config_text, config.string()));
}

}  // namespace imp::text
