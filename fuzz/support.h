// Helpers shared by the fuzz targets: opening fuzzer bytes as a GGUF file, loading the shared vocabularies,
// and the checks every target applies (only preface::Error may escape; a broken property aborts).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "gguf/reader.h"
#include "tokenizer/tokenizer.h"

namespace preface::fuzz {

// An anonymous in-memory file (memfd) holding `bytes`, opened through /proc/self/fd since gguf::File maps a
// path. The file lives as long as this object; one per input, so no state carries over between inputs.
class MemFile {
 public:
  MemFile(const uint8_t* data, size_t size_bytes);
  ~MemFile();
  MemFile(const MemFile&) = delete;
  MemFile& operator=(const MemFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  int fd_ = -1;
  std::string path_;
};

// Opens ../shared/vocab/<file_name> (beside the project root, or $PREFACE_SHARED_DIR/vocab) and builds its
// tokenizer; aborts with a message when the file is missing, since the target cannot run without it.
// A non-empty `pre` replaces tokenizer.ggml.pre (the file is rewritten in memory with gguf::Writer), to run a
// BPE vocab under another pre-tokenizer (e.g. "llama-bpe", for which ../shared has no vocab).
std::unique_ptr<Tokenizer> load_shared_vocab(const std::string& file_name, const std::string& pre = "");

// Prints `what` and aborts: libFuzzer records the input as a crash.
[[noreturn]] void fail(const std::string& what);
inline void check(bool ok, const std::string& what) {
  if (!ok) fail(what);
}

// `s` with bytes outside printable ASCII (and backslashes) written as \xHH, for failure messages.
std::string escaped(std::string_view s);

// True when every byte value is the whole text of some Normal or Byte token, so that any text can be encoded
// without loss (llama.cpp drops bytes that have no token, e.g. some control bytes in Falcon's vocab).
bool every_byte_has_token(const Tokenizer& tok);

// True when `text` is well-formed UTF-8 (no overlongs, surrogates or values above U+10FFFF).
bool valid_utf8(std::string_view text);

// Checks the tokenizer invariants on one input: every id of encode() is in [0, n_vocab); for valid UTF-8 text
// without parsing specials, decode(encode(text, true)) == text whenever the vocab can represent every byte
// (`lossless`: see every_byte_has_token); StreamDecoder over the ids yields decode()'s text.
void check_encode(const Tokenizer& tok, std::string_view text, bool parse_special, bool lossless);

}  // namespace preface::fuzz
