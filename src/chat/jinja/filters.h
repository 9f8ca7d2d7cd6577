// The filter table's shape, shared by filters.cpp and filters_seq.cpp.
#pragma once
#include <string>
#include <unordered_map>

#include "chat/jinja/interp.h"

namespace preface::chat::jinja {

using FilterFn = Value (*)(Interpreter&, const Value&, CallArgs&);

// Adds selectattr, rejectattr, select, reject, map, unique, sort, dictsort, reverse, batch, max, min, sum.
void add_sequence_filters(std::unordered_map<std::string, FilterFn>& table);

// jinja2's environment.getitem over a dotted path ("function.name", "0.name"): items first, then attributes.
Value get_path(Interpreter& in, const Value& item, const Value& path);

}  // namespace preface::chat::jinja
