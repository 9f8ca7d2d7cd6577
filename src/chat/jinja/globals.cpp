// The template globals Hugging Face defines (raise_exception, strftime_now) and jinja2's own (range, dict,
// namespace). raise_exception's message is kept verbatim: it is what /apply-template and chat requests
// answer with (400).
#include <ctime>

#include "chat/jinja/interp.h"

namespace preface::chat::jinja {
namespace {

Value g_range(Interpreter& in, CallArgs& a) {
  int64_t start = 0, stop = 0, step = 1;
  for (const Value& v : a.args) {
    if (!v.is_number() || v.kind() == Value::Kind::Float) {
      type_error(std::string("'") + v.type_name() + "' object cannot be interpreted as an integer");
    }
  }
  if (a.args.size() == 1) {
    stop = a.args[0].as_int();
  } else if (a.args.size() == 2 || a.args.size() == 3) {
    start = a.args[0].as_int();
    stop = a.args[1].as_int();
    if (a.args.size() == 3) step = a.args[2].as_int();
  } else {
    type_error("range expected 1 to 3 arguments");
  }
  if (step == 0) fail(ErrorKind::Value, "range() arg 3 must not be zero");
  List out;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
    in.count_iteration();  // a huge range hits the loop cap before it exhausts memory
    out.push_back(Value::integer(i));
    if ((step > 0 && i > INT64_MAX - step) || (step < 0 && i < INT64_MIN - step)) break;
  }
  return Value::list(std::move(out));
}

Value g_dict(Interpreter&, CallArgs& a) {
  Value d = Value::dict();
  if (!a.args.empty() && a.args[0].is_mapping()) d.as_dict().items = a.args[0].as_dict().items;
  for (const auto& [k, v] : a.kwargs) d.as_dict().set(k, v);
  return d;
}

Value g_namespace(Interpreter&, CallArgs& a) {
  Value ns = Value::namespace_();
  if (!a.args.empty() && a.args[0].is_mapping()) ns.as_dict().items = a.args[0].as_dict().items;
  for (const auto& [k, v] : a.kwargs) ns.as_dict().set(k, v);
  return ns;
}

Value g_raise_exception(Interpreter&, CallArgs& a) {
  fail(ErrorKind::Raised, a.args.empty() ? std::string() : a.args[0].to_str().text);
}

Value g_strftime_now(Interpreter& in, CallArgs& a) {
  std::tm tm{};
  if (in.config().clock) {
    tm = in.config().clock();
  } else {
    const std::time_t now = std::time(nullptr);
    localtime_r(&now, &tm);
  }
  const std::string fmt = a.args.empty() ? std::string() : a.args[0].to_str().text;
  if (fmt.empty()) return Value::string("");
  std::string out(256 + fmt.size() * 8, '\0');
  const size_t n = std::strftime(out.data(), out.size(), fmt.c_str(), &tm);
  out.resize(n);
  return Value::string(std::move(out));
}

}  // namespace

Dict Interpreter::make_globals() {
  static const Dict kGlobals = [] {
    Dict g;
    g.set("range", Value::callable("range", g_range));
    g.set("dict", Value::callable("dict", g_dict));
    g.set("namespace", Value::callable("namespace", g_namespace));
    g.set("raise_exception", Value::callable("raise_exception", g_raise_exception));
    g.set("strftime_now", Value::callable("strftime_now", g_strftime_now));
    return g;
  }();
  return kGlobals;  // a copy: the callables are shared, immutable
}

}  // namespace preface::chat::jinja
