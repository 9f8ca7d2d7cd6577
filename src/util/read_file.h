// Opening and reading files that must be regular files: a model, a key, a key list, a chat template, a cache
// record. A FIFO or a device in their place would otherwise block in open() or read() forever (a FIFO until some
// writer appears; /dev/zero never ends), at start-up or inside the engine's step.
#pragma once
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace preface {

// A descriptor opened by open_regular_file: fd >= 0 with the file's size, or fd < 0 with `error` the errno of
// open()/fstat(), or 0 when the path is not a regular file.
struct OpenedFile {
  int fd = -1;
  uint64_t size_bytes = 0;
  int error = 0;
};

// Opens `path` read-only, close-on-exec and non-blocking (which changes nothing for a regular file's reads), symbolic
// links followed, and checks that it is a regular file (else closes it). The caller closes fd.
OpenedFile open_regular_file(const std::string& path);

// Reads from fd's position until n bytes or the end of the file, retrying interrupted reads: the bytes read, or -1
// (errno set) on an error.
ssize_t read_fully(int fd, void* buf, size_t n);

// The bytes of the regular file at `path`. Throws preface::Error naming `what` and the path when it cannot be
// opened, is not a regular file, or holds more than max_bytes.
std::string read_regular_file(const std::string& path, size_t max_bytes, const std::string& what);

}  // namespace preface
