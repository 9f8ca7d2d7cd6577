// Sequence filters: selectattr/rejectattr/select/reject, map, unique, sort, dictsort, reverse, batch, max, min,
// sum (jinja2 3.1 semantics; string comparisons are case-insensitive unless case_sensitive=true).
#include <algorithm>

#include "chat/jinja/interp.h"

namespace preface::chat::jinja {
namespace {

Value arg_or(const CallArgs& a, size_t pos, std::string_view name, Value dflt) {
  const Value* v = a.get(pos, name);
  return v ? *v : std::move(dflt);
}

// The sort key of a value: strings lower-cased (ASCII) unless case-sensitive.
Value sort_key(const Value& v, bool case_sensitive) {
  if (case_sensitive || !v.is_string()) return v;
  std::string s = v.text();
  for (char& c : s) {
    if (static_cast<unsigned char>(c) < 0x80) c = static_cast<char>(::tolower(c));
  }
  return Value::string(std::move(s));
}

// select/reject (attr == nullptr) and selectattr/rejectattr: keep items whose (attribute) passes the test. A falsy
// value (None, undefined, empty) gives an empty list, as jinja2's `if value: for item in value` does.
Value select_impl(Interpreter& in, const Value& seq, CallArgs& a, bool by_attr, bool keep) {
  if (!seq.truthy()) return Value::list({});
  size_t first_test_arg = 0;
  Value attr;
  if (by_attr) {
    if (a.args.empty()) type_error("selectattr/rejectattr need an attribute");
    attr = a.args[0];
    first_test_arg = 1;
  }
  std::string test;
  CallArgs test_args;
  if (a.args.size() > first_test_arg) {
    test = a.args[first_test_arg].to_str().text;
    test_args.args.assign(a.args.begin() + static_cast<std::ptrdiff_t>(first_test_arg) + 1, a.args.end());
  }
  List out;
  for (const Value& item : in.iterate(seq)) {
    in.count_iteration();
    const Value v = by_attr ? get_path(in, item, attr) : item;
    const bool pass = test.empty() ? v.truthy() : in.apply_test(test, v, test_args);
    if (pass == keep) out.push_back(item);
  }
  return Value::list(std::move(out));
}

Value f_select(Interpreter& in, const Value& v, CallArgs& a) { return select_impl(in, v, a, false, true); }
Value f_reject(Interpreter& in, const Value& v, CallArgs& a) { return select_impl(in, v, a, false, false); }
Value f_selectattr(Interpreter& in, const Value& v, CallArgs& a) { return select_impl(in, v, a, true, true); }
Value f_rejectattr(Interpreter& in, const Value& v, CallArgs& a) { return select_impl(in, v, a, true, false); }

Value f_map(Interpreter& in, const Value& seq, CallArgs& a) {
  List out;
  if (!seq.truthy()) return Value::list(std::move(out));  // jinja2: a falsy value maps to nothing
  if (const Value* attr = a.get(99, "attribute")) {
    const Value* dflt = a.get(99, "default");
    for (const Value& item : in.iterate(seq)) {
      in.count_iteration();
      Value v = get_path(in, item, *attr);
      out.push_back(v.is_undefined() && dflt ? *dflt : v);
    }
    return Value::list(std::move(out));
  }
  if (a.args.empty()) return Value::list(in.iterate(seq));
  const std::string filter = a.args[0].to_str().text;
  CallArgs rest;
  rest.args.assign(a.args.begin() + 1, a.args.end());
  rest.kwargs = a.kwargs;
  for (const Value& item : in.iterate(seq)) {
    in.count_iteration();
    CallArgs copy = rest;
    out.push_back(in.apply_filter(filter, item, copy));
  }
  return Value::list(std::move(out));
}

Value f_unique(Interpreter& in, const Value& seq, CallArgs& a) {
  const bool cs = arg_or(a, 0, "case_sensitive", Value::boolean(false)).truthy();
  const Value* attr = a.get(1, "attribute");
  List out, seen;
  for (const Value& item : in.iterate(seq)) {
    in.count_iteration();
    const Value key = sort_key(attr ? get_path(in, item, *attr) : item, cs);
    if (std::none_of(seen.begin(), seen.end(), [&](const Value& s) { return s.equals(key); })) {
      seen.push_back(key);
      out.push_back(item);
    }
  }
  return Value::list(std::move(out));
}

Value f_sort(Interpreter& in, const Value& seq, CallArgs& a) {
  const bool reverse = arg_or(a, 0, "reverse", Value::boolean(false)).truthy();
  const bool cs = arg_or(a, 1, "case_sensitive", Value::boolean(false)).truthy();
  const Value* attr = a.get(2, "attribute");
  std::vector<std::pair<Value, Value>> keyed;  // (key, item)
  for (const Value& item : in.iterate(seq)) keyed.emplace_back(sort_key(attr ? get_path(in, item, *attr) : item, cs), item);
  std::stable_sort(keyed.begin(), keyed.end(), [reverse](const auto& x, const auto& y) {
    return reverse ? y.first.less(x.first) : x.first.less(y.first);
  });
  List out;
  for (auto& [k, item] : keyed) out.push_back(std::move(item));
  return Value::list(std::move(out));
}

Value f_dictsort(Interpreter&, const Value& v, CallArgs& a) {
  if (!v.is_mapping()) type_error("You can only sort by either \"key\" or \"value\" of a mapping");
  const bool cs = arg_or(a, 0, "case_sensitive", Value::boolean(false)).truthy();
  const bool by_value = arg_or(a, 1, "by", Value::string("key")).to_str().text == "value";
  const bool reverse = arg_or(a, 2, "reverse", Value::boolean(false)).truthy();
  std::vector<std::pair<Value, Value>> items = v.as_dict().items;
  std::stable_sort(items.begin(), items.end(), [&](const auto& x, const auto& y) {
    const Value kx = sort_key(by_value ? x.second : x.first, cs);
    const Value ky = sort_key(by_value ? y.second : y.first, cs);
    return reverse ? ky.less(kx) : kx.less(ky);
  });
  List out;
  for (auto& [k, val] : items) out.push_back(Value::list({k, val}));
  return Value::list(std::move(out));
}

Value f_reverse(Interpreter& in, const Value& v, CallArgs&) {
  if (v.is_string()) {
    const std::vector<size_t> cps = code_points(v.text());
    Str out;
    for (size_t i = cps.size() - 1; i > 0; --i) out.append(v.as_str().substr(cps[i - 1], cps[i]));
    return Value::string(std::move(out));
  }
  List items = in.iterate(v);
  std::reverse(items.begin(), items.end());
  return Value::list(std::move(items));
}

Value f_batch(Interpreter& in, const Value& v, CallArgs& a) {
  const int64_t n = arg_or(a, 0, "linecount", Value::integer(1)).as_int();
  if (n <= 0) fail(ErrorKind::Value, "batch size must be positive");
  const Value* fill = a.get(1, "fill_with");
  List out, cur;
  for (const Value& item : in.iterate(v)) {
    cur.push_back(item);
    if (static_cast<int64_t>(cur.size()) == n) {
      out.push_back(Value::list(std::move(cur)));
      cur.clear();
    }
  }
  if (!cur.empty()) {
    while (fill && !fill->is_none() && static_cast<int64_t>(cur.size()) < n) cur.push_back(*fill);
    out.push_back(Value::list(std::move(cur)));
  }
  return Value::list(std::move(out));
}

Value extreme(Interpreter& in, const Value& v, CallArgs& a, bool want_max) {
  const bool cs = arg_or(a, 0, "case_sensitive", Value::boolean(false)).truthy();
  const Value* attr = a.get(1, "attribute");
  Value best, best_key;
  bool have = false;
  for (const Value& item : in.iterate(v)) {
    const Value key = sort_key(attr ? get_path(in, item, *attr) : item, cs);
    if (!have || (want_max ? best_key.less(key) : key.less(best_key))) {
      best = item;
      best_key = key;
      have = true;
    }
  }
  return have ? best : Value::undefined("No aggregated item, sequence was empty.");
}
Value f_max(Interpreter& in, const Value& v, CallArgs& a) { return extreme(in, v, a, true); }
Value f_min(Interpreter& in, const Value& v, CallArgs& a) { return extreme(in, v, a, false); }

Value f_sum(Interpreter& in, const Value& v, CallArgs& a) {
  const Value* attr = a.get(0, "attribute");
  Value total = arg_or(a, 1, "start", Value::integer(0));
  for (const Value& item : in.iterate(v)) total = in.binary("+", total, attr ? get_path(in, item, *attr) : item);
  return total;
}

}  // namespace

Value get_path(Interpreter& in, const Value& item, const Value& path) {
  if (!path.is_string()) return in.get_item(item, path);
  Value cur = item;
  const std::string& p = path.text();
  size_t b = 0;
  while (true) {
    const size_t dot = p.find('.', b);
    const std::string part = p.substr(b, dot == std::string::npos ? std::string::npos : dot - b);
    const bool digits = !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit) && part.size() < 18;
    if (cur.is_undefined()) return cur;
    cur = in.get_item(cur, digits ? Value::integer(std::stoll(part)) : Value::string(part));
    if (dot == std::string::npos) return cur;
    b = dot + 1;
  }
}

void add_sequence_filters(std::unordered_map<std::string, FilterFn>& m) {
  m.insert({{"select", f_select}, {"reject", f_reject}, {"selectattr", f_selectattr}, {"rejectattr", f_rejectattr},
            {"map", f_map}, {"unique", f_unique}, {"sort", f_sort}, {"dictsort", f_dictsort},
            {"reverse", f_reverse}, {"batch", f_batch}, {"max", f_max}, {"min", f_min}, {"sum", f_sum}});
}

}  // namespace preface::chat::jinja
