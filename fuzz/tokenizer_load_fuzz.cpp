// Fuzz target: arbitrary GGUF bytes as a tokenizer vocab. Tokenizer::from_gguf must either throw
// preface::Error or build a tokenizer that encodes sample texts into ids inside its vocab and decodes every
// token (whole and streamed) without failing.
#include <array>
#include <memory>
#include <optional>

#include "support.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace preface;
  const fuzz::MemFile mem(data, size);
  std::unique_ptr<Tokenizer> tok;
  try {
    const gguf::File file = gguf::File::open(mem.path());
    tok = Tokenizer::from_gguf(file);
  } catch (const Error&) {
    return 0;
  }
  fuzz::check(tok->n_vocab() > 0, "tokenizer with an empty vocab");
  for (const int32_t id : {tok->bos_id(), tok->eos_id(), tok->eot_id(), tok->unk_id()}) {
    fuzz::check(id >= -1 && id < tok->n_vocab(), "special id " + std::to_string(id) + " outside the vocab");
  }
  constexpr std::array<std::string_view, 5> kTexts = {
      "", "Hello world", " the cat ab <user> <s></s>", "h\xC3\xA9llo \xE4\xBD\xA0\xF0\x9F\xA6\x99 123",
      "bad \xFF\xC0 utf8 <|endoftext|>\n\n"};
  for (const std::string_view text : kTexts) {
    for (const bool parse_special : {false, true}) fuzz::check_encode(*tok, text, parse_special, false);
  }
  std::vector<int32_t> all_ids;  // [min(n_vocab, 512)]
  for (int32_t id = 0; id < std::min(tok->n_vocab(), 512); ++id) all_ids.push_back(id);
  const std::string whole = tok->decode(all_ids);
  StreamDecoder stream(*tok);
  std::string streamed;
  for (const int32_t id : all_ids) streamed += stream.push(id);
  streamed += stream.flush();
  fuzz::check(streamed == whole, "StreamDecoder differs from decode over the first ids");
  return 0;
}
