// Tokenizers built from GGUF metadata (`tokenizer.ggml.*`), matching llama.cpp token for token.
//   model "llama": SentencePiece-style BPE driven by token scores, byte fallback <0xXX>, "▁" for space,
//                  a space prefix added to the text (tokenizer.ggml.add_space_prefix, default true).
//   model "gpt2":  byte-level BPE: GPT-2 byte-to-unicode map, merge ranks from tokenizer.ggml.merges, and a
//                  pre-tokenizer regex chosen by tokenizer.ggml.pre (default/gpt-2, llama-bpe, qwen2,
//                  deepseek-llm, falcon, starcoder, ...).
// Token ids are int32_t in [0, n_vocab). A Tokenizer is immutable after from_gguf(): all methods are const and
// safe to call from several threads at once.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/reader.h"

namespace preface {

enum class TokenAttr : uint8_t { Normal, Unknown, Control, UserDefined, Unused, Byte };

// A byte range [offset, offset + length) of a text.
struct TextSpan {
  size_t offset = 0;
  size_t length = 0;
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Throws preface::Error when the metadata is missing, inconsistent or names an unsupported model/pre.
  static std::unique_ptr<Tokenizer> from_gguf(const gguf::File& file);

  // Encodes `text`. add_bos: prepend BOS (callers usually pass add_bos_default()); ignored when the vocab has
  // no BOS. parse_special: when true, control/user-defined token texts in `text` (e.g. "<|im_start|>") become
  // their ids; when false control tokens are tokenized as plain text. As in llama.cpp (and Hugging Face),
  // user-defined tokens are split out even when parse_special is false. EOS is never appended (see
  // add_eos_default()). Empty text gives no ids besides BOS.
  std::vector<int32_t> encode(std::string_view text, bool add_bos, bool parse_special = false) const {
    return encode(text, add_bos, parse_special, {});
  }
  // As above, except that no control (or unknown) token is parsed from a match overlapping one of the `plain`
  // spans: text there is tokenized as text whatever it holds. For chat prompts whose template text carries
  // control tokens and whose message content must never produce one (chat/chat_template.h). Around the spans
  // the text is tokenized as one piece, so a render without control-token look-alikes in its content gives the
  // same ids as encode(text, add_bos, true).
  virtual std::vector<int32_t> encode(std::string_view text, bool add_bos, bool parse_special,
                                      std::span<const TextSpan> plain) const = 0;

  // The raw bytes a token stands for ("▁" -> ' ', <0x0A> -> '\n', byte-level BPE unmapped). Control tokens
  // (BOS/EOS/...), the unknown token and unused tokens decode to an empty string; user-defined tokens to their
  // text. May be a partial UTF-8 sequence. Throws preface::Error for an id outside [0, n_vocab).
  virtual std::string token_to_bytes(int32_t id) const = 0;

  // Decodes a whole sequence: the concatenated token_to_bytes(). When the model adds a space prefix, one
  // leading ' ' of the first token (after a leading BOS, if any) is removed, so decode(encode(s, true)) == s.
  // (llama.cpp's detokenize strips it only when no BOS leads; this follows Hugging Face's decode.) No
  // clean_up_tokenization_spaces step is applied, so BPE decoding is the exact inverse of encoding.
  std::string decode(const std::vector<int32_t>& ids) const;

  int32_t n_vocab() const { return static_cast<int32_t>(pieces_.size()); }
  const std::string& piece(int32_t id) const { return pieces_.at(static_cast<size_t>(id)); }
  TokenAttr attr(int32_t id) const { return attrs_.at(static_cast<size_t>(id)); }
  int32_t bos_id() const { return bos_id_; }  // -1 when absent
  int32_t eos_id() const { return eos_id_; }  // -1 when absent
  int32_t eot_id() const { return eot_id_; }  // -1 when absent
  int32_t unk_id() const { return unk_id_; }  // -1 when absent
  bool add_bos_default() const { return add_bos_; }
  // tokenizer.ggml.add_eos_token; encode() never appends EOS, callers that want it append eos_id().
  bool add_eos_default() const { return add_eos_; }
  bool adds_space_prefix() const { return add_space_prefix_; }
  // True for ids that end generation (EOS, EOT, and other end-of-generation control tokens).
  bool is_end_of_generation(int32_t id) const;
  const std::vector<int32_t>& end_of_generation_ids() const { return eog_ids_; }  // sorted
  // What loading ignored in the file's metadata (e.g. an EOS id outside the vocabulary), one line each.
  const std::vector<std::string>& load_warnings() const { return warnings_; }

 protected:
  std::vector<std::string> pieces_;   // [n_vocab] token text as stored in the GGUF
  std::vector<TokenAttr> attrs_;      // [n_vocab]
  std::vector<int32_t> eog_ids_;      // end-of-generation ids, sorted
  std::vector<std::string> warnings_;
  int32_t bos_id_ = -1, eos_id_ = -1, eot_id_ = -1, unk_id_ = -1;
  bool add_bos_ = false;
  bool add_eos_ = false;
  bool add_space_prefix_ = false;
};

// Streams decoded text: bytes of a token that end mid UTF-8 character are held until the character is
// complete. When at_text_start is true the leading-space rule of Tokenizer::decode applies to the first token
// pushed (after a BOS); pass false when the tokens continue text decoded elsewhere (e.g. generated tokens
// after a prompt), where a leading space is part of the output.
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tok, bool at_text_start = true) : tok_(tok), first_(at_text_start) {}
  // Returns the text that became complete with this token (possibly empty).
  std::string push(int32_t id);
  // Returns any held bytes (an incomplete character at the end of the stream), as they are.
  std::string flush();

 private:
  const Tokenizer& tok_;
  std::string pending_;  // bytes of an incomplete UTF-8 character (at most 3)
  bool first_ = true;    // the leading-space rule is still to be applied
  bool after_bos_ = false;  // a leading BOS was pushed: the rule applies to the next token, whatever it is
};

}  // namespace preface
