// Filters over sequences and mappings: first/last/join/list/items, map/select/reject(attr),
// sort/dictsort/unique/reverse, min/max/sum, batch/slice. Like jinja2, map and select return
// generators (always truthy, no length) and reverse returns an iterator.
#include <algorithm>

#include "text/jinja/args.h"
#include "text/jinja/evaluator.h"
#include "text/jinja/filters.h"
#include "text/jinja/operators.h"
#include "text/jinja/unicode.h"

namespace imp::text::jinja {
namespace {

Value generator(std::vector<Value> items) { return Value::list(std::move(items), SeqKind::kIterator, "generator"); }

// jinja2's make_attrgetter: "a.b.0" looked up part by part with subscript rules.
class AttrGetter {
 public:
  AttrGetter(const Value& attribute, bool ignore_case, Value fallback = Value::none())
      : ignore_case_(ignore_case), fallback_(std::move(fallback)) {
    if (attribute.is_none()) return;
    if (!attribute.is_string()) {
      parts_.push_back(attribute);
      return;
    }
    const std::string& text = attribute.as_string();
    size_t start = 0;
    while (true) {
      const size_t dot = text.find('.', start);
      const std::string part = text.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
      const bool digits =
          !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
      parts_.push_back(digits ? Value(static_cast<int64_t>(std::stoll(part))) : Value(part));
      if (dot == std::string::npos) break;
      start = dot + 1;
    }
  }

  Value operator()(Value item) const {
    for (const Value& part : parts_) {
      item = get_item(item, part);
      if (!fallback_.is_none() && item.is_undefined()) item = fallback_;
    }
    if (ignore_case_ && item.is_string()) return Value(unicode::lower(item.as_string()));
    return item;
  }

