// The model's identity for the prefix cache: SHA-256 of the GGUF file's bytes (metadata and weights), as 64 hex
// characters. Hashing a large file takes a while, so the digest is cached, with the file's size and modification
// time, in the cache directory (cache_dir(): never beside the user's model file, which may be read-only or
// shared); a cached value is used only when both still match.
#pragma once
#include <string>

#include "util/mapped_file.h"

namespace preface::model {

// preface's cache directory: the one set_cache_dir() chose (`--cache-dir`), else $XDG_CACHE_HOME/preface, else
// ~/.cache/preface; "" when none can be named (nothing is cached then).
std::string cache_dir();
void set_cache_dir(std::string dir);

// SHA-256 over `file`'s bytes, hex encoded.
std::string sha256_hex(const MappedFile& file);

// Returns the fingerprint of the mapped model at file.path(), from the cache when valid, else computed and cached
// (failure to write the cache is not an error).
std::string model_fingerprint(const MappedFile& file);

}  // namespace preface::model
