#include "text/tokenizer_json.h"

#include "core/error.h"

namespace imp::text {
namespace {

using nlohmann::json;

// SAX handler: builds a DOM like nlohmann's own, except under root.model.vocab / root.model.merges.
class Reader : public nlohmann::json_sax<json> {
 public:
  Reader(TokenizerJson& out, std::string_view origin) : out_(out), origin_(origin) {}

  bool null() override { return value(json()); }
  bool boolean(bool v) override { return value(v); }
  bool number_integer(number_integer_t v) override { return number(v, true); }
  bool number_unsigned(number_unsigned_t v) override {
    return number(v <= static_cast<number_unsigned_t>(INT64_MAX) ? static_cast<int64_t>(v) : -1, true, json(v));
  }
  bool number_float(number_float_t v, const string_t&) override { return number(-1, false, json(v)); }
  bool binary(binary_t&) override { return value(json()); }

  bool string(string_t& v) override {
    if (mode_ == Mode::kMerges) {
      out_.merges.push_back({std::move(v), {}, false});
      return true;
    }
    if (mode_ == Mode::kMergePair) {
      pair_.push_back(std::move(v));
      return true;
    }
    if (mode_ == Mode::kVocab) malformed("model.vocab values must be ids");
    return value(json(std::move(v)));
  }

  bool key(string_t& k) override {
    key_ = std::move(k);
    return true;
  }

  bool start_object(std::size_t) override {
    if (mode_ != Mode::kDom) malformed(mode_ == Mode::kVocab ? "model.vocab values must be ids" : "model.merges entries");
    if (path_is("vocab")) {
      out_.has_vocab = true;
      mode_ = Mode::kVocab;
      return true;
    }
    return open(json::object());
  }

  bool end_object() override {
    if (mode_ == Mode::kVocab) {
      mode_ = Mode::kDom;
      return true;
    }
    stack_.pop_back();
    return true;
  }

  bool start_array(std::size_t) override {
    if (mode_ == Mode::kMerges) {
      mode_ = Mode::kMergePair;
      pair_.clear();
      return true;
    }
    if (mode_ != Mode::kDom) malformed(mode_ == Mode::kVocab ? "model.vocab values must be ids" : "model.merges entries");
    if (path_is("merges")) {
      out_.has_merges = true;
      mode_ = Mode::kMerges;
      return true;
    }
    return open(json::array());
  }

  bool end_array() override {
    if (mode_ == Mode::kMergePair) {
      if (pair_.size() != 2) malformed("model.merges entries must be \"a b\" or [a, b]");
      out_.merges.push_back({std::move(pair_[0]), std::move(pair_[1]), true});
      mode_ = Mode::kMerges;
      return true;
    }
    if (mode_ == Mode::kMerges) {
      mode_ = Mode::kDom;
      return true;
    }
    stack_.pop_back();
    return true;
  }

  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& e) override {
    fail("{}: not valid JSON (byte {}: {})", origin_, position, e.what());
  }

 private:
  enum class Mode { kDom, kVocab, kMerges, kMergePair };

  [[noreturn]] void malformed(std::string_view what) const { fail("{}: malformed {}", origin_, what); }

  // True when the value about to open is root.model.<name>.
  bool path_is(std::string_view name) const {
    return stack_.size() == 2 && key_ == name && stack_[1].is_model;
  }

  bool number(int64_t id, bool integer, json dom = json()) {
    if (mode_ == Mode::kVocab) {
      out_.vocab.emplace_back(std::move(key_), integer ? id : -1);
      return true;
    }
    if (mode_ != Mode::kDom) malformed("model.merges entries");
    return value(dom.is_null() ? json(id) : std::move(dom));
  }

  bool value(json v) {
    if (mode_ != Mode::kDom) malformed(mode_ == Mode::kVocab ? "model.vocab values must be ids" : "model.merges entries");
    if (stack_.empty()) {
      out_.root = std::move(v);
      return true;
    }
    json& parent = *stack_.back().node;
    if (parent.is_object()) {
      parent[key_] = std::move(v);
    } else {
      parent.push_back(std::move(v));
    }
    return true;
  }

  bool open(json container) {
    Frame frame;
    if (stack_.empty()) {
      out_.root = std::move(container);
      frame.node = &out_.root;
    } else {
      json& parent = *stack_.back().node;
      frame.is_model = stack_.size() == 1 && key_ == "model" && container.is_object();
      if (parent.is_object()) {
        frame.node = &(parent[key_] = std::move(container));
      } else {
        parent.push_back(std::move(container));
        frame.node = &parent.back();
      }
    }
    stack_.push_back(frame);
    return true;
  }

  struct Frame {
    json* node = nullptr;
    bool is_model = false;
  };

  TokenizerJson& out_;
  std::string_view origin_;
  std::vector<Frame> stack_;
  std::string key_;
  Mode mode_ = Mode::kDom;
  std::vector<std::string> pair_;
};

}  // namespace

TokenizerJson parse_tokenizer_json(std::string_view text, std::string_view origin) {
  TokenizerJson out;
  Reader reader(out, origin);
  json::sax_parse(text, &reader);
  return out;
}

}  // namespace imp::text