 private:
  std::vector<Value> parts_;
  bool ignore_case_;
  Value fallback_;
};

Value filter_first(Evaluator&, const Value& value, CallArgs& args) {
  expect_no_args("first", args);
  if (value.is_sequence_kind(SeqKind::kIterator)) {
    if (std::optional<Value> item = next_item(value)) return *item;
    return Value::undefined("No first item, sequence was empty.");
  }
  std::vector<Value> items = iterate(value);
  if (items.empty()) return Value::undefined("No first item, sequence was empty.");
  return items.front();
}

Value filter_last(Evaluator&, const Value& value, CallArgs& args) {
  expect_no_args("last", args);
  if (value.is_sequence_kind(SeqKind::kIterator))
    raise(ErrorKind::kType, "'{}' object is not reversible", value.type_name());
  std::vector<Value> items = iterate(value);
  if (items.empty()) return Value::undefined("No last item, sequence was empty.");
  return items.back();
}

Value filter_join(Evaluator&, const Value& value, CallArgs& args) {
  const auto a = bind_args("join", args, {{"d", Value("")}, {"attribute", Value::none()}});
  const AttrGetter getter(a[1], false);
  const std::string separator = a[0].str();
  std::string out;
  bool first = true;
  for (const Value& item : iterate(value)) {
    if (!first) out += separator;
    first = false;
    out += (a[1].is_none() ? item : getter(item)).str();
  }
  return Value(std::move(out));
}

Value filter_list(Evaluator&, const Value& value, CallArgs& args) {
  expect_no_args("list", args);
  return Value::list(iterate(value));
}

Value filter_items(Evaluator&, const Value& value, CallArgs& args) {
  expect_no_args("items", args);
  if (value.is_undefined()) return generator({});
  if (!value.is_dict()) raise(ErrorKind::kType, "Can only get item pairs from a mapping.");
  std::vector<Value> items;
  for (const auto& [k, v] : value.as_dict().items) items.push_back(Value::tuple({k, v}));
  return generator(std::move(items));
}

Value filter_map(Evaluator& evaluator, const Value& value, CallArgs& args) {
  std::vector<Value> out;
  if (!value.truthy()) return generator({});
  if (args.positional.empty()) {
    Value attribute, fallback = Value::none();
    bool has_attribute = false;
    for (const auto& [k, v] : args.keyword) {
      if (k == "attribute") {
        attribute = v;
        has_attribute = true;
      } else if (k == "default") {
        fallback = v;
      } else {
        raise(ErrorKind::kType, "Unexpected keyword argument '{}'", k);
      }
    }
    if (!has_attribute) raise(ErrorKind::kType, "map requires a filter argument");
    const AttrGetter getter(attribute, false, fallback);
    for (const Value& item : iterate(value)) out.push_back(getter(item));
    return generator(std::move(out));
  }
  const std::string name = args.positional.front().str();
  CallArgs rest;
  rest.positional.assign(args.positional.begin() + 1, args.positional.end());
  rest.keyword = args.keyword;
  for (const Value& item : iterate(value)) {
    CallArgs call = rest;
    out.push_back(evaluator.apply_filter(name, item, call));
  }
  return generator(std::move(out));
}

Value select_or_reject(Evaluator& evaluator, const Value& value, CallArgs& args, bool lookup_attr, bool select) {
  if (!value.truthy()) return generator({});
  size_t offset = 0;
  Value attribute = Value::none();
  if (lookup_attr) {
    if (args.positional.empty()) raise(ErrorKind::kType, "Missing parameter for attribute name");
    attribute = args.positional[0];
    offset = 1;
  }
  const AttrGetter getter(attribute, false);
  std::optional<std::string> test;
  CallArgs rest;
  if (args.positional.size() > offset) {
    test = args.positional[offset].str();
    rest.positional.assign(args.positional.begin() + static_cast<long>(offset) + 1, args.positional.end());
    rest.keyword = args.keyword;
  }
  std::vector<Value> out;
  for (const Value& item : iterate(value)) {
    const Value subject = lookup_attr ? getter(item) : item;
    bool passed = false;
    if (test) {
      CallArgs call = rest;
      passed = evaluator.apply_test(*test, subject, call);
    } else {
      passed = subject.truthy();
    }
    if (passed == select) out.push_back(item);
  }
  return generator(std::move(out));
}

Value filter_select(Evaluator& e, const Value& v, CallArgs& a) { return select_or_reject(e, v, a, false, true); }
Value filter_reject(Evaluator& e, const Value& v, CallArgs& a) { return select_or_reject(e, v, a, false, false); }
Value filter_selectattr(Evaluator& e, const Value& v, CallArgs& a) { return select_or_reject(e, v, a, true, true); }
Value filter_rejectattr(Evaluator& e, const Value& v, CallArgs& a) { return select_or_reject(e, v, a, true, false); }

// Keys for sort: "a,b" sorts by several attributes, compared as lists.
Value multi_key(const std::vector<AttrGetter>& getters, const Value& item, bool ignore_case) {
  if (getters.empty()) {
    return Value::list({ignore_case && item.is_string() ? Value(unicode::lower(item.as_string())) : item});
  }
  std::vector<Value> keys;
  for (const AttrGetter& getter : getters) keys.push_back(getter(item));
  return Value::list(std::move(keys));
}

std::vector<Value> sorted(std::vector<Value> items, const std::vector<Value>& keys, bool reverse) {
  std::vector<size_t> order(items.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return reverse ? py_less(keys[b], keys[a]) : py_less(keys[a], keys[b]); });
  std::vector<Value> out;
  out.reserve(items.size());
  for (size_t i : order) out.push_back(std::move(items[i]));
  return out;
}

Value filter_sort(Evaluator&, const Value& value, CallArgs& args) {
  const auto a = bind_args("sort", args,
                           {{"reverse", Value(false)}, {"case_sensitive", Value(false)}, {"attribute", Value::none()}});
  const bool ignore_case = !a[1].truthy();
  std::vector<AttrGetter> getters;
  if (a[2].is_string()) {
    const std::string& spec = a[2].as_string();
    size_t start = 0;
    while (true) {
      const size_t comma = spec.find(',', start);
      getters.emplace_back(Value(spec.substr(start, comma == std::string::npos ? std::string::npos : comma - start)),
                           ignore_case);
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  } else if (!a[2].is_none()) {
    getters.emplace_back(a[2], ignore_case);
  }
  std::vector<Value> items = iterate(value);
  std::vector<Value> keys;
  for (const Value& item : items) keys.push_back(multi_key(getters, item, ignore_case));
  return Value::list(sorted(std::move(items), keys, a[0].truthy()));
}

Value filter_dictsort(Evaluator&, const Value& value, CallArgs& args) {
  const auto a =
      bind_args("dictsort", args, {{"case_sensitive", Value(false)}, {"by", Value("key")}, {"reverse", Value(false)}});
  const std::string by = a[1].str();
  if (by != "key" && by != "value") raise(ErrorKind::kType, "You can only sort by either \"key\" or \"value\"");
  if (!value.is_dict()) raise(ErrorKind::kType, "dictsort needs a mapping, not {}", value.type_name());
  std::vector<Value> items, keys;
  for (const auto& [k, v] : value.as_dict().items) {
    items.push_back(Value::tuple({k, v}));
    const Value& key = by == "key" ? k : v;
    keys.push_back(!a[0].truthy() && key.is_string() ? Value(unicode::lower(key.as_string())) : key);
  }
  return Value::list(sorted(std::move(items), keys, a[2].truthy()));
}

Value filter_unique(Evaluator&, const Value& value, CallArgs& args) {
  const auto a = bind_args("unique", args, {{"case_sensitive", Value(false)}, {"attribute", Value::none()}});
  const AttrGetter getter(a[1], !a[0].truthy());
  std::vector<Value> seen, out;
  for (const Value& item : iterate(value)) {
    const Value key = getter(item);
    if (key.is_dict() || key.is_sequence_kind(SeqKind::kList))
      raise(ErrorKind::kType, "unhashable type: '{}'", key.type_name());
    if (std::none_of(seen.begin(), seen.end(), [&](const Value& s) { return py_equal(s, key); })) {
      seen.push_back(key);
      out.push_back(item);
    }
  }
  return generator(std::move(out));
}

Value filter_reverse(Evaluator&, const Value& value, CallArgs& args) {
  expect_no_args("reverse", args);
  if (value.is_string()) return slice(value, Value::none(), Value::none(), Value(-1));
  std::vector<Value> items = iterate(value);
  std::reverse(items.begin(), items.end());
  if (value.is_sequence_kind(SeqKind::kIterator)) return Value::list(std::move(items));  // list(value); rv.reverse()
  const std::string label = value.is_dict()                           ? "dict_reversekeyiterator"
                            : value.is_sequence_kind(SeqKind::kRange) ? "range_iterator"
                            : value.is_sequence_kind(SeqKind::kView)  ? value.type_name() + "_reverseiterator"
                                                                      : "list_reverseiterator";
  return Value::list(std::move(items), SeqKind::kIterator, label);
}

Value min_max(const Value& value, CallArgs& args, bool want_max) {
  const auto a =
      bind_args(want_max ? "max" : "min", args, {{"case_sensitive", Value(false)}, {"attribute", Value::none()}});
  const AttrGetter getter(a[1], !a[0].truthy());
  const std::vector<Value> items = iterate(value);
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  size_t best = 0;
  Value best_key = getter(items[0]);
  for (size_t i = 1; i < items.size(); ++i) {
    Value key = getter(items[i]);
    if (want_max ? py_less(best_key, key) : py_less(key, best_key)) {
      best = i;
      best_key = std::move(key);
    }
  }
  return items[best];
}

Value filter_max(Evaluator&, const Value& value, CallArgs& args) { return min_max(value, args, true); }
Value filter_min(Evaluator&, const Value& value, CallArgs& args) { return min_max(value, args, false); }

Value filter_sum(Evaluator&, const Value& value, CallArgs& args) {
  const auto a = bind_args("sum", args, {{"attribute", Value::none()}, {"start", Value(0)}});
  const AttrGetter getter(a[0], false);
  Value total = a[1];
  for (const Value& item : iterate(value)) total = binary_op("+", total, getter(item));
  return total;
}

Value filter_batch(Evaluator&, const Value& value, CallArgs& args) {
  const auto a = bind_args("batch", args, {{"linecount"}, {"fill_with", Value::none()}});
  const int64_t size = a[0].as_int();
  if (size <= 0) raise(ErrorKind::kType, "batch size must be positive");
  std::vector<Value> batches, current;
  for (const Value& item : iterate(value)) {
    current.push_back(item);
    if (static_cast<int64_t>(current.size()) == size) {
      batches.push_back(Value::list(std::move(current)));
      current.clear();
    }
  }
  if (!current.empty()) {
    if (!a[1].is_none()) {
      while (static_cast<int64_t>(current.size()) < size) current.push_back(a[1]);
    }
    batches.push_back(Value::list(std::move(current)));
  }
  return generator(std::move(batches));
}

Value filter_slice(Evaluator&, const Value& value, CallArgs& args) {
  const auto a = bind_args("slice", args, {{"slices"}, {"fill_with", Value::none()}});
  const std::vector<Value> seq = iterate(value);
  const int64_t slices = a[0].as_int();
  if (slices <= 0) raise(ErrorKind::kType, "slice count must be positive");
  const int64_t length = static_cast<int64_t>(seq.size());
  const int64_t per_slice = length / slices;
  const int64_t with_extra = length % slices;
  int64_t offset = 0;
  std::vector<Value> out;
  for (int64_t i = 0; i < slices; ++i) {
    const int64_t start = offset + i * per_slice;
    if (i < with_extra) ++offset;
    const int64_t end = offset + (i + 1) * per_slice;
    std::vector<Value> part(seq.begin() + start, seq.begin() + end);
    if (!a[1].is_none() && i >= with_extra) part.push_back(a[1]);
    out.push_back(Value::list(std::move(part)));
  }
  return generator(std::move(out));
}

}  // namespace

void add_sequence_filters(FilterTable& table) {
  table.insert({
      {"first", filter_first},
      {"last", filter_last},
      {"join", filter_join},
      {"list", filter_list},
      {"items", filter_items},
      {"map", filter_map},
      {"select", filter_select},
      {"reject", filter_reject},
      {"selectattr", filter_selectattr},
      {"rejectattr", filter_rejectattr},
      {"sort", filter_sort},
      {"dictsort", filter_dictsort},
      {"unique", filter_unique},
      {"reverse", filter_reverse},
      {"max", filter_max},
      {"min", filter_min},
      {"sum", filter_sum},
      {"batch", filter_batch},
      {"slice", filter_slice},
  });
}

}  // namespace imp::text::jinja
