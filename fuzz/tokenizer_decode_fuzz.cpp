// Fuzz target: decoding arbitrary token id sequences, whole (Tokenizer::decode) and streamed (StreamDecoder,
// flushed at arbitrary points). Input: byte 0 picks the vocab (bits 0-1) and at_text_start (bit 2); then
// 3 bytes per token: a uint16 id (values >= 0xFFF8 stand for ids outside the vocab) and a flag byte whose bit 0
// flushes the stream after that token.
// Checks: an out-of-range id throws preface::Error from decode and from push; otherwise the streamed text
// (pushes and flushes concatenated) equals decode() (at_text_start) or the concatenated token bytes (not), and
// a flush never returns more than the 3 bytes of an incomplete UTF-8 character.
#include <array>
#include <climits>
#include <memory>
#include <vector>

#include "support.h"
#include "util/error.h"

namespace {

// Loaded once (libFuzzer calls the target many times in one process); immutable afterwards.
const std::array<std::unique_ptr<preface::Tokenizer>, 4>& vocabs() {
  using preface::fuzz::load_shared_vocab;
  static const std::array<std::unique_ptr<preface::Tokenizer>, 4> v = {
      load_shared_vocab("ggml-vocab-llama-spm.gguf"), load_shared_vocab("ggml-vocab-gpt-2.gguf"),
      load_shared_vocab("ggml-vocab-phi-3.gguf"), load_shared_vocab("ggml-vocab-deepseek-llm.gguf")};
  return v;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  vocabs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace preface;
  if (size == 0) return 0;
  const Tokenizer& tok = *vocabs()[data[0] & 3];
  const bool at_text_start = (data[0] & 4) != 0;
  const int32_t n_vocab = tok.n_vocab();
  const std::array<int32_t, 8> bad_ids = {-1, n_vocab, n_vocab + 1, INT32_MIN, INT32_MAX, -n_vocab, -2, 1 << 30};

  std::vector<int32_t> ids;        // [n_tokens]
  std::vector<bool> flush_after;   // [n_tokens]
  bool any_bad = false;
  for (size_t at = 1; at + 3 <= size; at += 3) {
    const uint16_t raw = static_cast<uint16_t>(data[at] | (data[at + 1] << 8));
    const bool bad = raw >= 0xFFF8;
    ids.push_back(bad ? bad_ids[raw - 0xFFF8] : raw % n_vocab);
    flush_after.push_back((data[at + 2] & 1) != 0);
    any_bad = any_bad || bad;
  }

  std::string whole;
  try {
    whole = tok.decode(ids);
    fuzz::check(!any_bad, "decode accepted an id outside the vocab");
  } catch (const Error&) {
    fuzz::check(any_bad, "decode threw on ids inside the vocab");
  }

  StreamDecoder stream(tok, at_text_start);
  std::string streamed;  // everything push/flush returned
  std::string raw;       // concatenated token bytes, for at_text_start == false
  for (size_t k = 0; k < ids.size(); ++k) {
    const bool bad = ids[k] < 0 || ids[k] >= n_vocab;
    try {
      streamed += stream.push(ids[k]);
      fuzz::check(!bad, "StreamDecoder::push accepted id " + std::to_string(ids[k]));
      raw += tok.token_to_bytes(ids[k]);
    } catch (const Error&) {
      fuzz::check(bad, "StreamDecoder::push threw on id " + std::to_string(ids[k]));
      return 0;  // the stream's state after a rejected id is not specified
    }
    if (flush_after[k]) {
      const std::string held = stream.flush();
      fuzz::check(held.size() <= 3, "flush returned " + std::to_string(held.size()) + " bytes (at most 3 held)");
      streamed += held;
    }
  }
  const std::string held = stream.flush();
  fuzz::check(held.size() <= 3, "final flush returned " + std::to_string(held.size()) + " bytes");
  streamed += held;
  fuzz::check(stream.flush().empty(), "a second flush returned bytes");
  fuzz::check(streamed == (at_text_start ? whole : raw), "streamed text differs from the decoded text");
  return 0;
}
