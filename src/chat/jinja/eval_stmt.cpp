// Statement execution: output, if, for (loop variable), set, macros and call blocks; scopes; Template entry
// points. Scopes: frames_[0] holds the globals and the render's variables, frames_[1] the template's top-level
// assignments; each for loop and macro call pushes a frame, so assignments inside them stay local (use a
// namespace to carry state out, as in jinja2). Macros see frames [0] and [1] and their own frame only.
#include "chat/jinja/interp.h"
#include "chat/jinja/parser.h"

namespace preface::chat::jinja {

Interpreter::Interpreter(const Dict& vars, const RenderConfig& config) : config_(config) {
  auto root = std::make_shared<Dict>(make_globals());
  for (const auto& [k, v] : vars.items) root->set(k, v);
  frames_.push_back(std::move(root));
  frames_.push_back(std::make_shared<Dict>());
}

Value Interpreter::lookup(const std::string& name) const {
  for (auto it = frames_.rbegin(); it != frames_.rend(); ++it) {
    if (const Value* v = (*it)->find(std::string_view(name))) return *v;
  }
  return Value::undefined("'" + name + "' is undefined");
}

void Interpreter::assign(const std::string& name, Value v) { frames_.back()->set(name, std::move(v)); }

void Interpreter::count_iteration() {
  if (++iterations_ > config_.max_loop_iterations) {
    fail(ErrorKind::Limit, "template loops ran more than " + std::to_string(config_.max_loop_iterations) +
                               " iterations");
  }
}

void Interpreter::check_output(const Str& out) const {
  if (out.text.size() > config_.max_output_bytes) {
    fail(ErrorKind::Limit, "template output exceeds " + std::to_string(config_.max_output_bytes) + " bytes");
  }
}

Flow Interpreter::exec(const Body& body, Str& out) {
  for (const NodePtr& n : body) {
    const Flow f = exec_node(*n, out);
    if (f != Flow::Normal) return f;
  }
  return Flow::Normal;
}

// Pushes a frame for the lifetime of the object (a for loop's scope).
struct FramePush {
  FramePush(std::vector<std::shared_ptr<Dict>>& f) : frames(f) { frames.push_back(std::make_shared<Dict>()); }
  ~FramePush() { frames.pop_back(); }
  std::vector<std::shared_ptr<Dict>>& frames;
};

Flow Interpreter::exec_node(const Node& n, Str& out) {
  switch (n.kind) {
    case NodeKind::Text:
      out.append(n.text);
      check_output(out);
      return Flow::Normal;
    case NodeKind::Output:
      out.append(eval(*n.expr).to_str());
      check_output(out);
      return Flow::Normal;
    case NodeKind::If:
      for (const auto& [cond, body] : n.branches) {
        if (eval(*cond).truthy()) return exec(body, out);
      }
      return exec(n.else_body, out);
    case NodeKind::For: return exec_for(n, out);
    case NodeKind::Set: exec_set(n); return Flow::Normal;
    case NodeKind::SetBlock: {
      Str body;
      exec(n.body, body);
      Value v = Value::string(std::move(body));
      if (n.expr) {
        // The filter chain was parsed over a placeholder literal; apply it to the body's text instead.
        std::vector<const Expr*> chain;
        for (const Expr* e = n.expr.get(); e->kind == ExprKind::Filter; e = e->args[0].get()) chain.push_back(e);
        for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
          CallArgs args;
          for (size_t i = 1; i < (*it)->args.size(); ++i) args.args.push_back(eval(*(*it)->args[i]));
          for (const auto& [k, e] : (*it)->kwargs) args.kwargs.emplace_back(k, eval(*e));
          v = apply_filter((*it)->name, v, args);
        }
      }
      assign(n.targets[0], std::move(v));
      return Flow::Normal;
    }
    case NodeKind::FilterBlock: {
      Str body;
      exec(n.body, body);
      Value v = Value::string(std::move(body));
      std::vector<const Expr*> chain;
      for (const Expr* e = n.expr.get(); e->kind == ExprKind::Filter; e = e->args[0].get()) chain.push_back(e);
      for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
        CallArgs args;
        for (size_t i = 1; i < (*it)->args.size(); ++i) args.args.push_back(eval(*(*it)->args[i]));
        for (const auto& [k, e] : (*it)->kwargs) args.kwargs.emplace_back(k, eval(*e));
        v = apply_filter((*it)->name, v, args);
      }
      out.append(v.to_str());
      check_output(out);
      return Flow::Normal;
    }
    case NodeKind::Macro: assign(n.text, make_macro(n)); return Flow::Normal;
    case NodeKind::CallBlock: {
      // `caller` renders the block's body with the call block's parameters.
      Value caller = make_macro(n);
      const Expr& call_expr = *n.expr;
      Value fn = eval(*call_expr.args[0]);
      CallArgs args;
      for (size_t i = 1; i < call_expr.args.size(); ++i) args.args.push_back(eval(*call_expr.args[i]));
      for (const auto& [k, e] : call_expr.kwargs) args.kwargs.emplace_back(k, eval(*e));
      args.kwargs.emplace_back("caller", caller);
      out.append(call(fn, args).to_str());
      check_output(out);
      return Flow::Normal;
    }
    case NodeKind::Break: return Flow::Break;
    case NodeKind::Continue: return Flow::Continue;
    case NodeKind::Scope: return exec(n.body, out);
  }
  return Flow::Normal;
}

