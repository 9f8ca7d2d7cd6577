// Fuzz target: byte-level BPE encoding (llama.cpp's "gpt2" vocab model) of arbitrary bytes, over vocabs with
// different pre-tokenizer regexes (the GPT-2 vocab is also run under other `tokenizer.ggml.pre` values). Input:
// byte 0 picks the vocab (bits 1-3) and parse_special (bit 0); the rest is the text.
// Checks (support.h check_encode): ids in range, StreamDecoder == decode, lossless round trip for plain text
// (vocabs with a token for every byte).
#include <array>
#include <memory>

#include "support.h"
#include "util/error.h"

namespace {

// Loaded once (libFuzzer calls the target many times in one process); immutable afterwards.
const std::array<std::unique_ptr<preface::Tokenizer>, 8>& vocabs() {
  using preface::fuzz::load_shared_vocab;
  static const std::array<std::unique_ptr<preface::Tokenizer>, 8> v = {
      load_shared_vocab("ggml-vocab-gpt-2.gguf"),
      load_shared_vocab("ggml-vocab-deepseek-llm.gguf"),
      load_shared_vocab("ggml-vocab-falcon.gguf"),
      load_shared_vocab("ggml-vocab-starcoder.gguf"),
      load_shared_vocab("ggml-vocab-gpt-2.gguf", "llama-bpe"),
      load_shared_vocab("ggml-vocab-gpt-2.gguf", "qwen2"),
      load_shared_vocab("ggml-vocab-gpt-2.gguf", "gpt-4o"),
      load_shared_vocab("ggml-vocab-gpt-2.gguf", "tekken")};
  return v;
}

// lossless_vocabs()[k]: vocab k has a token for every byte value (support.h every_byte_has_token).
const std::array<bool, 8>& lossless_vocabs() {
  static const std::array<bool, 8> lossless = [] {
    std::array<bool, 8> out{};
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
  const size_t vocab = (data[0] >> 1) & 7;
  const preface::Tokenizer& tok = *vocabs()[vocab];
  const bool parse_special = (data[0] & 1) != 0;
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  preface::fuzz::check_encode(tok, text, parse_special, lossless_vocabs()[vocab]);
  return 0;
}
