// Tokenizers built from GGUF metadata (`tokenizer.ggml.*`), matching llama.cpp token for token.
//   model "llama": SentencePiece-style BPE driven by token scores, byte fallback <0xXX>, "▁" for space,
//                  a space prefix added to the text (tokenizer.ggml.add_space_prefix, default true).
//   model "gpt2":  byte-level BPE: GPT-2 byte-to-unicode map, merge ranks from tokenizer.ggml.merges, and a
//                  pre-tokenizer regex chosen by tokenizer.ggml.pre (default/gpt-2, llama-bpe, qwen2,
//                  deepseek-llm, falcon, starcoder, ...).
// Token ids are int32_t in [0, n_vocab).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/reader.h"

namespace preface {

enum class TokenAttr : uint8_t { Normal, Unknown, Control, UserDefined, Unused, Byte };

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Throws preface::Error when the metadata is missing, inconsistent or names an unsupported model/pre.
  static std::unique_ptr<Tokenizer> from_gguf(const gguf::File& file);

  // Encodes `text`. add_bos: prepend BOS (callers usually pass add_bos_default()). parse_special: when true,
  // control/user-defined token texts in `text` (e.g. "<|im_start|>") become their ids; when false they are
  // tokenized as plain text.
  virtual std::vector<int32_t> encode(std::string_view text, bool add_bos, bool parse_special = false) const = 0;

  // The raw bytes a token stands for ("▁" -> ' ', <0x0A> -> '\n', byte-level BPE unmapped). Control tokens
  // (BOS/EOS/...) decode to an empty string. May be a partial UTF-8 sequence.
  virtual std::string token_to_bytes(int32_t id) const = 0;

  // Decodes a whole sequence. Like llama.cpp, a SentencePiece space prefix on the first token after BOS
  // (or at the start) is removed when the model adds a space prefix.
  std::string decode(const std::vector<int32_t>& ids) const;

  int32_t n_vocab() const { return static_cast<int32_t>(pieces_.size()); }
  const std::string& piece(int32_t id) const { return pieces_.at(static_cast<size_t>(id)); }
  TokenAttr attr(int32_t id) const { return attrs_.at(static_cast<size_t>(id)); }
  int32_t bos_id() const { return bos_id_; }  // -1 when absent
  int32_t eos_id() const { return eos_id_; }  // -1 when absent
  int32_t eot_id() const { return eot_id_; }  // -1 when absent
  bool add_bos_default() const { return add_bos_; }
  bool adds_space_prefix() const { return add_space_prefix_; }
  // True for ids that end generation (EOS, EOT, and other end-of-generation control tokens).
  bool is_end_of_generation(int32_t id) const;

 protected:
  std::vector<std::string> pieces_;   // [n_vocab] token text as stored in the GGUF
  std::vector<TokenAttr> attrs_;      // [n_vocab]
  std::vector<int32_t> eog_ids_;      // end-of-generation ids
  int32_t bos_id_ = -1, eos_id_ = -1, eot_id_ = -1;
  bool add_bos_ = false;
  bool add_space_prefix_ = false;
};

// Streams decoded text: bytes of a token that end mid UTF-8 character are held until the character is
// complete. The leading-space rule of Tokenizer::decode applies to the first token pushed.
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tok) : tok_(tok) {}
  // Returns the text that became complete with this token (possibly empty).
  std::string push(int32_t id);
  // Returns any held bytes (an incomplete character at the end of the stream), as they are.
  std::string flush();

 private:
  const Tokenizer& tok_;
  std::string pending_;
  bool first_ = true;
};

}  // namespace preface