namespace {

void unpack(Interpreter& in, const std::vector<std::string>& targets, const Value& v) {
  if (targets.size() == 1) {
    in.assign(targets[0], v);
    return;
  }
  List items = in.iterate(v);
  if (items.size() != targets.size()) {
    fail(ErrorKind::Value, "not enough values to unpack (expected " + std::to_string(targets.size()) + ", got " +
                               std::to_string(items.size()) + ")");
  }
  for (size_t i = 0; i < targets.size(); ++i) in.assign(targets[i], items[i]);
}

}  // namespace

Flow Interpreter::exec_for(const Node& n, Str& out) {
  if (n.recursive) fail(ErrorKind::Unsupported, "recursive loops are not supported");
  const Value seq = eval(*n.expr);
  List all = iterate(seq);
  FramePush scope(frames_);
  List items;
  if (n.cond) {
    for (const Value& v : all) {
      count_iteration();
      unpack(*this, n.targets, v);
      if (eval(*n.cond).truthy()) items.push_back(v);
    }
  } else {
    items = std::move(all);
  }
  const auto len = static_cast<int64_t>(items.size());
  // One loop object per loop, updated in place each iteration (as jinja2's LoopContext): no allocation per
  // iteration. Field order fixed: index, index0, revindex, revindex0, first, last, previtem, nextitem.
  Value loop = Value::dict();
  Dict& d = loop.as_dict();
  auto current = std::make_shared<int64_t>(0);
  const Value no_prev = Value::undefined("there is no previous item");
  const Value no_next = Value::undefined("there is no next item");
  for (const char* key : {"index", "index0", "revindex", "revindex0", "first", "last", "previtem", "nextitem"}) {
    d.set(key, Value());
  }
  d.set("length", Value::integer(len));
  d.set("depth", Value::integer(1));
  d.set("depth0", Value::integer(0));
  d.set("cycle", Value::callable("cycle", [current](Interpreter&, CallArgs& a) {
          if (a.args.empty()) fail(ErrorKind::Type, "no items for cycling given");
          return a.args[static_cast<size_t>(*current) % a.args.size()];
        }));
  for (int64_t i = 0; i < len; ++i) {
    count_iteration();
    *current = i;
    auto& f = d.items;
    f[0].second = Value::integer(i + 1);
    f[1].second = Value::integer(i);
    f[2].second = Value::integer(len - i);
    f[3].second = Value::integer(len - i - 1);
    f[4].second = Value::boolean(i == 0);
    f[5].second = Value::boolean(i == len - 1);
    f[6].second = i > 0 ? items[static_cast<size_t>(i) - 1] : no_prev;
    f[7].second = i + 1 < len ? items[static_cast<size_t>(i) + 1] : no_next;
    assign("loop", loop);
    unpack(*this, n.targets, items[static_cast<size_t>(i)]);
    if (exec(n.body, out) == Flow::Break) break;
  }
  if (len == 0) return exec(n.else_body, out);
  return Flow::Normal;
}

void Interpreter::exec_set(const Node& n) {
  Value v = eval(*n.expr);
  if (!n.attr.empty()) {
    Value target = lookup(n.targets[0]);
    if (target.kind() != Value::Kind::Namespace) {
      fail(ErrorKind::Type, "cannot assign attribute on non-namespace object");
    }
    target.as_dict().set(n.attr, std::move(v));
    return;
  }
  unpack(*this, n.targets, v);
}

// Swaps the frames for a macro call: globals, top level, and a fresh frame; restores them afterwards.
struct MacroScope {
  MacroScope(Interpreter& in) : interp(in), saved(std::move(in.frames_)) {
    interp.frames_ = {saved[0], saved[1], std::make_shared<Dict>()};
    if (++interp.call_depth > interp.config().max_call_depth) {
      fail(ErrorKind::Limit, "macro calls nested deeper than " + std::to_string(interp.config().max_call_depth));
    }
  }
  ~MacroScope() {
    interp.frames_ = std::move(saved);
    --interp.call_depth;
  }
  Interpreter& interp;
  std::vector<std::shared_ptr<Dict>> saved;
};

Value Interpreter::make_macro(const Node& n) {
  const Node* node = &n;
  const std::string name = n.kind == NodeKind::Macro ? n.text : "caller";
  return Value::callable(name, [node, name](Interpreter& in, CallArgs& a) {
    MacroScope scope(in);
    size_t pos = 0;
    for (const MacroParam& p : node->params) {
      const Value* given = nullptr;
      for (const auto& [k, v] : a.kwargs) {
        if (k == p.name) given = &v;
      }
      if (!given && pos < a.args.size()) given = &a.args[pos++];
      if (given) {
        in.assign(p.name, *given);
      } else if (p.default_value) {
        in.assign(p.name, in.eval(*p.default_value));
      } else {
        in.assign(p.name, Value::undefined("parameter '" + p.name + "' was not provided"));
      }
    }
    for (const auto& [k, v] : a.kwargs) {
      if (k == "caller") in.assign("caller", v);
    }
    List varargs(a.args.begin() + static_cast<std::ptrdiff_t>(std::min(pos, a.args.size())), a.args.end());
    in.assign("varargs", Value::list(std::move(varargs)));
    Str out;
    in.exec(node->body, out);
    return Value::string(std::move(out));
  });
}

Template Template::parse(std::string_view source, const Options& options) {
  LexOptions lex{options.trim_blocks, options.lstrip_blocks};
  Parser parser(tokenize(source, lex));
  Template t;
  t.body_ = std::make_shared<const Body>(parser.parse_template());
  return t;
}

Str Template::render(const Dict& vars, const RenderConfig& config) const {
  Interpreter in(vars, config);
  Str out;
  in.exec(*body_, out);
  return out;
}

}  // namespace preface::chat::jinja
