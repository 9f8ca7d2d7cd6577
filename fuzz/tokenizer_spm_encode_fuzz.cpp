// Fuzz target: SentencePiece-style encoding (llama.cpp's "llama" vocab model) of arbitrary bytes.
// Input: byte 0 picks the vocab (bit 1) and parse_special (bit 0); the rest is the text.
// Checks (support.h check_encode): ids in range, StreamDecoder == decode, lossless round trip for plain text
// without U+2581.
#include <array>
#include <memory>

#include "support.h"
#include "util/error.h"

namespace {

// Loaded once (libFuzzer calls the target many times in one process); immutable afterwards.
const std::array<std::unique_ptr<preface::Tokenizer>, 2>& vocabs() {
  static const std::array<std::unique_ptr<preface::Tokenizer>, 2> v = {
      preface::fuzz::load_shared_vocab("ggml-vocab-llama-spm.gguf"),
      preface::fuzz::load_shared_vocab("ggml-vocab-phi-3.gguf")};
  return v;
}

// lossless_vocabs()[k]: vocab k has a token for every byte value (support.h every_byte_has_token).
const std::array<bool, 2>& lossless_vocabs() {
  static const std::array<bool, 2> lossless = [] {
    std::array<bool, 2> out{};
    for (size_t k = 0; k < out.size(); ++k) out[k] = preface::fuzz::every_byte_has_token(*vocabs()[k]);
    return out;
  }();
  return lossless;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  lossless_vocabs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t vocab = (data[0] >> 1) & 1;
  const preface::Tokenizer& tok = *vocabs()[vocab];
  const bool parse_special = (data[0] & 1) != 0;
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  // SentencePiece stores spaces as U+2581, so a U+2581 in the text decodes as a space (as in llama.cpp).
  const bool lossless = lossless_vocabs()[vocab] && text.find("\xE2\x96\x81") == std::string_view::npos;
  preface::fuzz::check_encode(tok, text, parse_special, lossless);
  return 0;
}
