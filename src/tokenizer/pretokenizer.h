// Byte-level BPE pre-tokenization: the regex sequence llama.cpp applies for a `tokenizer.ggml.pre` name, run
// with PCRE2 (UTF + UCP). Each regex splits every piece left by the previous one into its matches and the
// unmatched gaps between them (llama.cpp's unicode_regex_split), so no text is ever dropped.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace preface::tok {

// llama.cpp's settings for one pre-tokenizer type.
struct PreTokenizerSpec {
  std::string type;                  // canonical llama.cpp type, e.g. "gpt2", "llama3"
  std::vector<std::string> regexes;  // applied in order
  bool ignore_merges = false;        // a pre-token that is itself in the vocab is emitted whole (llama3, tekken)
  bool add_bos = false;              // default of tokenizer.ggml.add_bos_token for this type
  // SentencePiece-style BPE (gemma4): spaces become U+2581 before the split, pieces are raw UTF-8 (no GPT-2 byte
  // map), a piece missing from the vocab falls back to "<0xXX>" byte tokens, and a run of newlines that is a token
  // is taken whole.
  bool spm_style = false;
};

// Maps a tokenizer.ggml.pre value ("" when the key is absent, which llama.cpp treats as "default") to its
// spec. Throws preface::Error naming the value and listing the supported ones when it is not supported.
PreTokenizerSpec pre_tokenizer_spec(const std::string& pre);

// Compiled regex sequence. Immutable after construction, so one instance may be used from several threads.
class RegexSplitter {
 public:
  // Throws preface::Error when a pattern does not compile.
  explicit RegexSplitter(const std::vector<std::string>& patterns);
  ~RegexSplitter();
  RegexSplitter(const RegexSplitter&) = delete;
  RegexSplitter& operator=(const RegexSplitter&) = delete;

  // Splits `text` into pre-tokens. Like llama.cpp, the text is first decoded leniently (malformed bytes become
  // U+FFFD) and the pieces are re-encoded from the code points. Non-ASCII whitespace is matched as "\v" (as
  // llama.cpp does), so \s means exactly the Unicode White_Space set and literal non-ASCII spaces in a pattern
  // never match.
  std::vector<std::string> split(std::string_view text) const;

 private:
  struct Pattern;
  std::vector<std::unique_ptr<Pattern>> patterns_;
};

}  // namespace preface::tok
