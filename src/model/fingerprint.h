// The model's identity for the prefix cache: SHA-256 of the GGUF file's bytes (metadata and weights), as 64 hex
// characters. Hashing a large file takes a while, so the digest is cached beside the model in "<path>.fingerprint"
// (or, when that directory is read-only, in $XDG_CACHE_HOME/preface or ~/.cache/preface) together with the file's
// size and modification time; a cached value is used only when both still match.
#pragma once
#include <string>

#include "util/mapped_file.h"

namespace preface::model {

// SHA-256 over `file`'s bytes, hex encoded.
std::string sha256_hex(const MappedFile& file);

// Returns the fingerprint of the mapped model at file.path(), from the cache when valid, else computed and cached
// (failure to write the cache is not an error).
std::string model_fingerprint(const MappedFile& file);

}  // namespace preface::model
