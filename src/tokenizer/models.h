// The concrete tokenizers behind Tokenizer::from_gguf. VocabTokenizer does what both models share (special
// token splitting, BOS, the decode cache); SPM and BPE differ in how a run of plain text becomes ids and how
// a normal token's text maps back to bytes.
#pragma once
#include <array>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/reader.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab.h"

namespace preface::tok {

class VocabTokenizer : public Tokenizer {
 public:
  explicit VocabTokenizer(Vocab vocab);

  using Tokenizer::encode;
  std::vector<int32_t> encode(std::string_view text, bool add_bos, bool parse_special,
                              std::span<const TextSpan> plain) const override;
  std::string token_to_bytes(int32_t id) const override;

 protected:
  // Appends the ids of one run of plain text. after_special: the run starts the input or follows a special
  // token (or BOS), which is where SentencePiece adds its space prefix.
  virtual void encode_text(std::string_view text, bool after_special, std::vector<int32_t>& out) const = 0;
  // The bytes a Normal token's text stands for.
  virtual std::string normal_bytes(const std::string& piece) const = 0;
  // Fills bytes_ from the attributes and normal_bytes(); derived constructors call it once.
  void build_byte_cache();

  Vocab vocab_;                     // pieces/attrs/eog moved into the Tokenizer base; the rest kept here
  std::vector<std::string> bytes_;  // [n_vocab] token_to_bytes() results
};

// "llama" vocabs: llama.cpp's llm_tokenizer_spm.
std::unique_ptr<Tokenizer> make_spm_tokenizer(Vocab vocab);
// "gpt2" vocabs: byte-level BPE with the merges from tokenizer.ggml.merges of `file`.
std::unique_ptr<Tokenizer> make_bpe_tokenizer(Vocab vocab, const gguf::File& file);

// The value of a byte token "<0xXX>" (two upper- or lower-case hex digits), or -1 for any other text.
int parse_byte_piece(std::string_view piece);

// SentencePiece's space, U+2581 (LOWER ONE EIGHTH BLOCK), which SentencePiece-style vocabs (llama, gemma4) write for
// ' '. Appends `text` to out with every space escaped to it; and a piece's text with each one turned back into ' '.
inline constexpr std::string_view kSpaceMark = "\xE2\x96\x81";
void append_escaped_spaces(std::string_view text, std::string& out);
std::string unescape_spaces(std::string_view piece);

}  // namespace preface::tok
