// Error type for everything that can go wrong with user input (files, requests, options).
// Bugs are asserts; bad input is an Error with a message that names what is wrong.
#pragma once
#include <stdexcept>
#include <string>

namespace preface {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

}  // namespace preface
