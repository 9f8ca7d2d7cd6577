// Error type for everything that can go wrong with user input (files, requests, options).
// Bad input is an Error with a message that names what is wrong. A broken internal invariant is a bug, not an
// Error: the components that own state say how it is checked (check_invariants() throws std::logic_error).
#pragma once
#include <stdexcept>
#include <string>

namespace preface {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

}  // namespace preface
