// Reading a small configuration file (a key, a key list, a chat template) whole, refusing anything that is not a
// regular file: a FIFO or a device given as such a file would otherwise block start-up in open() or read()
// forever (a FIFO until some writer appears, /dev/zero never ends).
#pragma once
#include <cstddef>
#include <string>

namespace preface {

// The bytes of the regular file at `path` (symbolic links followed). Throws preface::Error naming `what` and
// the path when it cannot be opened, is not a regular file, or holds more than max_bytes.
std::string read_regular_file(const std::string& path, size_t max_bytes, const std::string& what);

}  // namespace preface
